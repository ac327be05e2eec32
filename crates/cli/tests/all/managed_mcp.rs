//! MCP servers on a Managed Agents API agent, through the official Python
//! SDK: the agent declares a real streamable-HTTP server
//! (`@modelcontextprotocol/server-everything`) and its toolset; a session
//! connects to it, the model's calls of its tools are `agent.mcp_tool_use`
//! and their results `agent.mcp_tool_result`, typed by the SDK; the
//! toolset's `always_ask` default parks a call until a
//! `user.tool_confirmation` (even on a server started with `--yes`), a tool
//! it allows runs at once, and one it disables is refused. Which URLs an
//! API client may name is the operator's (`[http] mcp_server_urls`). The
//! session's creation goes out as the API's `session.created` webhook.

use crate::managed::{run_client, serve_on, shape_of};
use crate::mcp::HttpServer;
use crate::notify_managed::{unwrap_with_sdk, SECRET};
use crate::support::*;
use pod_testkit::server::LoopbackServer;
use pod_testkit::webhook::Receiver;
use pod_testkit::wire::{openai_named_step, openai_step};
use serde_json::{json, Value};

const CLIENT: &str = r#"
import json, os, signal
import anthropic

signal.alarm(90)
client = anthropic.Anthropic(base_url=os.environ["POD_BASE"], api_key=os.environ["POD_KEY"], max_retries=0)
out = {}
URL = "MCP_URL"

def error_of(call):
    try:
        call()
        return "accepted"
    except anthropic.APIStatusError as err:
        return {"class": type(err).__name__, "message": err.body["error"]["message"]}

server = {"type": "url", "name": "everything", "url": URL}
toolset = {"type": "mcp_toolset", "mcp_server_name": "everything",
           "configs": [{"name": "get-sum", "permission_policy": {"type": "always_allow"}},
                       {"name": "get-env", "enabled": False}]}
out["elsewhere"] = error_of(lambda: client.beta.agents.create(name="x", model="default",
    mcp_servers=[dict(server, url="http://169.254.169.254/mcp")], tools=[dict(toolset)]))
out["no_toolset"] = error_of(lambda: client.beta.agents.create(name="x", model="default", mcp_servers=[server]))
out["unknown_server"] = error_of(lambda: client.beta.agents.create(name="x", model="default",
    mcp_servers=[server], tools=[toolset, dict(toolset, mcp_server_name="other")]))
agent = client.beta.agents.create(name="mcp", model="default", mcp_servers=[server],
    tools=[{"type": "agent_toolset_20260401"}, toolset])
out["agent_servers"] = [{"class": type(s).__name__, "name": s.name, "url": s.url} for s in agent.mcp_servers]
mine = [t for t in agent.tools if t.type == "mcp_toolset"][0]
out["toolset"] = {"class": type(mine).__name__, "server": mine.mcp_server_name,
    "default": mine.default_config.permission_policy.type,
    "configs": [[c.name, c.enabled, c.permission_policy.type] for c in mine.configs]}
environment = client.beta.environments.create(name="here")
limited = client.beta.environments.create(name="shut", config={"type": "cloud", "networking": {"type": "limited"}})
out["limited"] = error_of(lambda: client.beta.sessions.create(agent=agent.id, environment_id=limited.id))
session = client.beta.sessions.create(agent=agent.id, environment_id=environment.id)
out["session"] = session.id

seen = []
with client.beta.sessions.events.stream(session.id) as stream:
    client.beta.sessions.events.send(session.id, events=[{"type": "user.message", "content": [{"type": "text", "text": "Use the tools."}]}])
    for event in stream:
        if event.type.startswith("span."):
            continue
        one = {"type": event.type, "class": type(event).__name__, "id": event.id}
        if event.type == "agent.mcp_tool_use":
            one.update(server=event.mcp_server_name, name=event.name, input=event.input)
        if event.type == "agent.mcp_tool_result":
            one.update(use=event.mcp_tool_use_id, is_error=event.is_error,
                       text="".join(b.text for b in event.content))
        if event.type == "session.status_idle":
            one["stop_reason"] = event.stop_reason.type
            if event.stop_reason.type == "requires_action":
                asked = event.stop_reason.event_ids[0]
                one["asked"] = asked
                client.beta.sessions.events.send(session.id, events=[{"type": "user.tool_confirmation", "tool_use_id": asked, "result": "allow"}])
        seen.append(one)
        if event.type == "session.status_idle" and event.stop_reason.type == "end_turn":
            break
