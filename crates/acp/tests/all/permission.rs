//! `session/request_permission`: `write_file` asks (the default policy), and
//! each answer, a client error and `session/cancel` do what they say.

use crate::client::{join_chunks, summarize, AcpClient};
use crate::support::{script, TestHome};
use pod_llm::validate_history;
use pod_testkit::result_of;
use serde_json::{json, Value};
use tokio::io::{AsyncRead, AsyncWrite};

/// A model step writing `path`.
fn write(path: &str) -> Value {
    json!({"tool_calls": [{"name": "write_file",
                           "arguments": {"path": path, "content": "hello\n"}}]})
}

/// Writes `notes.txt`, then says so.
fn write_script() -> Value {
    script(json!([write("notes.txt"), {"text": "Done."}]))
}

fn selected(option: &str) -> Value {
    json!({"outcome": {"outcome": "selected", "optionId": option}})
}

/// Starts a prompt in a new session and waits for its permission request;
/// returns the session, the prompt's id, the updates before the request,
/// and the request.
async fn prompt_until_asked<R, W>(
    client: &mut AcpClient<R, W>,
    home: &TestHome,
) -> (String, u64, Vec<String>, Value)
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    client.initialize().await;
    let session = client.new_session(&home.workspace()).await;
    let prompt = client.send_prompt(&session, "Write the notes").await;
    let (before, request) = client
        .request_from_agent("session/request_permission")
        .await;
    let before = before.iter().map(summarize).collect();
    (session, prompt, before, request)
}

#[tokio::test]
async fn allow_once_asks_with_four_options_and_the_call_then_runs() {
    let home = TestHome::new();
    let mut server = home.server(write_script());
    let client = &mut server.client;
    let (session, prompt, before, request) = prompt_until_asked(client, &home).await;
    // The call is announced before the question, so the editor can show it.
    assert_eq!(
        before.last().map(String::as_str),
        Some("tool_call call_0_0 write_file notes.txt edit pending")
    );
    let params = &request["params"];
    assert_eq!(params["sessionId"], session.as_str());
    assert_eq!(
        params["options"],
        json!([
            {"optionId": "allow_once", "name": "Allow once", "kind": "allow_once"},
            {"optionId": "allow_always", "name": "Always allow this tool", "kind": "allow_always"},
            {"optionId": "reject_once", "name": "Reject", "kind": "reject_once"},
            {"optionId": "reject_always", "name": "Always reject this tool", "kind": "reject_always"},
        ])
    );
    let call = &params["toolCall"];
    assert_eq!(call["toolCallId"], "call_0_0");
    assert_eq!(call["title"], "write_file notes.txt");
    assert_eq!(call["kind"], "edit");
    assert_eq!(call["status"], "pending");
    assert_eq!(
        call["rawInput"],
        json!({"path": "notes.txt", "content": "hello\n"})
    );
    assert_eq!(call["locations"], json!([{"path": "notes.txt"}]));

    client.respond(&request, selected("allow_once")).await;
    let reply = client.reply_to(prompt).await;
    assert_eq!(reply.result(), &json!({"stopReason": "end_turn"}));
    assert_eq!(
        join_chunks(reply.summary()),
        [
            "tool_call_update call_0_0 in_progress",
            "tool_call_update call_0_0 completed",
            "message Done.",
        ]
    );
    let written = std::fs::read_to_string(home.workspace().join("notes.txt")).unwrap();
    assert_eq!(written, "hello\n");
    server.close().await;
    validate_history(&home.history(&session)).unwrap();
}

#[tokio::test]
async fn reject_once_writes_nothing_and_tells_the_model() {
    let home = TestHome::new();
    let mut server = home.server(write_script());
    let client = &mut server.client;
    let (session, prompt, _, request) = prompt_until_asked(client, &home).await;
    client.respond(&request, selected("reject_once")).await;
    let reply = client.reply_to(prompt).await;
    assert_eq!(reply.result(), &json!({"stopReason": "end_turn"}));
    assert_eq!(
        join_chunks(reply.summary()),
        ["tool_call_update call_0_0 failed", "message Done."]
    );
    assert!(!home.workspace().join("notes.txt").exists());
    server.close().await;
    let history = home.history(&session);
    validate_history(&history).unwrap();
    let (content, is_error) = result_of(&history, "call_0_0");
    assert!(is_error);
    assert!(content.contains("the user refused"), "{content}");
}

