//! Questions that survive their process and are answered from anywhere:
//! through real `pod serve` processes on the file store and PostgreSQL,
//! `pod approve`, and fleet workers that park a waiting session and continue
//! it after the answer.

use crate::http::{is_record_text, writing_script, Server};
use crate::support::*;
use serde_json::{json, Value};

/// `pod show --json` of session `id` in `store` (the file store: None).
fn shown(env: &TestEnv, id: &str, store: Option<&str>) -> Value {
    let mut command = env.pod();
    if let Some(url) = store {
        command.env("POD_STORE", url);
    }
    let out = command.args(["show", id, "--json"]).output().unwrap();
    assert_success(&out);
    serde_json::from_slice(&out.stdout).unwrap()
}

/// The results of the session's `write_file` calls, from its log.
fn write_results(env: &TestEnv, id: &str) -> Vec<Value> {
    write_results_in(env, id, None)
}

fn write_results_in(env: &TestEnv, id: &str, store: Option<&str>) -> Vec<Value> {
    let shown = shown(env, id, store);
    let history = shown["history"].as_array().unwrap().clone();
    let calls: Vec<String> = history
        .iter()
        .flat_map(|item| item["tool_calls"].as_array().cloned().unwrap_or_default())
        .filter(|call| call["name"] == "write_file")
        .map(|call| call["id"].as_str().unwrap().to_string())
        .collect();
    history
        .into_iter()
        .filter(|item| {
            item["type"] == "tool_result"
                && calls.iter().any(|c| item["call_id"].as_str() == Some(c))
        })
        .collect()
}

fn store_server(env: &TestEnv, store: Option<&str>) -> Server {
    let path = env.script("serve-script.json", &writing_script());
    let mut command = env.pod_process();
    if let Some(url) = store {
        command.env("POD_STORE", url);
    }
    command.arg("--script").arg(path);
    Server::start_with(command, env)
}

async fn survives_sigkill(store: Option<&str>) {
    let env = TestEnv::new();
    let mut server = store_server(&env, store);
    let id = server.create(&env, "Write the notes").await;
    let mut events = server.events(&id, None).await;
    // Killed once the session is parked on its question: the question is
    // in the log and the process let the session go (on PostgreSQL a
    // lease the process still held would keep it until it ran out).
    let asked = events
        .until(|e| e.event == "approvals" && e.data["approvals"][0]["parked"] == true)
        .await;
    let question = asked.data["approvals"][0]["id"]
        .as_str()
        .unwrap()
        .to_string();
    drop(events);
    server.kill();

    // A new server finds the question in the log.
    let server = store_server(&env, store);
    let listed = server.get("/approvals").await;
    assert_eq!(listed["approvals"][0]["id"], question.as_str(), "{listed}");
    assert_eq!(listed["approvals"][0]["parked"], true);
    let row = server.get(&format!("/sessions/{id}")).await;
    assert_eq!(row["session"]["status"], "awaiting_approval", "{row}");
    let mut events = server.events(&id, None).await;
    let (status, body) = server
        .post(
            &format!("/approvals/{question}"),
            &json!({"decision": "allow_once", "session_id": id}).to_string(),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    events.until(|e| is_record_text(e, "Notes written.")).await;
    assert_eq!(
        std::fs::read_to_string(env.workspace().join("notes.md")).unwrap(),
        "n\n"
    );
    // The write ran once, and its one result is the write's own.
    let results = write_results_in(&env, &id, store);
    assert_eq!(results.len(), 1, "{results:?}");
    assert_eq!(results[0]["is_error"], false, "{results:?}");
    // The answer names who gave it and from where.
    let history = server.get(&format!("/sessions/{id}/history")).await;
    let answer = history["records"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| &r["record"])
        .find(|r| r["answer"].is_object())
        .expect("an answer record")
        .clone();
    assert_eq!(answer["answer"]["via"], "http", "{answer}");
    assert!(answer["answer"]["from"]
        .as_str()
        .unwrap()
        .starts_with("127.0.0.1:"));
}

#[tokio::test]
async fn a_question_survives_sigkill_of_the_server_and_is_answered_after_the_restart() {
    survives_sigkill(None).await;
}

#[tokio::test]
async fn on_postgresql_a_question_survives_sigkill_of_the_server_too() {
    let pg = pod_testkit::postgres::Postgres::start();
    survives_sigkill(Some(&pg.url())).await;
}

/// A session parked on its question by a server that is then killed.
async fn parked_by_a_killed_server(env: &TestEnv) -> String {
    let mut server = store_server(env, None);
    let id = server.create(env, "Write the notes").await;
    let mut events = server.events(&id, None).await;
    events
        .until(|e| e.event == "approvals" && !e.data["approvals"].as_array().unwrap().is_empty())
        .await;
    drop(events);
    server.kill();
    id
}

#[tokio::test]
async fn pod_approve_answers_a_parked_session_and_pod_resume_runs_the_call_once() {
    let env = TestEnv::new();
    let id = parked_by_a_killed_server(&env).await;
    let sessions = env.sessions_json();
    assert_eq!(sessions[0]["status"], "awaiting_approval");
    assert_eq!(sessions[0]["question"]["request"]["tool"], "write_file");
    let shown = env.pod().args(["show", &id]).output().unwrap();
    assert!(
        String::from_utf8_lossy(&shown.stdout).contains(&format!("pod approve {id}")),
        "{}",
        String::from_utf8_lossy(&shown.stdout)
    );
    // Pruning everything leaves a session that waits for a person.
    let out = env
        .pod()
        .args(["prune", "--older-than", "0s", "--yes"])
        .output()
        .unwrap();
    assert_success(&out);
    assert_eq!(env.sessions_json().len(), 1);
    // A wrong answer is refused and changes nothing.
    let out = env.pod().args(["approve", &id, "maybe"]).output().unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("not an answer"));
    let out = env
        .pod()
        .args(["approve", &id[..8], "allow", "--json"])
        .output()
        .unwrap();
    assert_success(&out);
    let answer: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(answer["via"], "cli");
    assert_eq!(answer["decision"], "allow_once");
    assert_eq!(answer["pending"], true);
    // Nothing waits any more; answering again loses.
    let out = env.pod().args(["approve", &id, "deny"]).output().unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("waits for no answer"));
    let script = env.script("resume.json", &writing_script());
    let out = env
        .pod()
        .args(["resume", &id, "--json", "--script"])
        .arg(&script)
        .output()
        .unwrap();
    assert_success(&out);
    assert_eq!(
        std::fs::read_to_string(env.workspace().join("notes.md")).unwrap(),
        "n\n"
    );
    let results = write_results(&env, &id);
    assert_eq!(results.len(), 1, "{results:?}");
    assert_eq!(results[0]["is_error"], false);
}

