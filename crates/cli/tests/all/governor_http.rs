//! The governor over HTTP and on a fleet: a session's recorded money limit
//! holds when the API resumes it and when a fleet worker runs it, `PATCH
//! /api/sessions/{id}` raises it within the server's ceiling (the session
//! then goes on: here, or on the fleet), and `/metrics` counts the stops.

use crate::http::Server;
use crate::support::*;
use serde_json::{json, Value};
use std::time::Duration;

const PRICED: &str =
    "[profiles.priced]\nkind = \"scripted\"\nprices = { input = 1.0, output = 1.0 }\n";

/// Two looks and an answer, each costing 1.00 at a price of 1 per million.
fn steps() -> Value {
    let usage = json!({"prompt_tokens": 1_000_000, "completion_tokens": 0});
    json!({"steps": [
        {"tool_calls": [{"name": "list_dir", "arguments": {"path": "."}}], "usage": usage},
        {"tool_calls": [{"name": "list_dir", "arguments": {"path": "./"}}], "usage": usage},
        {"text": "Done.", "usage": usage},
    ]})
}

async fn patch(server: &Server, id: &str, body: Value) -> (u16, Value) {
    let response = server
        .request(reqwest::Method::PATCH, &format!("/sessions/{id}"))
        .header("content-type", "application/json")
        .body(body.to_string())
        .send()
        .await
        .unwrap();
    let status = response.status().as_u16();
    (status, response.json().await.unwrap_or(Value::Null))
}