#[tokio::test]
async fn allow_always_does_not_ask_again_in_the_session() {
    let home = TestHome::new();
    let mut server = home.server(script(json!([
        write("a.txt"),
        write("b.txt"),
        {"text": "Both written."},
    ])));
    let client = &mut server.client;
    let (session, prompt, _, request) = prompt_until_asked(client, &home).await;
    client.respond(&request, selected("allow_always")).await;
    // A second question would hold the turn, and this read would time out.
    let reply = client.reply_to(prompt).await;
    assert_eq!(reply.result(), &json!({"stopReason": "end_turn"}));
    assert_eq!(
        join_chunks(reply.summary()),
        [
            "tool_call_update call_0_0 in_progress",
            "tool_call_update call_0_0 completed",
            "tool_call call_1_0 write_file b.txt edit in_progress",
            "tool_call_update call_1_0 completed",
            "message Both written.",
        ]
    );
    assert!(home.workspace().join("a.txt").exists());
    assert!(home.workspace().join("b.txt").exists());
    server.close().await;
    validate_history(&home.history(&session)).unwrap();
}

#[tokio::test]
async fn cancel_while_asking_answers_cancelled_and_runs_nothing() {
    let home = TestHome::new();
    let mut server = home.server(write_script());
    let client = &mut server.client;
    let (session, prompt, _, request) = prompt_until_asked(client, &home).await;
    client
        .notify("session/cancel", json!({"sessionId": session}))
        .await;
    // The request is never answered: the cancel alone resolves it.
    let reply = client.reply_to(prompt).await;
    assert_eq!(reply.result(), &json!({"stopReason": "cancelled"}));
    assert!(
        reply
            .notifications
            .iter()
            .any(|n| n["method"] == "$/cancel_request"
                && n["params"]["requestId"] == request["id"]),
        "the client is told to withdraw the question: {:?}",
        reply.notifications
    );
    assert!(reply
        .summary()
        .contains(&"tool_call_update call_0_0 failed".to_string()));
    assert!(!home.workspace().join("notes.txt").exists());
    server.close().await;
    let history = home.history(&session);
    validate_history(&history).unwrap();
    assert!(result_of(&history, "call_0_0").1);
}

#[tokio::test]
async fn a_client_error_rejects_the_call_once_and_the_turn_goes_on() {
    let home = TestHome::new();
    let mut server = home.server(write_script());
    let client = &mut server.client;
    let (session, prompt, _, request) = prompt_until_asked(client, &home).await;
    client
        .respond_error(&request, -32603, "no permission UI")
        .await;
    let reply = client.reply_to(prompt).await;
    assert_eq!(reply.result(), &json!({"stopReason": "end_turn"}));
    assert_eq!(
        join_chunks(reply.summary()),
        ["tool_call_update call_0_0 failed", "message Done."]
    );
    assert!(!home.workspace().join("notes.txt").exists());
    server.close().await;
    validate_history(&home.history(&session)).unwrap();
}

#[tokio::test]
async fn a_cancelled_outcome_stops_the_turn_without_running_the_call() {
    let home = TestHome::new();
    let mut server = home.server(write_script());
    let client = &mut server.client;
    let (session, prompt, _, request) = prompt_until_asked(client, &home).await;
    client
        .respond(&request, json!({"outcome": {"outcome": "cancelled"}}))
        .await;
    let reply = client.reply_to(prompt).await;
    // The user dismissed the question without cancelling the prompt: the
    // turn stops (aborted by the gate), which ACP reports as `end_turn`.
    assert_eq!(reply.result(), &json!({"stopReason": "end_turn"}));
    assert_eq!(reply.summary(), ["tool_call_update call_0_0 failed"]);
    assert!(!home.workspace().join("notes.txt").exists());
    server.close().await;
    validate_history(&home.history(&session)).unwrap();
}
