//! A fleet bigger than its database connections: sessions queued in bulk
//! (`pod submit --from`), a worker running more sessions at once than it
//! has connections, and four workers on a PostgreSQL server with its
//! default connection limit.

use crate::fleet::{check_finished, Fleet, PATIENCE};
use crate::support::*;
use pod_testkit::postgres::Postgres;
use serde_json::{json, Value};
use std::path::Path;
use std::time::Instant;

/// A script whose bash call waits at a rendezvous: it leaves a mark in
/// `meet/` and waits for `meet/go`, which the test creates once every
/// session left its mark. Sessions get past it only if all of them run at
/// the same time.
fn rendezvous_script(fleet: &Fleet) -> std::path::PathBuf {
    fleet.env.script(
        "meet.json",
        &script(vec![
            write_todos(&plan(0)),
            call(
                "bash",
                json!({"command": "mkdir -p meet && mktemp meet/here.XXXXXX >/dev/null && \
                                   while [ ! -e meet/go ]; do sleep 1; done; echo met"}),
            ),
            write_todos(&plan(3)),
            say("All done."),
        ]),
    )
}

/// Queues `n` sessions with one `pod submit --from`; returns their ids.
fn submit_many(fleet: &Fleet, script: &Path, n: usize) -> Vec<String> {
    let tasks = fleet.env.workspace().join("tasks.txt");
    let lines: Vec<String> = (0..n).map(|i| format!("Meet the others ({i})")).collect();
    std::fs::write(&tasks, lines.join("\n")).unwrap();
    let out = fleet
        .pod()
        .args(["submit", "--yes", "--sandbox", "off", "--script"])
        .arg(script)
        .arg("--from")
        .arg(&tasks)
        .arg("--workspace")
        .arg(fleet.env.workspace())
        .output()
        .unwrap();
    assert_success(&out);
    let ids: Vec<String> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(str::to_string)
        .collect();
    assert_eq!(ids.len(), n, "one id per line");
    ids
}

/// Waits until `n` sessions left their mark.
fn wait_for_marks(fleet: &Fleet, n: usize) {
    let meet = fleet.env.workspace().join("meet");
    let deadline = Instant::now() + PATIENCE * 3;
    loop {
        let marks = std::fs::read_dir(&meet).map(|dir| dir.count()).unwrap_or(0);
        if marks >= n {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "only {marks} of {n} sessions reached the rendezvous"
        );
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
}

/// Connections the workers hold now (`application_name` = pod).
fn pod_connections(fleet: &Fleet) -> i64 {
    fleet.query(
        "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'pod'",
        &[],
    )[0]
    .get(0)
}

fn wait_exit(child: &mut std::process::Child) {
    let deadline = Instant::now() + PATIENCE;
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            assert!(status.success(), "the worker exited with {status}");
            return;
        }
        assert!(Instant::now() < deadline, "the worker never exited");
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

#[test]
fn a_worker_runs_more_sessions_at_once_than_it_has_connections() {
    let fleet = Fleet::new();
    let script = rendezvous_script(&fleet);
    let ids = submit_many(&fleet, &script, 12);
    let (mut worker, _lines) = fleet.worker(&[
        "--workers",
        "12",
        "--db-connections",
        "2",
        "--exit-when-idle",
    ]);
    wait_for_marks(&fleet, 12);
    let held = pod_connections(&fleet);
    assert!(
        held <= 2,
        "twelve running sessions share two connections, saw {held}"
    );
    std::fs::write(fleet.env.workspace().join("meet/go"), "").unwrap();
    wait_exit(&mut worker);
    for id in &ids {
        let history = check_finished(&fleet, id);
        let result = crate::fleet::bash_result(&history);
        assert!(
            result.contains("met"),
            "{id} passed the rendezvous: {result}"
        );
    }
}

#[test]
fn four_workers_fit_a_default_postgres_server() {
    // 100 connections; four workers running 30 sessions each would have
    // needed 124 with a connection per session.
    let fleet = Fleet::on(Postgres::start_with_default_limits());
    let script = rendezvous_script(&fleet);
    let ids = submit_many(&fleet, &script, 120);
    let mut workers: Vec<_> = (0..4)
        .map(|_| fleet.worker(&["--workers", "30", "--exit-when-idle"]))
        .collect();
    wait_for_marks(&fleet, 120);
    let held = pod_connections(&fleet);
    assert!(
        held <= 4 * 16,
        "each worker holds at most 16 connections, saw {held}"
    );
    std::fs::write(fleet.env.workspace().join("meet/go"), "").unwrap();
    for (worker, _) in &mut workers {
        wait_exit(worker);
    }
    for id in &ids {
        check_finished(&fleet, id);
    }
}

#[test]
fn submit_from_a_file_queues_every_line_or_none() {
    let fleet = Fleet::new();
    let script = fleet.env.script("say.json", &script(vec![say("ok")]));
    let other = fleet.env.workspace().join("other");
    std::fs::create_dir_all(&other).unwrap();
    let tasks = fleet.env.workspace().join("tasks.jsonl");
    std::fs::write(
        &tasks,
        format!(
            "First task\n\n# a comment\n{}\nThird task\n",
            json!({"task": "Second task", "workspace": other, "max_turns": 7})
        ),
    )
    .unwrap();
    let out = fleet
        .pod()
        .args(["submit", "--yes", "--script"])
        .arg(&script)
        .arg("--from")
        .arg(&tasks)
        .args(["--json"])
        .output()
        .unwrap();
    assert_success(&out);
    let ids: Vec<String> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|line| {
            let value: Value = serde_json::from_str(line).unwrap();
            value["session_id"].as_str().unwrap().to_string()
        })
        .collect();
    assert_eq!(ids.len(), 3);
    let shown: Vec<Value> = ids.iter().map(|id| fleet.show(id)).collect();
    let tasks: Vec<&str> = shown
        .iter()
        .map(|s| s["history"][0]["text"].as_str().unwrap())
        .collect();
    assert_eq!(tasks, ["First task", "Second task", "Third task"]);
    for s in &shown {
        assert_eq!(s["session"]["status"], "queued", "{s}");
    }
    let workspaces: Vec<String> = shown
        .iter()
        .map(|s| s["session"]["workspace"].as_str().unwrap().to_string())
        .collect();
    let workspace = fleet.env.workspace().canonicalize().unwrap();
    assert_eq!(workspaces[0], workspace.display().to_string());
    assert_eq!(
        workspaces[1],
        other.canonicalize().unwrap().display().to_string()
    );

    // A bad line queues nothing and says where it is.
    let bad = fleet.env.workspace().join("bad.txt");
    std::fs::write(&bad, "Fine\n{\"task\": \"x\", \"max_turns\": \"many\"}\n").unwrap();
    let out = fleet
        .pod()
        .args(["submit", "--yes", "--script"])
        .arg(&script)
        .arg("--from")
        .arg(&bad)
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("bad.txt:2"), "{stderr}");
    let listed = fleet.pod().args(["sessions", "--json"]).output().unwrap();
    let listed: Value = serde_json::from_slice(&listed.stdout).unwrap();
    assert_eq!(
        listed.as_array().map(Vec::len),
        Some(3),
        "nothing more was queued: {listed}"
    );
}
