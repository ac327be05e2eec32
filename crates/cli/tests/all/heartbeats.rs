//! The rest of issue 50 on `pod serve` workers and a throwaway PostgreSQL:
//! heartbeats (`pod schedule add --session`) continue an existing session
//! with its plan intact, once per fire time; an agent's `schedule_followup`
//! parks its session and another worker wakes it; a trigger's sessions
//! record where they came from; schedules through the API and the
//! dashboard; notifications of fires. Bad input is refused with what to do.

use crate::fleet::{Fleet, PATIENCE};
use crate::support::*;
use serde_json::Value;
use std::sync::mpsc;
use std::time::Instant;

const BEAT: &str = "Heartbeat: anything new on CI?";

/// Queues a session that writes a finished three-step plan and then
/// answers each message it gets with `answer`; its id.
fn submit_planned(fleet: &Fleet, answer: &str, answers: usize) -> String {
    let mut steps = vec![write_todos(&plan(3)), say("Planned and done.")];
    steps.extend((0..answers).map(|_| say(answer)));
    let path = fleet.env.script("planned.json", &script(steps));
    let out = fleet
        .pod()
        .args(["submit", "--yes", "--script"])
        .arg(&path)
        .arg("Plan the three steps")
        .output()
        .unwrap();
    assert_success(&out);
    String::from_utf8(out.stdout).unwrap().trim().to_string()
}

/// Reads the workers' lines until `done` says enough; fails the test
/// after a minute or two, with what it saw.
fn read_until(rx: &mpsc::Receiver<String>, mut done: impl FnMut(&str) -> bool) {
    let deadline = Instant::now() + PATIENCE;
    let mut seen = Vec::new();
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match rx.recv_timeout(left) {
            Ok(line) => {
                let enough = done(&line);
                seen.push(line);
                if enough {
                    return;
                }
            }
            Err(err) => panic!(
                "waited in vain ({err}); the workers said:\n{}",
                seen.join("\n")
            ),
        }
    }
}

