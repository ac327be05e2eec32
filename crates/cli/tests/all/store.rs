//! The commands on a PostgreSQL store (`--store` / `POD_STORE`): the same
//! sessions, statuses and plans as on the file store, and no log file.

use crate::support::*;
use pod_testkit::postgres::Postgres;

#[test]
fn every_command_works_on_a_postgres_store() {
    let pg = Postgres::start();
    let env = TestEnv::new();
    let pod = || {
        let mut cmd = env.pod();
        cmd.env("POD_STORE", pg.url());
        cmd
    };
    let script = env.script(
        "s.json",
        &script(vec![
            write_todos(&plan(0)),
            write_todos(&plan(3)),
            say("Done."),
            say("Resumed and answered."),
        ]),
    );
    let out = pod()
        .args(["run", "--json", "--script"])
        .arg(&script)
        .arg("Do it all")
        .output()
        .unwrap();
    assert_success(&out);
    let lines = ndjson(&out.stdout);
    let id = session_id(&lines);
    let started = events(&lines, "session_started");
    let log = started[0]["log_path"].as_str().unwrap();
    assert!(log.starts_with("postgresql://"), "{log}");
    assert!(log.ends_with(&format!("session {id}")), "{log}");
    assert!(!log.contains("password"), "{log}");
    // The log is in the database, not under POD_HOME.
    let file = env.pod_home().join("sessions").join(&id).join("log.jsonl");
    assert!(!file.exists(), "no log file on a postgres store");
    // Without the store, the file store has no such session.
    env.pod().args(["show", &id]).assert().code(1);

    let listed = pod().args(["sessions", "--json"]).output().unwrap();
    assert!(listed.status.success());
    let sessions: serde_json::Value = serde_json::from_slice(&listed.stdout).unwrap();
    let sessions = sessions.as_array().unwrap();
    assert_eq!(sessions.len(), 1);
    assert_eq!(sessions[0]["id"], id.as_str());
    assert_eq!(sessions[0]["status"], "done");
    assert_eq!(sessions[0]["todos"]["completed"], 3);

    let shown = pod().args(["show", &id[..8], "--json"]).output().unwrap();
    assert!(shown.status.success());
    let shown: serde_json::Value = serde_json::from_slice(&shown.stdout).unwrap();
    assert_eq!(shown["todos"].as_array().unwrap().len(), 3);

    // Resume goes on in the same session, from the database.
    let resumed = pod()
        .args(["resume", "--json", &id, "one more thing"])
        .output()
        .unwrap();
    assert_success(&resumed);
    let shown = pod().args(["show", &id, "--json"]).output().unwrap();
    let shown: serde_json::Value = serde_json::from_slice(&shown.stdout).unwrap();
    let last = shown["history"].as_array().unwrap().last().unwrap().clone();
    assert_eq!(last["text"], "Resumed and answered.", "{last}");

    // Fork and rm.
    let forked = pod()
        .args(["fork", &id, "--at", "2", "--json"])
        .output()
        .unwrap();
    assert_success(&forked);
    let fork: serde_json::Value = serde_json::from_slice(&forked.stdout).unwrap();
    let fork_id = fork["id"].as_str().unwrap().to_string();
    assert_eq!(fork["items"], 2);
    pod().args(["rm", "--yes", &fork_id]).assert().success();
    let listed = pod().args(["sessions", "--json"]).output().unwrap();
    let sessions: serde_json::Value = serde_json::from_slice(&listed.stdout).unwrap();
    assert_eq!(sessions.as_array().unwrap().len(), 1);
}

