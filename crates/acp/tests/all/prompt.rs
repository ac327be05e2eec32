//! `session/prompt`: the exact updates of a turn, plans, and cancellation.

use crate::client::join_chunks;
use crate::support::{script, TestHome};
use serde_json::{json, Value};

/// A valid plan of two items.
pub fn two_item_plan() -> Value {
    json!({"todos": [
        {"id": "read", "content": "Read the parser", "status": "in_progress"},
        {"id": "port", "content": "Port it", "status": "pending"},
    ]})
}

/// A planning turn: a valid todo_write, a rejected one (two items in
/// progress), then a finished item and a final answer.
pub fn planning_script() -> Value {
    script(json!([
        {"text": "Planning.", "tool_calls": [{"name": "todo_write", "arguments": two_item_plan()}]},
        {"tool_calls": [{"name": "todo_write", "arguments": {"todos": [
            {"id": "read", "content": "Read the parser", "status": "in_progress"},
            {"id": "port", "content": "Port it", "status": "in_progress"},
        ]}}]},
        {"reasoning": "Reading is done.", "tool_calls": [{"name": "todo_write", "arguments": {"todos": [
            {"id": "read", "content": "Read the parser", "status": "completed"},
            {"id": "port", "content": "Port it", "status": "in_progress"},
        ]}}]},
        {"text": "All set."},
    ]))
}

#[tokio::test]
async fn a_turn_streams_text_tool_calls_and_a_plan_per_accepted_todo_write() {
    let home = TestHome::new();
    let mut server = home.server(planning_script());
    let client = &mut server.client;
    client.initialize().await;
    let session = client.new_session(&home.workspace()).await;
    let reply = client.prompt(&session, "Port the parser").await;
    assert_eq!(reply.result(), &json!({"stopReason": "end_turn"}));
    assert!(reply
        .notifications
        .iter()
        .all(|n| n["method"] == "session/update" && n["params"]["sessionId"] == session.as_str()));
    assert_eq!(
        join_chunks(reply.summary()),
        [
            "message Planning.",
            "tool_call call_0_0 Update plan (2 items) think in_progress",
            "tool_call_update call_0_0 completed",
            "plan [in_progress:Read the parser, pending:Port it]",
            "tool_call call_1_0 Update plan (2 items) think in_progress",
            "tool_call_update call_1_0 failed",
            "thought Reading is done.",
            "tool_call call_2_0 Update plan (2 items) think in_progress",
            "tool_call_update call_2_0 completed",
            "plan [completed:Read the parser, in_progress:Port it]",
            "message All set.",
        ]
    );
    // Shapes on the wire, not just the summary.
    let update = |i: usize| &reply.notifications[i]["params"]["update"];
    let call = reply
        .notifications
        .iter()
        .map(|n| &n["params"]["update"])
        .find(|u| u["sessionUpdate"] == "tool_call")
        .unwrap();
    assert_eq!(call["rawInput"], two_item_plan());
    let plan = reply
        .notifications
        .iter()
        .map(|n| &n["params"]["update"])
        .find(|u| u["sessionUpdate"] == "plan")
        .unwrap();
    assert_eq!(
        plan,
        &json!({"sessionUpdate": "plan", "entries": [
            {"content": "Read the parser", "priority": "medium", "status": "in_progress"},
            {"content": "Port it", "priority": "medium", "status": "pending"},
        ]})
    );
    let result = reply
        .notifications
        .iter()
        .map(|n| &n["params"]["update"])
        .find(|u| u["sessionUpdate"] == "tool_call_update")
        .unwrap();
    assert_eq!(result["content"][0]["type"], "content");
    assert!(result["rawOutput"].is_string());
    let _ = update;
    server.close().await;
}

#[tokio::test]
async fn clearing_the_list_sends_an_empty_plan() {
    let home = TestHome::new();
    let mut server = home.server(script(json!([
        {"tool_calls": [{"name": "todo_write", "arguments": two_item_plan()}]},
        {"tool_calls": [{"name": "todo_write", "arguments": {"todos": []}}]},
        {"text": "Cleared."},
    ])));
    let client = &mut server.client;
    client.initialize().await;
    let session = client.new_session(&home.workspace()).await;
    let reply = client.prompt(&session, "Plan, then drop it").await;
    let plans: Vec<&Value> = reply
        .notifications
        .iter()
        .map(|n| &n["params"]["update"])
        .filter(|u| u["sessionUpdate"] == "plan")
        .collect();
    assert_eq!(plans.len(), 2);
    assert_eq!(plans[1], &json!({"sessionUpdate": "plan", "entries": []}));
    server.close().await;
}

#[tokio::test]
async fn cancel_mid_turn_answers_cancelled_and_leaves_a_valid_history() {
    let home = TestHome::new();
    let mut server = home.server(script(json!([
        {"tool_calls": [{"name": "todo_write", "arguments": two_item_plan()}]},
        // Waits far longer than any test: only the cancel ends this step.
        {"text": "never sent", "delay_ms": 3_600_000},
    ])));
    let client = &mut server.client;
    client.initialize().await;
    let session = client.new_session(&home.workspace()).await;
    let id = client.send_prompt(&session, "Take your time").await;
    // The plan shows the turn is under way; then cancel it.
    loop {
        let message = client.next().await.unwrap();
        assert!(message.get("id").is_none(), "answered early: {message}");
        if message.pointer("/params/update/sessionUpdate") == Some(&json!("plan")) {
            break;
        }
    }
    client
        .notify("session/cancel", json!({"sessionId": session}))
        .await;
    let reply = client.reply_to(id).await;
    assert_eq!(reply.result(), &json!({"stopReason": "cancelled"}));
    server.close().await;
    let log = pod::PodHome::new(home.home()).log_path(session.parse().unwrap());
    let records = pod::log::read_log(&log).unwrap().records;
    let history = pod::replay::replay(&records).history;
    pod_llm::validate_history(&history).unwrap();
    assert!(pod::replay::replay(&records).interrupted.is_empty());
}

#[tokio::test]
async fn a_second_prompt_while_one_runs_is_refused() {
    let home = TestHome::new();
    let mut server = home.server(script(json!([
        {"text": "slow", "delay_ms": 3_600_000},
    ])));
    let client = &mut server.client;
    client.initialize().await;
    let session = client.new_session(&home.workspace()).await;
    let first = client.send_prompt(&session, "one").await;
    let second = client.prompt(&session, "two").await;
    assert_eq!(second.error()["code"], -32600);
    client
        .notify("session/cancel", json!({"sessionId": session}))
        .await;
    let reply = client.reply_to(first).await;
    assert_eq!(reply.result()["stopReason"], "cancelled");
    server.close().await;
}
