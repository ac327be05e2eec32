//! `pod schedule` on the file store, fired by one `pod serve` without a
//! fleet: one session per fire time, each recording the schedule as its
//! origin; a server killed and restarted runs the latest missed fire time
//! once and repeats none; a paused schedule fires nothing, `rm` removes it,
//! and a second server on the same home does not fire (the lock).

use crate::fleet::{lines_of, wait_line};
use crate::support::*;
use serde_json::{json, Value};
use std::collections::BTreeSet;
use std::process::{Child, Stdio};
use std::sync::mpsc;
use std::time::Duration;

fn add(env: &TestEnv, name: &str, extra: &[&str]) {
    add_with(env, name, extra, vec![say("Checked.")]);
}

fn add_with(env: &TestEnv, name: &str, extra: &[&str], steps: Vec<Value>) {
    let script = env.script(&format!("{name}.json"), &script(steps));
    let out = env
        .pod()
        .args(["schedule", "add", name])
        .args(extra)
        .args(["--yes", "--script"])
        .arg(&script)
        .arg(format!("The {name} task"))
        .output()
        .unwrap();
    assert_success(&out);
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(said.contains(&format!("schedule {name}:")), "{said}");
}

fn schedule(env: &TestEnv, verb: &str, name: &str) {
    let out = env.pod().args(["schedule", verb, name]).output().unwrap();
    assert_success(&out);
}

fn show(env: &TestEnv, name: &str) -> Value {
    let out = env
        .pod()
        .args(["schedule", "show", name, "--json"])
        .output()
        .unwrap();
    assert_success(&out);
    serde_json::from_slice(&out.stdout).unwrap()
}

/// `pod serve` on the file store, its stdout read line by line.
fn serve(env: &TestEnv) -> (Child, mpsc::Receiver<String>) {
    let mut child = env
        .pod_process()
        .arg("serve")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let lines = lines_of(&mut child);
    wait_line(&lines, "firing the schedules");
    (child, lines)
}

fn millis(value: &Value) -> i64 {
    let text = value.as_str().unwrap_or_else(|| panic!("a time: {value}"));
    chrono::DateTime::parse_from_rfc3339(text)
        .unwrap()
        .timestamp_millis()
}

/// The fire times schedule `name` started a session for, oldest first,
/// and the sessions, as its record says.
fn recorded_fires(env: &TestEnv, name: &str) -> Vec<(i64, String)> {
    let shown = show(env, name);
    let mut fires: Vec<(i64, String)> = shown["recent"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| !f["session"].is_null())
        .map(|f| (millis(&f["fire_at"]), f["session"].as_str().unwrap().into()))
        .collect();
    fires.sort();
    fires
}

/// The fire times the sessions started by schedule `name` record as their
/// origin, one per session, sorted, with the sessions' ids.
fn session_origins(env: &TestEnv, name: &str) -> Vec<(i64, String)> {
    let mut found: Vec<(i64, String)> = env
        .sessions_json()
        .iter()
        .filter(|s| s["origin"]["kind"] == "schedule" && s["origin"]["name"] == name)
        .map(|s| {
            (
                millis(&s["origin"]["fire_at"]),
                s["id"].as_str().unwrap().into(),
            )
        })
        .collect();
    found.sort();
    found
}

fn assert_one_session_per_fire_time(env: &TestEnv, name: &str) -> Vec<(i64, String)> {
    let fires = recorded_fires(env, name);
    let times: BTreeSet<i64> = fires.iter().map(|f| f.0).collect();
    assert_eq!(times.len(), fires.len(), "a fire time repeated: {fires:?}");
    assert_eq!(
        session_origins(env, name),
        fires,
        "sessions vs fire records"
    );
    fires
}

#[test]
fn every_fire_time_starts_one_session_on_a_file_store_server() {
    let env = TestEnv::new();
    add(&env, "tick", &["--every", "2s", "--overlap", "allow"]);
    let (mut server, _lines) = serve(&env);
    // The schedule's fire times are the scenario: about five in 10 s.
    std::thread::sleep(Duration::from_secs(10));
    schedule(&env, "pause", "tick");
    server.kill().unwrap();
    server.wait().unwrap();

    let fires = assert_one_session_per_fire_time(&env, "tick");
    assert!(fires.len() >= 3, "about five fire times in 10 s: {fires:?}");
    // None missed: consecutive fire times are one period apart.
    for pair in fires.windows(2) {
        assert_eq!(pair[1].0 - pair[0].0, 2000, "a fire time missed: {fires:?}");
    }
    let shown = show(&env, "tick");
    assert_eq!(shown["fires"], fires.len() as u64, "{shown}");
    assert_eq!(shown["missed"], 0, "{shown}");
    // The sessions ran: each answered its task.
    let (_, first) = &fires[0];
    let session = env.show_json(first);
    let history = session["history"].as_array().unwrap();
    let texts: Vec<_> = history.iter().map(|item| item["text"].clone()).collect();
    assert_eq!(texts, ["The tick task", "Checked."], "{session}");
    assert_eq!(session["session"]["status"], "done", "{session}");
}