/// Two `pod approve` processes answer session `id` at once: one wins, the
/// other is told, and the log holds one answer.
fn race(env: &TestEnv, id: &str, store: Option<&str>) {
    let spawn = |decision: &str| {
        let mut command = env.pod_process();
        if let Some(url) = store {
            command.env("POD_STORE", url);
        }
        command
            .args(["approve", id, decision])
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap()
    };
    let (a, b) = (spawn("allow"), spawn("deny"));
    let outs = [a.wait_with_output().unwrap(), b.wait_with_output().unwrap()];
    let won: Vec<_> = outs.iter().filter(|o| o.status.success()).collect();
    assert_eq!(won.len(), 1, "one answer wins: {outs:?}");
    let lost = outs.iter().find(|o| !o.status.success()).unwrap();
    let said = String::from_utf8_lossy(&lost.stderr);
    assert!(
        said.contains("already answered") || said.contains("waits for no answer"),
        "{said}"
    );
    let answers = shown(env, id, store)["answers"].clone();
    assert_eq!(answers.as_array().unwrap().len(), 1, "{answers}");
}

#[test]
fn two_answers_race_and_one_wins() {
    let env = TestEnv::new();
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let id = runtime.block_on(parked_by_a_killed_server(&env));
    race(&env, &id, None);
}

#[test]
fn on_postgresql_two_answers_race_and_one_wins_and_the_session_is_queued() {
    let pg = pod_testkit::postgres::Postgres::start();
    let env = TestEnv::new();
    let script = env.script("fleet.json", &writing_script());
    let out = env
        .pod()
        .env("POD_STORE", pg.url())
        .args(["submit", "--script"])
        .arg(&script)
        .arg("--workspace")
        .arg(env.workspace())
        .arg("Write the notes")
        .output()
        .unwrap();
    assert_success(&out);
    let id = String::from_utf8_lossy(&out.stdout).trim().to_string();
    let out = env
        .pod()
        .env("POD_STORE", pg.url())
        .args(["serve", "--exit-when-idle"])
        .output()
        .unwrap();
    assert_success(&out);
    race(&env, &id, Some(&pg.url()));
    // The winner's answer queued it (the loser did not take it out of the
    // queue): a worker runs the call as the winner decided.
    let out = env
        .pod()
        .env("POD_STORE", pg.url())
        .args(["serve", "--exit-when-idle"])
        .output()
        .unwrap();
    assert_success(&out);
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(said.contains(&format!("claimed {id}")), "{said}");
    let decided = shown(&env, &id, Some(&pg.url()))["answers"][0]["decision"].clone();
    assert_eq!(
        env.workspace().join("notes.md").exists(),
        decided == "allow_once",
        "{decided}"
    );
}