#[test]
fn a_store_that_is_down_is_a_clear_error() {
    let env = TestEnv::new();
    let dir = tempfile::tempdir().unwrap();
    let url = format!(
        "postgresql:///postgres?host={}&user=pod&password=hunter2",
        dir.path().display()
    );
    let out = env
        .pod()
        .env("POD_STORE", &url)
        .args(["sessions"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("cannot connect to"), "{stderr}");
    assert!(stderr.contains("hint: check the URL"), "{stderr}");
    assert!(
        !stderr.contains("hunter2"),
        "the password is never shown: {stderr}"
    );
}

#[test]
fn import_and_export_copy_sessions_verified() {
    let pg = Postgres::start();
    let env = TestEnv::new();
    let mut ids = Vec::new();
    for task in ["first", "second"] {
        let script = env.script(
            &format!("{task}.json"),
            &script(vec![
                write_todos(&plan(0)),
                write_todos(&plan(3)),
                say("Done."),
            ]),
        );
        let out = env
            .pod()
            .args(["run", "--json", "--script"])
            .arg(&script)
            .arg(task)
            .output()
            .unwrap();
        assert!(out.status.success());
        ids.push(session_id(&ndjson(&out.stdout)));
    }
    let on_pg = |args: &[&str]| {
        let out = env
            .pod()
            .env("POD_STORE", pg.url())
            .args(args)
            .output()
            .unwrap();
        assert_success(&out);
        String::from_utf8(out.stdout).unwrap()
    };
    let imported = on_pg(&["store", "import"]);
    assert!(imported.contains("2 of 2 sessions copied"), "{imported}");
    assert_eq!(
        imported.matches("copied and verified").count(),
        2,
        "{imported}"
    );
    for id in &ids {
        let file: serde_json::Value = env.show_json(id);
        let db: serde_json::Value = serde_json::from_str(&on_pg(&["show", id, "--json"])).unwrap();
        assert_eq!(file["history"], db["history"]);
        assert_eq!(file["todos"], db["todos"]);
        assert_eq!(db["session"]["status"], "done");
    }
    // Again: nothing is copied twice.
    let again = on_pg(&["store", "import"]);
    assert_eq!(
        again.matches("already there; verified").count(),
        2,
        "{again}"
    );

    // And back out into another file store.
    let backup = tempfile::tempdir().unwrap();
    let exported = on_pg(&[
        "store",
        "export",
        "--to",
        backup.path().to_str().unwrap(),
        &ids[0][..8],
    ]);
    assert!(exported.contains("1 of 1 session copied"), "{exported}");
    let source = std::fs::read(
        env.pod_home()
            .join("sessions")
            .join(&ids[0])
            .join("log.jsonl"),
    )
    .unwrap();
    let copy = std::fs::read(
        backup
            .path()
            .join("sessions")
            .join(&ids[0])
            .join("log.jsonl"),
    )
    .unwrap();
    let lines = |bytes: &[u8]| String::from_utf8_lossy(bytes).lines().count();
    assert_eq!(lines(&source), lines(&copy));
    let out = env
        .pod()
        .env("POD_HOME", backup.path())
        .args(["show", &ids[0], "--json"])
        .output()
        .unwrap();
    let exported: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(exported["history"], env.show_json(&ids[0])["history"]);
}

#[test]
fn import_and_export_keep_when_each_session_was_last_written() {
    use chrono::{DateTime, Utc};
    use pod_testkit::logs::SessionLog;
    use std::time::{Duration, SystemTime};
    let pg = Postgres::start();
    let env = TestEnv::new();
    // Two sessions last written days apart, long before the copy.
    let day = Duration::from_secs(24 * 3600);
    let when = [SystemTime::now() - 9 * day, SystemTime::now() - 2 * day];
    let mut ids = Vec::new();
    for (n, at) in when.iter().enumerate() {
        let log = SessionLog::new("m", &env.workspace())
            .prompt(&format!("Task {n}"))
            .answer("Done.", 100, 10)
            .updated(*at);
        log.write(&env.pod_home());
        ids.push(log.id().to_string());
    }
    let updated = |sessions: Vec<serde_json::Value>, id: &str| -> DateTime<Utc> {
        let session = sessions.iter().find(|s| s["id"] == id).expect("listed");
        session["updated_at"].as_str().unwrap().parse().unwrap()
    };
    // `pod ARGS` on the PostgreSQL store, or on the file store at `home`.
    let on = |pg_store: bool, home: &std::path::Path, args: &[&str]| {
        let mut pod = env.pod();
        if pg_store {
            pod.env("POD_STORE", pg.url());
        }
        let out = pod.env("POD_HOME", home).args(args).output().unwrap();
        assert_success(&out);
        out.stdout
    };
    let listed = |pg_store: bool, home: &std::path::Path| -> Vec<serde_json::Value> {
        serde_json::from_slice(&on(pg_store, home, &["sessions", "--json"])).unwrap()
    };
    let home = env.pod_home();
    on(true, &home, &["store", "import"]);
    let in_pg = listed(true, &home);
    let backup = tempfile::tempdir().unwrap();
    let to = backup.path().to_str().unwrap();
    on(true, &home, &["store", "export", "--to", to]);
    let exported = listed(false, backup.path());
    for (id, at) in ids.iter().zip(when) {
        let original = DateTime::<Utc>::from(at);
        // PostgreSQL keeps microseconds.
        let close = |copy: DateTime<Utc>| (copy - original).num_milliseconds().abs() < 1;
        let imported = updated(in_pg.clone(), id);
        assert!(close(imported), "{id}: {imported} for {original}");
        let back = updated(exported.clone(), id);
        assert!(close(back), "{id}: {back} for {original}");
    }
}
