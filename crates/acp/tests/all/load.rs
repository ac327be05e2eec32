//! `session/load`: replay before the answer, and unknown sessions.

use crate::client::join_chunks;
use crate::prompt::planning_script;
use crate::support::{script, TestHome};
use serde_json::json;

#[tokio::test]
async fn load_replays_the_conversation_and_the_current_plan_before_answering() {
    let home = TestHome::new();
    let mut first = home.server(planning_script());
    first.client.initialize().await;
    let session = first.client.new_session(&home.workspace()).await;
    first.client.prompt(&session, "Port the parser").await;
    // EOF: the server shuts its Pods down and the log is complete.
    first.close().await;

    let mut second = home.server(script(json!([])));
    let client = &mut second.client;
    client.initialize().await;
    let reply = client
        .call(
            "session/load",
            json!({"sessionId": session, "cwd": home.workspace(), "mcpServers": []}),
        )
        .await;
    assert_eq!(reply.result(), &json!({}));
    assert_eq!(
        join_chunks(reply.summary()),
        [
            "user Port the parser",
            "message Planning.",
            "tool_call call_0_0 Update plan (2 items) think pending",
            "tool_call_update call_0_0 completed",
            "tool_call call_1_0 Update plan (2 items) think pending",
            "tool_call_update call_1_0 failed",
            "thought Reading is done.",
            "tool_call call_2_0 Update plan (2 items) think pending",
            "tool_call_update call_2_0 completed",
            "message All set.",
            "plan [completed:Read the parser, in_progress:Port it]",
        ]
    );
    second.close().await;
}

#[tokio::test]
async fn loading_an_unknown_session_is_a_clear_error() {
    let home = TestHome::new();
    let mut server = home.server(script(json!([])));
    let client = &mut server.client;
    client.initialize().await;
    let missing = uuid::Uuid::new_v4().to_string();
    let reply = client
        .call(
            "session/load",
            json!({"sessionId": missing, "cwd": home.workspace(), "mcpServers": []}),
        )
        .await;
    assert!(reply.notifications.is_empty());
    let error = reply.error();
    assert_eq!(error["code"], -32002);
    assert_eq!(error["data"]["sessionId"], missing.as_str());
    assert!(
        error["message"].as_str().unwrap().contains(&missing),
        "{error}"
    );
    let garbage = client
        .call(
            "session/load",
            json!({"sessionId": "not-a-session", "cwd": home.workspace(), "mcpServers": []}),
        )
        .await;
    assert_eq!(garbage.error()["code"], -32002);
    server.close().await;
}