#[test]
fn a_server_killed_and_restarted_runs_the_latest_missed_fire_time_once() {
    let env = TestEnv::new();
    add(&env, "tick", &["--every", "2s", "--overlap", "allow"]);
    let (mut server, lines) = serve(&env);
    wait_line(&lines, "schedule tick fired for");
    server.kill().unwrap();
    server.wait().unwrap();
    let before = recorded_fires(&env, "tick");
    // Down across three fire times or more.
    std::thread::sleep(Duration::from_secs(7));
    let (mut server, lines) = serve(&env);
    let caught_up = wait_line(&lines, "schedule tick fired for");
    schedule(&env, "pause", "tick");
    server.kill().unwrap();
    server.wait().unwrap();

    assert!(
        caught_up.contains("missed while no server ran"),
        "{caught_up}"
    );
    let fires = assert_one_session_per_fire_time(&env, "tick");
    assert!(fires.starts_with(&before), "{before:?} then {fires:?}");
    // The first fire after the restart is the latest passed one: more than
    // one period after the last before the kill.
    let after = &fires[before.len()];
    let last_before = before.last().unwrap();
    assert!(after.0 - last_before.0 >= 6000, "{before:?} then {fires:?}");
    let shown = show(&env, "tick");
    assert!(shown["missed"].as_u64().unwrap() >= 2, "{shown}");
}

