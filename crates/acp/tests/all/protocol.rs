//! Initialize, errors, and a server that survives bad input.

use crate::support::{script, TestHome};
use serde_json::json;

#[tokio::test]
async fn initialize_advertises_v1_load_session_and_what_prompts_may_hold() {
    let home = TestHome::new();
    let mut server = home.server(script(json!([])));
    let result = server.client.initialize().await;
    assert_eq!(result["protocolVersion"], 1);
    assert_eq!(result["agentCapabilities"]["loadSession"], true);
    assert_eq!(result["agentCapabilities"]["mcpCapabilities"]["http"], true);
    assert_eq!(
        result["agentCapabilities"]["promptCapabilities"],
        json!({"image": false, "audio": false, "embeddedContext": true})
    );
    assert_eq!(result["agentInfo"]["name"], "pod");
    assert_eq!(result["agentInfo"]["version"], env!("CARGO_PKG_VERSION"));
    server.close().await;
}

#[tokio::test]
async fn a_malformed_line_and_an_unknown_method_get_errors_and_the_server_goes_on() {
    let home = TestHome::new();
    let mut server = home.server(script(json!([])));
    let client = &mut server.client;
    client.send_line("{this is not json").await;
    let parse_error = client.next().await.unwrap();
    assert_eq!(parse_error["error"]["code"], -32700, "{parse_error}");
    assert_eq!(client.initialize().await["protocolVersion"], 1);
    client
        .send_line("{\"jsonrpc\": \"2.0\", \"id\": 7, \"method\": ")
        .await;
    let truncated = client.next().await.unwrap();
    assert_eq!(truncated["error"]["code"], -32700, "{truncated}");
    let unknown = client.call("session/teleport", json!({})).await;
    assert_eq!(unknown.error()["code"], -32601, "{}", unknown.response);
    let bad_params = client.call("session/new", json!({"cwd": 42})).await;
    assert_eq!(
        bad_params.error()["code"],
        -32602,
        "{}",
        bad_params.response
    );
    // Still serving.
    client.new_session(&home.workspace()).await;
    server.close().await;
}

#[tokio::test]
async fn prompts_to_unknown_sessions_and_bad_workspaces_are_errors() {
    let home = TestHome::new();
    let mut server = home.server(script(json!([])));
    let client = &mut server.client;
    client.initialize().await;
    let reply = client.prompt("no-such-session", "hi").await;
    assert_eq!(reply.error()["code"], -32002);
    let relative = client
        .call(
            "session/new",
            json!({"cwd": "relative/dir", "mcpServers": []}),
        )
        .await;
    assert_eq!(relative.error()["code"], -32602);
    assert!(relative.error()["message"]
        .as_str()
        .unwrap()
        .contains("relative/dir"));
    server.close().await;
}

#[tokio::test]
async fn requests_written_behind_initialize_without_waiting_are_answered_in_turn() {
    // JSON-RPC lets a client pipeline: `initialize` and `session/new` in
    // one write, before the first answer. Both are answered, in order.
    let home = TestHome::new();
    let mut server = home.server(script(json!([])));
    let client = &mut server.client;
    let initialize = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize",
                            "params": {"protocolVersion": 1, "clientCapabilities": {}}});
    let new_session = json!({"jsonrpc": "2.0", "id": 2, "method": "session/new",
                             "params": {"cwd": home.workspace(), "mcpServers": []}});
    client
        .send_line(&format!("{initialize}\n{new_session}"))
        .await;
    let first = client.next().await.unwrap();
    assert_eq!(first["id"], 1, "{first}");
    assert_eq!(first["result"]["protocolVersion"], 1, "{first}");
    let second = client.reply_to(2).await;
    let id = second.result()["sessionId"].as_str().unwrap_or_default();
    assert!(id.parse::<uuid::Uuid>().is_ok(), "{}", second.response);
    server.close().await;
}