out["stream"] = seen
print(json.dumps(out))
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agents_mcp_server_serves_its_tools_under_its_toolsets_policies() {
    let mcp = HttpServer::start();
    let model = LoopbackServer::start(vec![
        openai_named_step(
            "",
            &[("c1", "everything__echo", r#"{"message": "over mcp"}"#)],
        ),
        openai_named_step("", &[("c2", "everything__get-sum", r#"{"a": 2, "b": 3}"#)]),
        openai_named_step("", &[("c3", "everything__get-env", "{}")]),
        openai_step("Done.", &[]),
    ])
    .await;
    let env = TestEnv::new();
    let receiver = Receiver::start(200).await;
    let extra = format!(
        "[http]\nmcp_server_urls = [\"{}\"]\n\
         [notify]\nwebhook = \"{}\"\nsecret_env = \"HOOK_SECRET\"\nformat = \"managed-agents\"\n",
        mcp.url, receiver.url
    );
    // Every tool is allowed on the server: the toolset's ask still asks.
    let server = serve_on(&env, &model.url("/v1"), &extra, &[("HOOK_SECRET", SECRET)]);
    let code = CLIENT.replace("MCP_URL", &mcp.url);
    let seen = tokio::task::block_in_place(|| run_client(&env, &server, &code));

    assert_eq!(
        seen["elsewhere"]["class"], "PermissionDeniedError",
        "{seen}"
    );
    assert!(
        seen["elsewhere"]["message"]
            .as_str()
            .unwrap()
            .contains("mcp_server_urls"),
        "{seen}"
    );
    assert_eq!(seen["no_toolset"]["class"], "BadRequestError", "{seen}");
    assert_eq!(seen["unknown_server"]["class"], "BadRequestError", "{seen}");
    assert_eq!(seen["limited"]["class"], "BadRequestError", "{seen}");
    assert_eq!(
        seen["agent_servers"],
        json!([{"class": "BetaManagedAgentsMCPServerURLDefinition", "name": "everything", "url": mcp.url}])
    );
    assert_eq!(
        seen["toolset"],
        json!({"class": "BetaManagedAgentsMCPToolset", "server": "everything", "default": "always_ask",
               "configs": [["get-sum", true, "always_allow"], ["get-env", false, "always_ask"]]})
    );

    let stream = seen["stream"].as_array().unwrap();
    assert_eq!(
        shape_of(stream),
        [
            "user.message",
            "session.status_running",
            "agent.mcp_tool_use",
            "idle:requires_action",
            "session.status_running",
            "agent.mcp_tool_result",
            "agent.mcp_tool_use",
            "agent.mcp_tool_result",
            "agent.mcp_tool_use",
            "agent.mcp_tool_result",
            "agent.message",
            "idle:end_turn",
        ],
        "{seen:#}"
    );
    assert_eq!(stream[2]["class"], "BetaManagedAgentsAgentMCPToolUseEvent");
    assert_eq!(
        stream[5]["class"],
        "BetaManagedAgentsAgentMCPToolResultEvent"
    );
    assert_eq!(stream[2]["server"], "everything");
    assert_eq!(stream[2]["name"], "echo");
    assert_eq!(stream[2]["input"], json!({"message": "over mcp"}));
    assert_eq!(stream[3]["asked"], stream[2]["id"]);
    // The echo ran on the server once allowed; the sum without asking.
    assert_eq!(stream[5]["use"], stream[2]["id"]);
    assert_eq!(stream[5]["text"], "Echo: over mcp");
    assert_eq!(stream[5]["is_error"], false);
    assert_eq!(stream[7]["use"], stream[6]["id"]);
    assert!(
        stream[7]["text"].as_str().unwrap().contains('5'),
        "{seen:#}"
    );
    // The disabled tool never reached the server.
    assert_eq!(stream[8]["name"], "get-env");
    assert_eq!(stream[9]["is_error"], true, "{seen:#}");
    let bodies = model.bodies();
    let env_result: Value = bodies[3]["messages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["role"] == "tool" && m["tool_call_id"] == "c3")
        .cloned()
        .unwrap();
    assert!(
        !env_result["content"].to_string().contains("PATH"),
        "{env_result}"
    );

    // Its creation went out as the API's webhook, which the SDK reads.
    let created = receiver
        .wait_for(|r| {
            r.json()["data"]["type"] == "session.created"
                && r.json()["data"]["id"] == seen["session"]
        })
        .await;
    let parsed = unwrap_with_sdk(&env, &created);
    assert_eq!(parsed["data_type"], "session.created", "{parsed}");
    assert_eq!(parsed["session"], seen["session"], "{parsed}");
}