#[test]
fn a_fleet_worker_parks_a_waiting_session_and_another_continues_it_after_the_answer() {
    let pg = pod_testkit::postgres::Postgres::start();
    let env = TestEnv::new();
    // The workers tell a command when the question waits.
    let seen = env.workspace().join("..").join("events.jsonl");
    env.config_file(&format!(
        "[notify]\ncommand = [\"sh\", \"-c\", \"cat >> '{}'; echo >> '{}'\"]\nevents = [\"question\"]\n",
        seen.display(),
        seen.display()
    ));
    let script = env.script("fleet.json", &writing_script());
    let out = env
        .pod()
        .env("POD_STORE", pg.url())
        .args(["submit", "--script"])
        .arg(&script)
        .arg("--workspace")
        .arg(env.workspace())
        .arg("Write the notes")
        .output()
        .unwrap();
    assert_success(&out);
    let id = String::from_utf8_lossy(&out.stdout).trim().to_string();
    // A worker without the HTTP API parks it (instead of refusing the
    // write) and, with nothing else to do, exits.
    let worker = |name: &str| {
        let out = env
            .pod()
            .env("POD_STORE", pg.url())
            .args(["serve", "--exit-when-idle"])
            .output()
            .unwrap();
        assert_success(&out);
        let said = String::from_utf8_lossy(&out.stdout).to_string();
        assert!(said.contains(&format!("finished {id}")), "{name}: {said}");
        said
    };
    let said = worker("first");
    assert!(said.contains("parked, waiting for an answer"), "{said}");
    assert!(!env.workspace().join("notes.md").exists());
    let told: Value = serde_json::from_str(
        std::fs::read_to_string(&seen)
            .unwrap()
            .lines()
            .next()
            .unwrap(),
    )
    .unwrap();
    assert_eq!(told["type"], "session.question");
    assert_eq!(told["data"]["session_id"], id.as_str());
    assert_eq!(told["data"]["title"], "Write the notes");
    let sessions: Vec<Value> = {
        let out = env
            .pod()
            .env("POD_STORE", pg.url())
            .args(["sessions", "--json"])
            .output()
            .unwrap();
        assert_success(&out);
        serde_json::from_slice(&out.stdout).unwrap()
    };
    assert_eq!(sessions[0]["status"], "awaiting_approval");
    let out = env
        .pod()
        .env("POD_STORE", pg.url())
        .args(["approve", &id, "allow"])
        .output()
        .unwrap();
    assert_success(&out);
    assert!(String::from_utf8_lossy(&out.stdout).contains("queued"));
    // A second answer loses, and leaves the session queued as it was.
    let out = env
        .pod()
        .env("POD_STORE", pg.url())
        .args(["approve", &id, "deny"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    // Another worker (a new process) continues it: the write runs.
    let said = worker("second");
    assert!(!said.contains("parked"), "{said}");
    assert_eq!(
        std::fs::read_to_string(env.workspace().join("notes.md")).unwrap(),
        "n\n"
    );
}

/// The `[approval] timeout_secs` answer of a session's log (`via:
/// timeout`) and its call's refusal.
fn assert_timed_out(env: &TestEnv, id: &str) {
    let results = write_results(env, id);
    assert_eq!(results.len(), 1, "{results:?}");
    assert_eq!(results[0]["is_error"], true, "{results:?}");
    assert!(
        results[0].to_string().contains("nobody answered"),
        "{results:?}"
    );
    assert!(!env.workspace().join("notes.md").exists());
    let answers = env.show_json(id)["answers"].clone();
    assert_eq!(answers.as_array().unwrap().len(), 1, "{answers}");
    assert_eq!(answers[0]["via"], "timeout", "{answers}");
    assert_eq!(answers[0]["decision"], "reject_once");
}

#[tokio::test]
async fn a_parked_question_past_its_timeout_is_refused_and_the_session_goes_on() {
    let env = TestEnv::new();
    env.config_file("[approval]\ntimeout_secs = 1\n");
    let server = store_server(&env, None);
    let id = server.create(&env, "Write the notes").await;
    let mut events = server.events(&id, None).await;
    let asked = events
        .until(|e| e.event == "approvals" && !e.data["approvals"].as_array().unwrap().is_empty())
        .await;
    assert!(
        asked.data["approvals"][0]["expires_at"].is_string(),
        "{}",
        asked.data
    );
    // Nobody answers: the server continues the session once the question
    // timed out, and the model hears that the call was refused.
    events.until(|e| is_record_text(e, "Notes written.")).await;
    drop(server);
    assert_timed_out(&env, &id);
}

#[test]
fn a_fleet_session_parked_past_its_question_timeout_is_claimed_again() {
    let pg = pod_testkit::postgres::Postgres::start();
    let env = TestEnv::new();
    env.config_file("[approval]\ntimeout_secs = 1\n");
    let script = env.script("fleet.json", &writing_script());
    let out = env
        .pod()
        .env("POD_STORE", pg.url())
        .args(["submit", "--script"])
        .arg(&script)
        .arg("--workspace")
        .arg(env.workspace())
        .arg("Write the notes")
        .output()
        .unwrap();
    assert_success(&out);
    let id = String::from_utf8_lossy(&out.stdout).trim().to_string();
    // One worker parks it, and (a parked session that wakes by itself is
    // not idle) claims it again at the timeout and finishes it.
    let out = env
        .pod()
        .env("POD_STORE", pg.url())
        .args(["serve", "--exit-when-idle"])
        .output()
        .unwrap();
    assert_success(&out);
    let said = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(said.contains("parked, waiting for an answer"), "{said}");
    assert_eq!(said.matches(&format!("claimed {id}")).count(), 2, "{said}");
    let shown = {
        let out = env
            .pod()
            .env("POD_STORE", pg.url())
            .args(["show", &id, "--json"])
            .output()
            .unwrap();
        assert_success(&out);
        serde_json::from_slice::<Value>(&out.stdout).unwrap()
    };
    let answers = shown["answers"].as_array().unwrap();
    assert_eq!(answers.len(), 1, "{shown}");
    assert_eq!(answers[0]["via"], "timeout");
    assert!(!env.workspace().join("notes.md").exists());
}

#[tokio::test]
async fn pod_approve_from_another_process_is_run_by_the_server_that_parked_it() {
    let env = TestEnv::new();
    let server = store_server(&env, None);
    let id = server.create(&env, "Write the notes").await;
    let mut events = server.events(&id, None).await;
    events
        .until(|e| e.event == "approvals" && !e.data["approvals"].as_array().unwrap().is_empty())
        .await;
    let out = env.pod().args(["approve", &id, "allow"]).output().unwrap();
    assert_success(&out);
    // The server sees the answer in the log and continues the session.
    events.until(|e| is_record_text(e, "Notes written.")).await;
    assert_eq!(
        std::fs::read_to_string(env.workspace().join("notes.md")).unwrap(),
        "n\n"
    );
    let results = write_results(&env, &id);
    assert_eq!(results.len(), 1, "{results:?}");
}

#[tokio::test]
async fn a_subagents_question_is_listed_once_and_answered_where_it_is_asked() {
    let env = TestEnv::new();
    let script = json!({
        "steps": [
            {"tool_calls": [{"name": "task", "arguments": {"description": "notes", "prompt": "Write the notes"}}]},
            {"text": "Delegated."}
        ],
        "agents": [
            {"task": "Write the notes", "steps": [
                {"tool_calls": [{"name": "write_file", "arguments": {"path": "notes.md", "content": "n\n"}}]},
                {"text": "Written."}
            ]}
        ]
    });
    let server = Server::start(&env, &script);
    let id = server.create(&env, "Delegate the notes").await;
    let mut events = server.events(&id, None).await;
    let asked = events
        .until(|e| e.event == "approvals" && !e.data["approvals"].as_array().unwrap().is_empty())
        .await;
    let approval = asked.data["approvals"][0].clone();
    assert_eq!(approval["request"]["subagent"]["description"], "notes");
    // Its log holds the question too; the list shows it once, as asked live.
    let listed = server.get("/approvals").await;
    let all = listed["approvals"].as_array().unwrap();
    assert_eq!(all.len(), 1, "{listed}");
    assert_eq!(all[0]["parked"], false, "{listed}");
    let (status, body) = server
        .post(
            &format!("/approvals/{}", all[0]["id"].as_str().unwrap()),
            &json!({"decision": "allow_once"}).to_string(),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    events.until(|e| is_record_text(e, "Delegated.")).await;
    assert!(env.workspace().join("notes.md").exists());
}