fn merged(receivers: Vec<mpsc::Receiver<String>>) -> mpsc::Receiver<String> {
    let (tx, rx) = mpsc::channel();
    for each in receivers {
        let tx = tx.clone();
        std::thread::spawn(move || {
            for line in each {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
    }
    rx
}

fn user_texts(shown: &Value) -> Vec<String> {
    shown["history"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|item| item["type"] == "user")
        .map(|item| item["text"].as_str().unwrap_or_default().to_string())
        .collect()
}

fn continued_fires(fleet: &Fleet, name: &str) -> Vec<uuid::Uuid> {
    fleet
        .query(
            "SELECT session FROM pod_schedule_fires
             WHERE schedule = $1 AND outcome = 'continued' ORDER BY fire_at",
            &[&name],
        )
        .iter()
        .map(|row| row.get(0))
        .collect()
}

#[test]
fn a_heartbeat_continues_its_session_with_the_plan_intact_once_per_fire_time() {
    let fleet = Fleet::new();
    let id = submit_planned(&fleet, "Nothing new.", 30);
    let workers: Vec<_> = (0..2).map(|_| fleet.worker(&["--workers", "2"])).collect();
    let (mut children, receivers): (Vec<_>, Vec<_>) = workers.into_iter().unzip();
    let lines = merged(receivers);
    let finished = format!("finished {id}");
    read_until(&lines, |line| line.contains(&finished));

    // By a prefix of its id, as other commands take it.
    let out = fleet
        .pod()
        .args(["schedule", "add", "beat", "--every", "2s", "--session"])
        .arg(&id[..8])
        .arg(BEAT)
        .output()
        .unwrap();
    assert_success(&out);
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(said.contains(&format!("continuing {id}")), "{said}");

    // Three continuations, each run to its end, then no more fire times.
    let continued = format!("continued {id}");
    let (mut runs, mut ended) = (0, 0);
    read_until(&lines, |line| {
        runs += usize::from(line.contains(&continued));
        ended += usize::from(line.contains(&finished));
        runs >= 3
    });
    let out = fleet
        .pod()
        .args(["schedule", "pause", "beat"])
        .output()
        .unwrap();
    assert_success(&out);
    let fires = continued_fires(&fleet, "beat");
    assert!(fires.len() >= 3, "{fires:?}");
    assert!(fires.iter().all(|s| s.to_string() == id), "{fires:?}");
    if ended < fires.len() {
        read_until(&lines, |line| {
            ended += usize::from(line.contains(&finished));
            ended >= fires.len()
        });
    }

    // One message per fire time that continued it (none doubled across
    // the two workers), each answered, and the plan as it was.
    let shown = fleet.show(&id);
    let beats = user_texts(&shown).iter().filter(|t| *t == BEAT).count();
    assert_eq!(beats, fires.len(), "{shown}");
    let answers = shown["history"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|item| item["text"] == "Nothing new.")
        .count();
    assert_eq!(answers, fires.len(), "{shown}");
    assert_eq!(statuses(&shown["todos"]), ["completed"; 3], "{shown}");
    assert_eq!(
        shown["history"].as_array().unwrap().last().unwrap()["text"],
        "Nothing new."
    );
    // The schedule shows the session it continues.
    let out = fleet
        .pod()
        .args(["schedule", "show", "beat", "--json"])
        .output()
        .unwrap();
    assert_success(&out);
    let schedule: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(schedule["session"], id.as_str(), "{schedule}");
    assert_eq!(schedule["fires"], fires.len() as u64, "{schedule}");
    for child in &mut children {
        child.kill().unwrap();
        child.wait().unwrap();
    }
}

#[test]
fn a_heartbeat_on_an_unknown_session_or_with_overlap_is_refused() {
    let fleet = Fleet::new();
    let refused = |args: &[&str]| {
        let out = fleet
            .pod()
            .args(["schedule", "add", "beat", "--every", "1h"])
            .args(args)
            .arg(BEAT)
            .output()
            .unwrap();
        assert!(!out.status.success(), "{args:?} was accepted");
        String::from_utf8_lossy(&out.stderr).to_string()
    };
    let err = refused(&["--session", "0123abcd"]);
    assert!(err.contains("no session 0123abcd"), "{err}");
    assert!(err.contains("pod sessions"), "{err}");

    let id = submit_planned(&fleet, "x", 0);
    let err = refused(&["--session", &id, "--overlap", "allow"]);
    assert!(err.contains("cannot overlap"), "{err}");
    // Nothing half-made.
    let out = fleet
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
}

/// The result the session's log gives call `n` (0-based) of tool `name`.
fn result_of_call(history: &[Value], name: &str, n: usize) -> Value {
    let id = history
        .iter()
        .flat_map(|item| item["tool_calls"].as_array().cloned().unwrap_or_default())
        .filter(|call| call["name"] == name)
        .nth(n)
        .unwrap_or_else(|| panic!("no call {n} of {name}: {history:#?}"))["id"]
        .clone();
    history
        .iter()
        .find(|item| item["type"] == "tool_result" && item["call_id"] == id)
        .cloned()
        .unwrap_or_else(|| panic!("call {id} has no result: {history:#?}"))
}

fn at(item: &Value) -> chrono::DateTime<chrono::Utc> {
    serde_json::from_value(item["at"].clone()).unwrap()
}

#[test]
fn a_session_parks_on_its_follow_up_and_another_worker_wakes_it() {
    let fleet = Fleet::new();
    let path = fleet.env.script(
        "followup.json",
        &script(vec![
            call(
                "schedule_followup",
                serde_json::json!({"in": "8d", "note": "too late"}),
            ),
            call(
                "schedule_followup",
                serde_json::json!({"in": "3s", "note": "Check CI again"}),
            ),
            say("CI is green now."),
        ]),
    );
    let out = fleet
        .pod()
        .args(["submit", "--yes", "--followups", "--script"])
        .arg(&path)
        .arg("Wait for CI, then report")
        .output()
        .unwrap();
    assert_success(&out);
    let id = String::from_utf8(out.stdout).unwrap().trim().to_string();

    // The first worker runs it until it parks, and is killed.
    let (mut first, lines) = fleet.worker(&["--workers", "1"]);
    let parked = format!("finished {id}: parked, waiting for its follow-up at");
    read_until(&lines, |line| line.contains(&parked));
    first.kill().unwrap();
    first.wait().unwrap();
    // Parked (no worker runs now), it says what it waits for.
    let shown = fleet.show(&id);
    assert_eq!(shown["session"]["status"], "waiting", "{shown}");
    let reason = shown["session"]["reason"].as_str().unwrap_or_default();
    assert!(reason.contains("Check CI again"), "{shown}");

    // Another wakes it at its time and it goes on from there.
    let (mut second, lines) = fleet.worker(&["--workers", "1"]);
    let finished = format!("finished {id}: the model finished");
    let claimed = format!("claimed {id}");
    let mut woken = false;
    read_until(&lines, |line| {
        woken |= line.contains(&claimed);
        line.contains(&finished)
    });
    assert!(woken, "the second worker never claimed {id}");
    second.kill().unwrap();
    second.wait().unwrap();

    let shown = fleet.show(&id);
    let history = shown["history"].as_array().unwrap();
    // Out of bounds: refused with a result the model can read.
    let refused = result_of_call(history, "schedule_followup", 0);
    assert_eq!(refused["is_error"], true, "{refused}");
    let text = refused["content"].as_str().unwrap_or_default();
    assert!(text.contains("between 1s and 7d"), "{refused}");
    // The follow-up's result is its note, given no earlier than its time.
    let call_at = history
        .iter()
        .filter(|item| item["tool_calls"][0]["name"] == "schedule_followup")
        .nth(1)
        .map(at)
        .unwrap();
    let woke = result_of_call(history, "schedule_followup", 1);
    assert!(
        woke["content"]
            .as_str()
            .unwrap_or_default()
            .contains("Your note: Check CI again"),
        "{woke}"
    );
    let waited = at(&woke) - call_at;
    assert!(
        waited >= chrono::Duration::seconds(3),
        "woken after {waited}"
    );
    assert_eq!(history.last().unwrap()["text"], "CI is green now.");
}

#[test]
fn outside_a_fleet_a_follow_up_is_refused_with_a_result_saying_why() {
    let env = TestEnv::new();
    let path = env.script(
        "followup.json",
        &script(vec![
            call(
                "schedule_followup",
                serde_json::json!({"in": "30m", "note": "Check CI again"}),
            ),
            say("I will say what to check instead."),
        ]),
    );
    let out = env
        .pod()
        .args(["run", "--json", "--yes", "--followups", "--script"])
        .arg(&path)
        .arg("Wait for CI")
        .output()
        .unwrap();
    assert_success(&out);
    let id = session_id(&ndjson(&out.stdout));
    let shown = env.show_json(&id);
    let history = shown["history"].as_array().unwrap();
    let refused = result_of_call(history, "schedule_followup", 0);
    assert_eq!(refused["is_error"], true, "{refused}");
    assert!(
        refused["content"]
            .as_str()
            .unwrap_or_default()
            .contains("not run by a fleet worker"),
        "{refused}"
    );
    assert_eq!(
        history.last().unwrap()["text"],
        "I will say what to check instead."
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_triggers_session_records_the_trigger_and_delivery_it_came_from() {
    const SECRET: &str = "origin secret, at least 32 bytes!";
    let env = TestEnv::new();
    let workspace = env.workspace().canonicalize().unwrap();
    env.config_file(&format!(
        "[triggers.triage]\nsecret = \"{SECRET}\"\nsignature = \"github\"\n\
         task = \"Triage the issue.\"\nworkspace = \"{}\"\nyes = true\n",
        workspace.display()
    ));
    let path = env.script("triage.json", &script(vec![say("Triaged.")]));
    let mut serve = env.pod_process();
    serve.args(["--yes", "--script"]).arg(&path);
    let server = crate::http::Server::start_with(serve, &env);
    let body = br#"{"action":"labeled"}"#;
    let response = reqwest::Client::new()
        .post(format!("{}/api/triggers/triage", server.base))
        .header("content-type", "application/json")
        .header("x-github-delivery", "d-7")
        .header(
            "x-hub-signature-256",
            pod_testkit::webhook::github_signature(SECRET, body),
        )
        .body(body.to_vec())
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 201);
    let created: Value = response.json().await.unwrap();
    let id = created["session_id"].as_str().unwrap().to_string();
    let deadline = Instant::now() + PATIENCE;
    let listed = loop {
        let listed = server.get(&format!("/sessions/{id}")).await;
        if listed["session"]["status"] == "done" {
            break listed;
        }
        assert!(Instant::now() < deadline, "{listed}");
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    };
    // The API (and so the dashboard's list) says where it came from.
    let origin = &listed["session"]["origin"];
    assert_eq!(origin["kind"], "trigger", "{listed}");
    assert_eq!(origin["name"], "triage", "{listed}");
    assert_eq!(origin["delivery"], "d-7", "{listed}");
    let out = env.pod().args(["show", &id]).output().unwrap();
    assert_success(&out);
    let shown = String::from_utf8_lossy(&out.stdout);
    assert!(
        shown.contains("started by trigger triage (delivery d-7)"),
        "{shown}"
    );
    let out = env.pod().args(["sessions"]).output().unwrap();
    assert_success(&out);
    let table = String::from_utf8_lossy(&out.stdout);
    let row = table
        .lines()
        .find(|l| l.starts_with(&id[..8]))
        .unwrap_or_default();
    assert!(
        row.contains("[trigger triage] Triage the issue."),
        "{table}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn schedules_are_added_paused_resumed_and_removed_through_the_api() {
    let fleet = Fleet::new();
    let workspace = fleet.env.workspace().canonicalize().unwrap();
    let path = fleet.env.script("api.json", &script(vec![say("Ticked.")]));
    let mut serve = fleet.env.pod_process();
    serve
        .env("POD_STORE", fleet.pg.url())
        .args(["--workers", "2", "--yes", "--script"])
        .arg(&path);
    let server = crate::http::Server::start_with(serve, &fleet.env);
    let nightly = serde_json::json!({
        "name": "api-nightly", "cron": "0 3 * * *", "tz": "Europe/Berlin",
        "start": {"task": "Upgrade the dependencies", "workspace": workspace},
    });
    let (status, added) = server.post("/schedules", &nightly.to_string()).await;
    assert_eq!(status, 201, "{added}");
    assert_eq!(added["when"], "cron 0 3 * * * (Europe/Berlin)", "{added}");
    assert_eq!(added["task"], "Upgrade the dependencies", "{added}");
    // The same name again; a bad expression; a workspace outside what the
    // server allows (its ceiling, as for an API session).
    let (status, body) = server.post("/schedules", &nightly.to_string()).await;
    assert_eq!(status, 409, "{body}");
    let mut bad = nightly.clone();
    bad["name"] = "bad".into();
    bad["cron"] = "61 * * * *".into();
    let (status, body) = server.post("/schedules", &bad.to_string()).await;
    assert_eq!(status, 400, "{body}");
    assert!(body.to_string().contains("61 * * * *"), "{body}");
    let outside = tempfile::tempdir().unwrap();
    let mut wide = nightly.clone();
    wide["name"] = "wide".into();
    wide["start"]["workspace"] = outside.path().to_string_lossy().into_owned().into();
    let (status, body) = server.post("/schedules", &wide.to_string()).await;
    assert_eq!(status, 403, "{body}");

    // Paused and resumed.
    let patch = |paused: bool| {
        server
            .request(reqwest::Method::PATCH, "/schedules/api-nightly")
            .header("content-type", "application/json")
            .body(serde_json::json!({ "paused": paused }).to_string())
            .send()
    };
    let paused: Value = patch(true).await.unwrap().json().await.unwrap();
    assert_eq!(paused["paused"], true, "{paused}");
    let resumed: Value = patch(false).await.unwrap().json().await.unwrap();
    assert_eq!(resumed["paused"], false, "{resumed}");

    // One added by the API fires on the fleet like any other.
    let tick = serde_json::json!({
        "name": "api-tick", "every": "1s",
        "start": {"task": "Tick", "workspace": workspace, "yes": true},
    });
    let (status, body) = server.post("/schedules", &tick.to_string()).await;
    assert_eq!(status, 201, "{body}");
    let deadline = Instant::now() + PATIENCE;
    let session = loop {
        let listed = server.get("/schedules").await;
        let tick = listed["schedules"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["name"] == "api-tick")
            .cloned()
            .unwrap();
        if let Some(id) = tick["last_session"].as_str() {
            let shown = server.get(&format!("/sessions/{id}")).await;
            if shown["session"]["status"] == "done" {
                break shown;
            }
        }
        assert!(Instant::now() < deadline, "{listed}");
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    };
    assert_eq!(
        session["session"]["origin"]["name"], "api-tick",
        "{session}"
    );

    // Removed, both; a second removal finds none.
    for name in ["api-tick", "api-nightly"] {
        let response = server
            .request(reqwest::Method::DELETE, &format!("/schedules/{name}"))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 204);
    }
    let response = server
        .request(reqwest::Method::DELETE, "/schedules/api-nightly")
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 404);
    let listed = server.get("/schedules").await;
    assert_eq!(listed["schedules"], serde_json::json!([]), "{listed}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fires_and_skips_are_notified_when_the_config_asks_for_them() {
    let fleet = Fleet::new();
    let receiver = pod_testkit::webhook::Receiver::start(200).await;
    fleet.env.config_file(&format!(
        "[notify]\nwebhook = \"{}\"\nevents = [\"schedule_fired\", \"schedule_skipped\"]\n",
        receiver.url
    ));
    let path = fleet.env.script(
        "slow.json",
        &script(vec![
            call("bash", serde_json::json!({"command": "sleep 3; echo slow"})),
            say("Slow done."),
        ]),
    );
    let out = fleet
        .pod()
        .args([
            "schedule", "add", "slow", "--every", "1s", "--yes", "--script",
        ])
        .arg(&path)
        .arg("The slow task")
        .output()
        .unwrap();
    assert_success(&out);
    let (mut worker, _lines) = fleet.worker(&["--workers", "2"]);
    let fired = receiver
        .wait_for(|r| r.json()["type"] == "schedule.fired")
        .await
        .json();
    let data = &fired["data"];
    assert_eq!(data["schedule"]["name"], "slow", "{fired}");
    assert_eq!(data["schedule"]["outcome"], "started", "{fired}");
    let session = data["session_id"].as_str().unwrap().to_string();
    let skipped = receiver
        .wait_for(|r| r.json()["type"] == "schedule.skipped")
        .await
        .json();
    // Skipped because that session still runs: the event names it.
    assert_eq!(skipped["data"]["session_id"], session.as_str(), "{skipped}");
    assert_eq!(
        skipped["data"]["schedule"]["outcome"], "skipped",
        "{skipped}"
    );
    worker.kill().unwrap();
    worker.wait().unwrap();
    // Only what `events` lists went out.
    assert!(receiver.received().iter().all(|r| r.json()["type"]
        .as_str()
        .unwrap_or_default()
        .starts_with("schedule.")));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_dashboard_lists_the_schedules_and_pauses_one() {
    let fleet = Fleet::new();
    let workspace = fleet.env.workspace().canonicalize().unwrap();
    let path = fleet.env.script("api.json", &script(vec![say("x")]));
    let mut serve = fleet.env.pod_process();
    serve
        .env("POD_STORE", fleet.pg.url())
        .args(["--workers", "1", "--yes", "--script"])
        .arg(&path);
    let server = crate::http::Server::start_with(serve, &fleet.env);
    let nightly = serde_json::json!({
        "name": "nightly", "cron": "0 3 * * *",
        "start": {"task": "Upgrade the dependencies", "workspace": workspace},
    });
    let (status, body) = server.post("/schedules", &nightly.to_string()).await;
    assert_eq!(status, 201, "{body}");

    let shots = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("dashboard");
    let browser = pod_testkit::browser::Browser::start(&shots).await;
    browser
        .goto(&format!("{}/#token={}", server.base, server.token))
        .await;
    let row = "#schedules tr[data-name='nightly']";
    let shown = browser
        .wait_for(
            "the schedule's row",
            &format!(
                "const r = document.querySelector(\"{row}\"); \
                 return r && !document.getElementById('schedules-view').hidden \
                 && r.innerText;"
            ),
        )
        .await;
    let text = shown.as_str().unwrap_or_default().to_string();
    assert!(text.contains("cron 0 3 * * * (UTC)"), "{text}");
    assert!(text.contains("never fired"), "{text}");
    let pause = browser.find(&format!("{row} button.pause")).await.unwrap();
    browser.click(&pause).await;
    browser
        .wait_for(
            "the row paused",
            &format!(
                "const r = document.querySelector(\"{row}\"); \
                 return r && r.dataset.paused === 'true' && r.innerText.includes('Resume');"
            ),
        )
        .await;
    let listed = server.get("/schedules").await;
    assert_eq!(listed["schedules"][0]["paused"], true, "{listed}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_heartbeat_through_the_api_is_held_to_the_ceiling_and_continues_its_session() {
    let fleet = Fleet::new();
    let path = fleet.env.script("serve.json", &script(vec![say("x")]));
    let mut serve = fleet.env.pod_process();
    serve
        .env("POD_STORE", fleet.pg.url())
        .args(["--workers", "2", "--yes", "--script"])
        .arg(&path);
    let server = crate::http::Server::start_with(serve, &fleet.env);
    let id = submit_planned(&fleet, "Nothing new.", 10);
    let outside = tempfile::tempdir().unwrap();
    let wide_script = fleet.env.script("wide.json", &script(vec![say("x")]));
    let out = fleet
        .pod()
        .args(["submit", "--yes", "--workspace"])
        .arg(outside.path())
        .arg("--script")
        .arg(&wide_script)
        .arg("Elsewhere")
        .output()
        .unwrap();
    assert_success(&out);
    let wide = String::from_utf8(out.stdout).unwrap().trim().to_string();

    let beat = |name: &str, session: &str| {
        serde_json::json!({
            "name": name, "every": "1s", "session": session, "message": BEAT,
        })
        .to_string()
    };
    // A session started with more than this server allows (a workspace
    // outside its roots) gets no heartbeat from the API.
    let (status, body) = server.post("/schedules", &beat("wide", &wide)).await;
    assert_eq!(status, 403, "{body}");
    let (status, body) = server.post("/schedules", &beat("nope", "0123abcd")).await;
    assert_eq!(status, 404, "{body}");
    let both = serde_json::json!({
        "name": "both", "every": "1s", "session": id, "message": BEAT,
        "start": {"task": "x"},
    });
    let (status, body) = server.post("/schedules", &both.to_string()).await;
    assert_eq!(status, 400, "{body}");

    let (status, added) = server.post("/schedules", &beat("beat", &id)).await;
    assert_eq!(status, 201, "{added}");
    assert_eq!(added["session"], id.as_str(), "{added}");
    // It continues the session: the message, then the answer.
    let deadline = Instant::now() + PATIENCE;
    loop {
        let shown = fleet.show(&id);
        let texts = user_texts(&shown);
        let last = shown["history"].as_array().unwrap().last().cloned();
        if texts.iter().any(|t| t == BEAT)
            && last.is_some_and(|item| item["text"] == "Nothing new.")
        {
            assert_eq!(statuses(&shown["todos"]), ["completed"; 3], "{shown}");
            break;
        }
        assert!(Instant::now() < deadline, "{shown}");
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    let paused = server
        .request(reqwest::Method::PATCH, "/schedules/beat")
        .header("content-type", "application/json")
        .body(r#"{"paused": true}"#)
        .send()
        .await
        .unwrap();
    assert_eq!(paused.status(), 200);
}