#[test]
fn a_paused_schedule_fires_nothing_rm_removes_it_and_a_second_server_does_not_fire() {
    let env = TestEnv::new();
    add(&env, "tick", &["--every", "1s"]);
    schedule(&env, "pause", "tick");
    let (mut server, _lines) = serve(&env);

    // A second server on the same home finds the lock held and says so.
    // Bounded: a second server that took the lock would run for ever.
    let out = env
        .pod()
        .arg("serve")
        .timeout(crate::fleet::PATIENCE)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(
        said.contains("another `pod serve` fires the schedules"),
        "{said}"
    );

    // Three fire times pass while paused.
    std::thread::sleep(Duration::from_secs(3));
    let shown = show(&env, "tick");
    assert_eq!(
        (shown["fires"].as_u64(), shown["paused"].as_bool()),
        (Some(0), Some(true))
    );
    assert!(session_origins(&env, "tick").is_empty());

    schedule(&env, "rm", "tick");
    let out = env
        .pod()
        .args(["schedule", "show", "tick"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("no schedule named tick"));
    let out = env
        .pod()
        .args(["schedule", "list", "--json"])
        .output()
        .unwrap();
    assert_success(&out);
    assert!(
        out.stdout.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    server.kill().unwrap();
    server.wait().unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn a_file_store_api_server_fires_its_schedules_and_lists_them() {
    let env = TestEnv::new();
    add(&env, "tick", &["--every", "1s", "--overlap", "allow"]);
    // The server's own model: what a schedule added through the API runs.
    let own = env.script("api-model.json", &script(vec![say("From the API.")]));
    let mut command = env.pod_process();
    command.arg("--script").arg(&own);
    let server = crate::http::Server::start_with(command, &env);
    let deadline = std::time::Instant::now() + crate::fleet::PATIENCE;
    // The session the schedule started runs in the server: the API shows
    // it, done, with the schedule as its origin.
    let session = loop {
        let listed = server.get("/schedules").await;
        let tick = listed["schedules"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["name"] == "tick")
            .cloned()
            .unwrap_or_else(|| panic!("{listed}"));
        if let Some(id) = tick["last_session"].as_str() {
            let shown = server.get(&format!("/sessions/{id}")).await;
            if shown["session"]["status"] == "done" {
                break shown;
            }
        }
        assert!(std::time::Instant::now() < deadline, "{listed}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(session["session"]["origin"]["name"], "tick", "{session}");
    schedule(&env, "pause", "tick");

    // `run-now` of a schedule not due for hours: the server starts its
    // session within a second; a paused one is refused.
    add(&env, "nightly", &["--cron", "0 3 * * *"]);
    let out = env
        .pod()
        .args(["schedule", "run-now", "tick"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("schedule tick is paused"));
    schedule(&env, "run-now", "nightly");
    let started = loop {
        let shown = show(&env, "nightly");
        if let Some(id) = shown["last_session"].as_str() {
            break id.to_string();
        }
        assert!(std::time::Instant::now() < deadline, "{shown}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let origins = session_origins(&env, "nightly");
    assert_eq!(origins.len(), 1, "{origins:?}");
    assert_eq!(origins[0].1, started);
    assert_eq!(show(&env, "nightly")["fires"], 1);

    // Added through the API, its session held to the server's ceiling.
    let added = |body: serde_json::Value| {
        let server = &server;
        async move { server.post("/schedules", &body.to_string()).await }
    };
    let (status, made) = added(json!({
        "name": "hourly", "every": "1h", "start": {"task": "From the API"}
    }))
    .await;
    assert_eq!(status, 201, "{made}");
    assert_eq!(made["name"], "hourly", "{made}");
    assert_eq!(show(&env, "hourly")["task"], "From the API");
    let (status, _) = added(json!({"name": "hourly", "every": "1h", "start": {"task": "x"}})).await;
    assert_eq!(status, 409);
    let (status, _) = added(json!({"name": "bad", "every": "soon", "start": {"task": "x"}})).await;
    assert_eq!(status, 400);
    let (status, refused) = added(json!({
        "name": "outside", "every": "1h", "start": {"task": "x", "workspace": "/"}
    }))
    .await;
    assert_eq!(status, 403, "{refused}");

    // Paused and removed through the API (the dashboard's buttons).
    let patched = server
        .request(reqwest::Method::PATCH, "/schedules/nightly")
        .header("content-type", "application/json")
        .body(json!({"paused": true}).to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(patched.status(), 200);
    let patched: serde_json::Value = patched.json().await.unwrap();
    assert_eq!(patched["paused"], true, "{patched}");
    assert_eq!(show(&env, "nightly")["paused"], true);
    let delete = || {
        server
            .request(reqwest::Method::DELETE, "/schedules/nightly")
            .send()
    };
    assert_eq!(delete().await.unwrap().status(), 204);
    assert_eq!(delete().await.unwrap().status(), 404);
    let listed = server.get("/schedules").await;
    assert!(
        !listed["schedules"]
            .as_array()
            .unwrap()
            .iter()
            .any(|s| s["name"] == "nightly"),
        "{listed}"
    );
    drop(server);
}

#[test]
fn a_fire_time_is_skipped_while_the_last_session_still_runs_on_files() {
    let env = TestEnv::new();
    add_with(
        &env,
        "slow",
        &["--every", "1s"],
        vec![
            call("bash", json!({"command": "sleep 3; echo slow"})),
            say("Slow done."),
        ],
    );
    let (mut server, lines) = serve(&env);
    wait_line(&lines, "schedule slow skipped");
    schedule(&env, "pause", "slow");
    server.kill().unwrap();
    server.wait().unwrap();

    let shown = show(&env, "slow");
    assert!(shown["skipped"].as_u64().unwrap() >= 1, "{shown}");
    // Each fire time that started a session is recorded by that session.
    let fires = assert_one_session_per_fire_time(&env, "slow");
    assert!(!fires.is_empty(), "{shown}");
    assert_eq!(shown["fires"], fires.len() as u64, "{shown}");
    let skipped = shown["recent"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["session"].is_null())
        .count();
    assert!(skipped >= 1, "{shown}");
}

#[test]
fn a_heartbeat_continues_its_session_on_a_file_store_server() {
    let env = TestEnv::new();
    let mut steps = vec![write_todos(&plan(3)), say("Planned and done.")];
    steps.extend((0..20).map(|_| say("Nothing new.")));
    let path = env.script("planned.json", &script(steps));
    let out = env
        .pod()
        .args(["run", "--json", "--yes", "--script"])
        .arg(&path)
        .arg("Plan the three steps")
        .output()
        .unwrap();
    assert_success(&out);
    let id = session_id(&ndjson(&out.stdout));
    let out = env
        .pod()
        .args(["schedule", "add", "beat", "--every", "2s", "--session"])
        .arg(&id[..8])
        .arg("Any news?")
        .output()
        .unwrap();
    assert_success(&out);
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(said.contains(&format!("continuing {id}")), "{said}");

    let (mut server, lines) = serve(&env);
    let continued = "schedule beat fired for";
    for _ in 0..2 {
        let line = wait_line(&lines, continued);
        assert!(line.contains(&format!("continued {id}")), "{line}");
    }
    schedule(&env, "pause", "beat");
    server.kill().unwrap();
    server.wait().unwrap();

    // One message per fire time that continued it, none doubled; the plan
    // intact.
    let fires = recorded_fires(&env, "beat");
    assert!(fires.len() >= 2, "{fires:?}");
    assert!(fires.iter().all(|(_, s)| *s == id), "{fires:?}");
    let shown = env.show_json(&id);
    let texts: Vec<String> = shown["history"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|item| item["text"].as_str().map(String::from))
        .collect();
    let messages = texts.iter().filter(|t| *t == "Any news?").count();
    assert_eq!(messages, fires.len(), "{texts:?}");
    let answers = texts.iter().filter(|t| *t == "Nothing new.").count();
    assert!(answers + 1 >= messages, "{texts:?}");
    assert_eq!(statuses(&shown["todos"]), ["completed"; 3], "{shown}");
}
