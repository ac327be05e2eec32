//! Session states that tell the truth, produced for real and read three
//! ways: `pod sessions` (the table and `--json`) and the HTTP API agree on
//! each, with the reason where there is one.

use crate::http::Server;
use crate::support::*;
use pod_testkit::logs::{self, SessionLog};
use serde_json::{json, Value};
use std::collections::HashMap;

/// `pod sessions --json` statuses (and reasons) by id.
fn listed(env: &TestEnv) -> HashMap<String, (String, Option<String>)> {
    env.sessions_json()
        .into_iter()
        .map(|s| {
            (
                s["id"].as_str().unwrap().to_string(),
                (
                    s["status"].as_str().unwrap().to_string(),
                    s["reason"].as_str().map(String::from),
                ),
            )
        })
        .collect()
}

#[tokio::test]
async fn each_state_reads_the_same_in_the_table_the_json_and_the_api() {
    let env = TestEnv::new();
    // done: answered, without a plan.
    let hi = env.script("hi.json", &script(vec![say("Hi.")]));
    let out = env
        .pod()
        .args(["run", "--script"])
        .arg(&hi)
        .arg("Say hi")
        .output()
        .unwrap();
    assert_success(&out);
    // failed: the provider refused the request.
    let refused = env.script(
        "refused.json",
        &json!({"steps": [{"fail": {"status": 400, "message": "prompt is too long"}}]}),
    );
    let out = env
        .pod()
        .args(["run", "--script"])
        .arg(&refused)
        .arg("Summarize the repository")
        .output()
        .unwrap();
    assert!(!out.status.success());
    // The error is said once, on stderr, with how to go on.
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(said.matches("prompt is too long").count(), 1, "{said}");
    // interrupted: a process that died while a command ran.
    let crashed = SessionLog::new("scripted", &env.workspace())
        .prompt("Build it")
        .call("bash", json!({"command": "cargo build"}), 100, 10);
    crashed.write(&env.pod_home());
    // damaged: a log a bad disk changed (not in its last line, which a
    // crash mid-write tears and a resume repairs).
    let damaged = SessionLog::new("scripted", &env.workspace())
        .prompt("Read it")
        .answer("Read.", 10, 5)
        .prompt("And the rest")
        .answer("Done.", 10, 5);
    logs::damage(&damaged.write(&env.pod_home()));

    // cancelled: through the API, while its model thinks.
    let server = Server::start(
        &env,
        &json!({"steps": [{"delay_ms": 600_000, "text": "Never."}]}),
    );
    let slow = server.create(&env, "Think for a long time").await;
    let mut events = server.events(&slow, None).await;
    events
        .until(|e| e.event == "status" && e.data["live"] == true)
        .await;
    let (status, body) = server.post(&format!("/sessions/{slow}/cancel"), "{}").await;
    assert_eq!(status, 202, "{body}");
    events
        .until(|e| e.event == "status" && e.data["live"] == false)
        .await;

    let by_cli = listed(&env);
    let status_of = |id: &str| by_cli[id].0.clone();
    let reason_of = |id: &str| by_cli[id].1.clone().unwrap_or_default();
    assert_eq!(by_cli.len(), 5, "{by_cli:?}");
    let of = |state: &str| {
        by_cli
            .iter()
            .find(|(_, (s, _))| s == state)
            .map(|(id, _)| id.clone())
            .unwrap_or_else(|| panic!("no {state} session: {by_cli:?}"))
    };
    assert!(reason_of(&of("failed")).contains("HTTP 400"));
    assert!(reason_of(&of("failed")).contains("prompt is too long"));
    assert_eq!(status_of(&crashed.id().to_string()), "interrupted");
    assert!(reason_of(&crashed.id().to_string()).contains("while bash ran"));
    assert_eq!(status_of(&damaged.id().to_string()), "damaged");
    assert!(reason_of(&damaged.id().to_string()).contains("log.jsonl:3"));
    assert_eq!(status_of(&slow), "cancelled");
    of("done");

    // The API says the same of each.
    let api = server.get("/sessions").await;
    for row in api["sessions"].as_array().unwrap() {
        let id = row["id"].as_str().unwrap();
        assert_eq!(row["status"], status_of(id).as_str(), "{row}");
        assert_eq!(
            row["reason"].as_str().unwrap_or_default(),
            reason_of(id),
            "{row}"
        );
    }
    assert_eq!(api["sessions"].as_array().unwrap().len(), 5, "{api}");

    // And the table, one row each; filtered and limited on request.
    let table = env.pod().arg("sessions").output().unwrap();
    let table = String::from_utf8_lossy(&table.stdout).to_string();
    for (id, (state, _)) in &by_cli {
        let row = table.lines().find(|l| l.starts_with(&id[..8])).unwrap();
        assert!(row.contains(state.as_str()), "{row}");
    }
    let failed = env
        .pod()
        .args(["sessions", "--json", "--status", "failed,damaged"])
        .output()
        .unwrap();
    let failed: Vec<Value> = serde_json::from_slice(&failed.stdout).unwrap();
    let mut states: Vec<&str> = failed
        .iter()
        .map(|s| s["status"].as_str().unwrap())
        .collect();
    states.sort();
    assert_eq!(states, ["damaged", "failed"]);
    let limited = env
        .pod()
        .args(["sessions", "--json", "--limit", "2"])
        .output()
        .unwrap();
    let limited: Vec<Value> = serde_json::from_slice(&limited.stdout).unwrap();
    assert_eq!(limited.len(), 2);
    let out = env
        .pod()
        .args(["sessions", "--status", "sleeping"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("not a session state"));
}

#[test]
fn resuming_a_done_session_without_a_prompt_calls_no_model() {
    let env = TestEnv::new();
    let hi = env.script("hi.json", &script(vec![say("Hi.")]));
    let out = env
        .pod()
        .args(["run", "--script"])
        .arg(&hi)
        .arg("Say hi")
        .output()
        .unwrap();
    assert_success(&out);
    let id = env.sessions_json()[0]["id"].as_str().unwrap().to_string();
    let before = env.show_json(&id)["history"].as_array().unwrap().len();
    // The script has no step left: a model call would fail the resume.
    let out = env.pod().args(["resume", &id]).output().unwrap();
    assert_success(&out);
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(said.contains("is done: nothing to continue"), "{said}");
    assert_eq!(
        env.show_json(&id)["history"].as_array().unwrap().len(),
        before
    );
    let out = env.pod().args(["resume", &id, "--json"]).output().unwrap();
    assert_success(&out);
    let line: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(line["continued"], false);
    // With a new prompt it goes on.
    let more = env.script("more.json", &script(vec![say("Hi."), say("Again.")]));
    let out = env
        .pod()
        .args(["resume", &id, "Say it again", "--script"])
        .arg(&more)
        .output()
        .unwrap();
    assert_success(&out);
    assert!(String::from_utf8_lossy(&out.stdout).contains("Again."));
}