/// Asks for session `id` until its status is `status` (failing after a
/// minute, saying what it saw).
pub(crate) async fn until_status(server: &Server, id: &str, status: &str) -> Value {
    let mut seen = Value::Null;
    for _ in 0..1_200 {
        seen = server.get(&format!("/sessions/{id}")).await;
        if seen["session"]["status"] == status && seen["live"] == false {
            return seen;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("session {id} never became {status}: {seen}");
}

/// `/metrics` until it has `line` (a minute at most: the counters follow
/// the sessions' events a moment after they are let go).
pub(crate) async fn until_metric(server: &Server, line: &str) {
    let mut text = String::new();
    for _ in 0..1_200 {
        text = server.metrics().await;
        if text.lines().any(|l| l == line) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("no {line:?} in:\n{text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_api_resume_keeps_the_recorded_limit_and_patch_raises_it_within_the_ceiling() {
    let env = TestEnv::new();
    // The server's ceiling: no session may spend more than 20.
    env.config_file(&format!("{PRICED}[budget]\nmax_cost = 20\n"));
    let script = env.script("serve.json", &steps());
    let mut serve = env.pod_process();
    serve.args(["--profile", "priced", "--script"]).arg(&script);
    let server = Server::start_with(serve, &env);
    let body = json!({
        "task": "Look around",
        "workspace": env.workspace(),
        "budget": {"max_cost": 1.5},
    });
    let (status, created) = server.post("/sessions", &body.to_string()).await;
    assert_eq!(status, 201, "{created}");
    let id = created["session_id"].as_str().unwrap().to_string();
    let stopped = until_status(&server, &id, "stopped").await;
    let money = json!({"session_cost": {"max": 1.5, "spent": 2.0}});
    assert_eq!(stopped["session"]["stopped_by"], money, "{stopped}");

    // A prompt resumes it here with its recorded limit: nothing is asked.
    let (status, answer) = server
        .post(
            &format!("/sessions/{id}/prompt"),
            &json!({"text": "Go on"}).to_string(),
        )
        .await;
    assert_eq!(status, 202, "{answer}");
    server.until_let_go(&id).await;
    let again = until_status(&server, &id, "stopped").await;
    assert_eq!(again["session"]["stopped_by"], money, "{again}");
    assert_eq!(again["session"]["cost"], 2.0, "{again}");

    // More than the server allows is refused; within it, it goes on here.
    let (status, refused) = patch(&server, &id, json!({"max_cost": 50})).await;
    assert_eq!(status, 403, "{refused}");
    let (status, raised) = patch(&server, &id, json!({"max_cost": 10})).await;
    assert_eq!(status, 200, "{raised}");
    assert_eq!(raised["limits"]["cost"], 10.0, "{raised}");
    assert_eq!(raised["before"]["cost"], 1.5, "{raised}");
    assert_eq!(raised["continued"], true, "{raised}");
    let done = until_status(&server, &id, "done").await;
    assert_eq!(done["session"]["cost"], 3.0, "{done}");
    // Two stops by money: the first run's and the prompt's.
    until_metric(&server, "pod_budget_stops_total{reason=\"money\"} 2").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fleet_holds_a_submitted_money_limit_and_continues_once_it_is_raised() {
    let pg = pod_testkit::postgres::Postgres::start();
    let env = TestEnv::new();
    env.config_file(PRICED);
    let script = env.script("fleet.json", &steps());
    let mut serve = env.pod_process();
    serve
        .env("POD_STORE", pg.url())
        .args(["--workers", "2", "--yes", "--profile", "priced", "--script"])
        .arg(&script);
    let server = Server::start_with(serve, &env);
    let workspace = env.workspace().canonicalize().unwrap();
    let batch = json!({"sessions": [{
        "task": "Look around",
        "workspace": workspace,
        "budget": {"max_cost": 1.5},
    }]});
    let (status, body) = server.post("/sessions/batch", &batch.to_string()).await;
    assert_eq!(status, 202, "{body}");
    let id = body["session_ids"][0].as_str().unwrap().to_string();
    // The worker runs it with the limit its log recorded.
    let stopped = until_status(&server, &id, "stopped").await;
    assert_eq!(
        stopped["session"]["stopped_by"],
        json!({"session_cost": {"max": 1.5, "spent": 2.0}}),
        "{stopped}"
    );
    let (status, raised) = patch(&server, &id, json!({"max_cost": 10})).await;
    assert_eq!(status, 200, "{raised}");
    assert_eq!(raised["queued"], true, "{raised}");
    // A worker takes it from the queue and finishes it.
    let done = until_status(&server, &id, "done").await;
    assert_eq!(done["session"]["cost"], 3.0, "{done}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_dashboard_raises_a_stopped_sessions_money_limit_and_it_goes_on() {
    let env = TestEnv::new();
    env.config_file(PRICED);
    let script = env.script("serve.json", &steps());
    let mut serve = env.pod_process();
    serve.args(["--profile", "priced", "--script"]).arg(&script);
    let server = Server::start_with(serve, &env);
    let body = json!({
        "task": "Look around",
        "workspace": env.workspace(),
        "budget": {"max_cost": 1.5},
    });
    let (status, created) = server.post("/sessions", &body.to_string()).await;
    assert_eq!(status, 201, "{created}");
    let id = created["session_id"].as_str().unwrap().to_string();
    until_status(&server, &id, "stopped").await;

    let shots = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("governor");
    let browser = pod_testkit::browser::Browser::start(&shots).await;
    browser
        .goto(&format!("{}/#token={}", server.base, server.token))
        .await;
    browser
        .wait_for(
            "the sessions table",
            "return document.getElementById('list-view').hidden === false;",
        )
        .await;
    browser
        .eval(&format!("location.hash = '#/s/{id}';"), vec![])
        .await;
    let detail = browser
        .wait_for(
            "the stop and the control to raise the limit",
            "return document.getElementById('limit-form').hidden === false \
             && document.getElementById('s-detail').textContent;",
        )
        .await;
    assert_eq!(detail, json!("stopped by its money limit: 2.00 of 1.50"));
    browser.screenshot("stopped").await;
    let amount = browser.find("#limit-cost").await.unwrap();
    browser.type_into(&amount, "10").await;
    browser
        .click(&browser.find("#limit-send").await.unwrap())
        .await;
    // The raise is in the transcript, and the answer it let the model give.
    browser
        .wait_for(
            "the raised limit and the session's last answer",
            "const text = document.getElementById('transcript').textContent; \
             return text.includes('limits: money 10.00 (http)') && text.includes('Done.');",
        )
        .await;
    let done = until_status(&server, &id, "done").await;
    assert_eq!(done["session"]["cost"], 3.0, "{done}");
}
