//! Notifications in the Managed Agents API's webhook format (`[notify]
//! format = "managed-agents"`): a run stopped by its money limit and one
//! that finished reach a loopback webhook as `session.budget_reached` and
//! `session.status_idled`, a run's start as `session.status_run_started`
//! and a verification round's end as `session.outcome_evaluation_ended`,
//! signed the Standard Webhooks way, and the
//! official Python SDK verifies and parses them
//! (`client.beta.webhooks.unwrap`, with the `standardwebhooks` package
//! scripts/test installs beside it).

use crate::managed::{python_sdk, run_client, serve_on};
use crate::support::*;
use pod_testkit::webhook::{Received, Receiver};
use serde_json::{json, Value};

pub(crate) const SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";

/// What the SDK makes of `received`: the event's type, id and the
/// session's id, or the error it raised.
pub(crate) fn unwrap_with_sdk(env: &TestEnv, received: &Received) -> Value {
    let code = r#"
import json, os, sys
import anthropic
client = anthropic.Anthropic(api_key="unused")
headers = json.loads(os.environ["HEADERS"])
try:
    event = client.beta.webhooks.unwrap(os.environ["BODY"], headers=headers, key=os.environ["KEY"])
    print(json.dumps({"type": event.type, "id": event.id, "data_type": event.data.type, "session": event.data.id}))
except Exception as err:
    print(json.dumps({"error": type(err).__name__}))
"#;
    let client = env.script("unwrap.py", &Value::Null);
    std::fs::write(&client, code).unwrap();
    let out = std::process::Command::new("python3")
        .arg(&client)
        .env("PYTHONPATH", python_sdk())
        .env("HEADERS", serde_json::to_string(&received.headers).unwrap())
        .env("BODY", String::from_utf8_lossy(&received.body).as_ref())
        .env("KEY", SECRET)
        .output()
        .expect("python3 runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn starts_stops_checks_and_ends_go_out_as_the_managed_agents_apis_webhook_events() {
    let env = TestEnv::new();
    let receiver = Receiver::start(200).await;
    env.config_file(&format!(
        "[profiles.priced]\nkind = \"scripted\"\nprices = {{ input = 1.0, output = 1.0 }}\n\n\
         [notify]\nwebhook = \"{}\"\nsecret_env = \"HOOK_SECRET\"\nformat = \"managed-agents\"\n",
        receiver.url
    ));
    let usage = json!({"prompt_tokens": 1_000_000, "completion_tokens": 0});
    let script = env.script(
        "s.json",
        &json!({"steps": [
            {"tool_calls": [{"name": "list_dir", "arguments": {"path": "."}}], "usage": usage},
            {"tool_calls": [{"name": "list_dir", "arguments": {"path": "./"}}], "usage": usage},
            {"text": "Done.", "usage": usage},
        ]}),
    );
    let run = |extra: &[&str]| {
        let mut command = env.pod_process();
        command
            .env("HOOK_SECRET", SECRET)
            .args(["run", "--json", "--yes", "--profile", "priced"])
            .args(extra)
            .arg("--script")
            .arg(&script)
            .arg("Look around");
        command
    };
    // Stopped by its money limit.
    let mut stopped = run(&["--max-cost", "1.5"]);
    let out = tokio::task::spawn_blocking(move || stopped.output().unwrap())
        .await
        .unwrap();
    assert_eq!(out.status.code(), Some(3));
    let stopped_id = session_id(&ndjson(&out.stdout));
    let budget = receiver
        .wait_for(|r| r.json()["data"]["type"] == "session.budget_reached")
        .await;
    // Finished, its checks passing.
    let mut finished = run(&["--verify", "true"]);
    let out = tokio::task::spawn_blocking(move || finished.output().unwrap())
        .await
        .unwrap();
    assert_success(&out);
    let finished_id = session_id(&ndjson(&out.stdout));
    let idled = receiver
        .wait_for(|r| r.json()["data"]["type"] == "session.status_idled")
        .await;
    let simple = |id: &str| format!("sesn_{}", id.replace('-', ""));
    let of = |r: &Received, kind: &str, id: &str| {
        r.json()["data"]["type"] == kind && r.json()["data"]["id"] == simple(id)
    };
    let started = receiver
        .wait_for(|r| of(r, "session.status_run_started", &finished_id))
        .await;
    let evaluated = receiver
        .wait_for(|r| of(r, "session.outcome_evaluation_ended", &finished_id))
        .await;

    for (received, kind, id) in [
        (&budget, "session.budget_reached", &stopped_id),
        (&idled, "session.status_idled", &finished_id),
        (&started, "session.status_run_started", &finished_id),
        (&evaluated, "session.outcome_evaluation_ended", &finished_id),
    ] {
        assert!(received.signed_with(SECRET), "{:?}", received.headers);
        let body = received.json();
        assert_eq!(body["type"], "event", "{body}");
        let parsed = unwrap_with_sdk(&env, received);
        assert_eq!(parsed["type"], "event", "{parsed}");
        assert_eq!(parsed["data_type"], kind, "{parsed}");
        assert_eq!(parsed["session"], simple(id), "{parsed}");
        assert!(
            parsed["id"].as_str().unwrap().starts_with("wevt_"),
            "{parsed}"
        );
    }
    // A body altered on the way is refused by the SDK's verification.
    let mut forged = idled.clone();
    forged.body = String::from_utf8(forged.body)
        .unwrap()
        .replace("session.status_idled", "session.requires_action")
        .into_bytes();
    let refused = unwrap_with_sdk(&env, &forged);
    assert!(refused["error"].is_string(), "{refused}");
}

const CHANGES: &str = r#"
import json, os, signal
import anthropic

signal.alarm(60)
client = anthropic.Anthropic(base_url=os.environ["POD_BASE"], api_key=os.environ["POD_KEY"], max_retries=0)
agent = client.beta.agents.create(name="a", model="default")
environment = client.beta.environments.create(name="here")
session = client.beta.sessions.create(agent=agent.id, environment_id=environment.id)
client.beta.sessions.update(session.id, title="renamed")
client.beta.sessions.archive(session.id)
client.beta.sessions.delete(session.id)
client.beta.agents.update(agent.id, version=1, name="b")
client.beta.agents.archive(agent.id)
client.beta.environments.update(environment.id, name="there")
client.beta.environments.archive(environment.id)
client.beta.environments.delete(environment.id)
print(json.dumps({"agent": agent.id, "environment": environment.id, "session": session.id}))
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn changes_to_agents_environments_and_sessions_go_out_as_the_apis_webhooks() {
    let env = TestEnv::new();
    let receiver = Receiver::start(200).await;
    let extra = format!(
        "[notify]\nwebhook = \"{}\"\nsecret_env = \"HOOK_SECRET\"\nformat = \"managed-agents\"\n",
        receiver.url
    );
    // No session runs a turn: the model is never asked.
    let server = serve_on(
        &env,
        "http://127.0.0.1:9/v1",
        &extra,
        &[("HOOK_SECRET", SECRET)],
    );
    let ids = tokio::task::block_in_place(|| run_client(&env, &server, CHANGES));
    let id = |kind: &str| ids[kind].as_str().unwrap().to_string();
    let expected = [
        ("agent.created", id("agent")),
        ("agent.updated", id("agent")),
        ("agent.archived", id("agent")),
        ("environment.created", id("environment")),
        ("environment.updated", id("environment")),
        ("environment.archived", id("environment")),
        ("environment.deleted", id("environment")),
        ("session.created", id("session")),
        ("session.updated", id("session")),
        ("session.archived", id("session")),
        ("session.deleted", id("session")),
    ];
    for (change, id) in &expected {
        let received = receiver
            .wait_for(|r| r.json()["data"]["type"] == *change && r.json()["data"]["id"] == *id)
            .await;
        assert!(received.signed_with(SECRET), "{:?}", received.headers);
        let parsed = unwrap_with_sdk(&env, &received);
        assert_eq!(parsed["type"], "event", "{parsed}");
        assert_eq!(parsed["data_type"], *change, "{parsed}");
        assert_eq!(parsed["session"], *id, "{parsed}");
    }
    // They arrive in the order they were made.
    let arrived: Vec<String> = receiver
        .received()
        .iter()
        .map(|r| {
            r.json()["data"]["type"]
                .as_str()
                .unwrap_or_default()
                .to_string()
        })
        .collect();
    let made = [
        "agent.created",
        "environment.created",
        "session.created",
        "session.updated",
        "session.archived",
        "session.deleted",
        "agent.updated",
        "agent.archived",
        "environment.updated",
        "environment.archived",
        "environment.deleted",
    ];
    assert_eq!(arrived, made);
}
