//! Custom tools through the official Python SDK: an agent defines a tool
//! its client runs; the model's call is an `agent.custom_tool_use`, the
//! session waits (`requires_action`) until the client's
//! `user.custom_tool_result`, and the model gets that result, on a real
//! (loopback, OpenAI-compatible) provider. The wait is in the session's
//! log: a server SIGKILLed while it waits takes the result after a restart.

use crate::http::Server;
use crate::managed::{run_client, serve_on, shape_of};
use crate::support::*;
use pod_testkit::server::LoopbackServer;
use pod_testkit::wire::{openai_named_step, openai_step};
use serde_json::{json, Value};

/// The SDK's definition of the client's tool, shared by the clients below.
const WEATHER: &str = r#"
weather = {"type": "custom", "name": "get_weather", "description": "The weather in a city.",
           "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}
"#;

const CLIENT: &str = r#"
import json, os, signal
import anthropic

signal.alarm(90)
client = anthropic.Anthropic(base_url=os.environ["POD_BASE"], api_key=os.environ["POD_KEY"], max_retries=0)
out = {}

def error_of(call):
    try:
        call()
        return "accepted"
    except anthropic.APIStatusError as err:
        return {"class": type(err).__name__, "message": err.body["error"]["message"]}

WEATHER
out["reserved"] = error_of(lambda: client.beta.agents.create(name="x", model="default", tools=[dict(weather, name="bash")]))
out["bad_name"] = error_of(lambda: client.beta.agents.create(name="x", model="default", tools=[dict(weather, name="get weather")]))
out["no_schema"] = error_of(lambda: client.beta.agents.create(name="x", model="default", tools=[dict(weather, input_schema={"type": "string"})]))
agent = client.beta.agents.create(name="forecaster", model="default", tools=[{"type": "agent_toolset_20260401"}, weather])
out["tools"] = [{"type": t.type, "class": type(t).__name__, "name": getattr(t, "name", None)} for t in agent.tools]
environment = client.beta.environments.create(name="here")
session = client.beta.sessions.create(agent=agent.id, environment_id=environment.id)

def say(text, is_error=False):
    return {"type": "user.custom_tool_result", "custom_tool_use_id": None, "content": [{"type": "text", "text": text}], "is_error": is_error}

seen = []
uses = 0
with client.beta.sessions.events.stream(session.id) as stream:
    client.beta.sessions.events.send(session.id, events=[{"type": "user.message", "content": [{"type": "text", "text": "Weather in Paris and Oslo?"}]}])
    for event in stream:
        if event.type.startswith("span."):
            continue
        one = {"type": event.type, "class": type(event).__name__}
        if event.type == "agent.custom_tool_use":
            uses += 1
            one.update(name=event.name, input=event.input, id=event.id)
            if uses == 1:
                # Answered at once, before the session says it waits.
                client.beta.sessions.events.send(session.id, events=[dict(say("sunny, 21 C"), custom_tool_use_id=event.id)])
        if event.type == "user.custom_tool_result":
            one.update(custom_tool_use_id=event.custom_tool_use_id, is_error=event.is_error,
                       text="".join(b.text for b in event.content))
        if event.type == "agent.message":
            one["text"] = "".join(b.text for b in event.content)
        if event.type == "session.status_idle":
            one["stop_reason"] = event.stop_reason.type
            if event.stop_reason.type == "requires_action":
                asked = event.stop_reason.event_ids[0]
                one["asked"] = asked
                if uses == 2:
                    # A confirmation or a message does not answer a custom tool.
                    out["confirm"] = error_of(lambda: client.beta.sessions.events.send(session.id, events=[{"type": "user.tool_confirmation", "tool_use_id": asked, "result": "allow"}]))
                    out["message"] = error_of(lambda: client.beta.sessions.events.send(session.id, events=[{"type": "user.message", "content": [{"type": "text", "text": "hurry"}]}]))
                    client.beta.sessions.events.send(session.id, events=[dict(say("station offline", True), custom_tool_use_id=asked)])
        seen.append(one)
        if event.type == "session.status_idle" and event.stop_reason.type == "end_turn":
            break
out["stream"] = seen
out["listed"] = [e.type for e in client.beta.sessions.events.list(session.id) if not e.type.startswith("span.")]
print(json.dumps(out))
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_custom_tool_is_run_by_the_client_and_its_result_reaches_the_model() {
    let model = LoopbackServer::start(vec![
        openai_named_step("", &[("c1", "get_weather", r#"{"city": "Paris"}"#)]),
        openai_named_step("", &[("c2", "get_weather", r#"{"city": "Oslo"}"#)]),
        openai_step("Paris is sunny; Oslo's station is offline.", &[]),
    ])
    .await;
    let env = TestEnv::new();
    // Every tool of pod's own is allowed: the client's still waits for it.
    let server = serve_on(&env, &model.url("/v1"), "", &[]);
    let code = CLIENT.replace("WEATHER", WEATHER);
    let seen = tokio::task::block_in_place(|| run_client(&env, &server, &code));

    for refused in ["reserved", "bad_name", "no_schema"] {
        assert_eq!(seen[refused]["class"], "BadRequestError", "{seen}");
    }
    assert!(
        seen["reserved"]["message"]
            .as_str()
            .unwrap()
            .contains("pod's own tools"),
        "{seen}"
    );
    assert_eq!(
        seen["tools"][1],
        json!({"type": "custom", "class": "BetaManagedAgentsCustomTool", "name": "get_weather"}),
        "{seen}"
    );
    let stream = seen["stream"].as_array().unwrap();
    assert_eq!(
        shape_of(stream),
        [
            "user.message",
            "session.status_running",
            "agent.custom_tool_use",
            "idle:requires_action",
            "session.status_running",
            "user.custom_tool_result",
            "agent.custom_tool_use",
            "idle:requires_action",
            "session.status_running",
            "user.custom_tool_result",
            "agent.message",
            "idle:end_turn",
        ],
        "{seen}"
    );
    // Typed by the SDK, not its unknown-event fallback.
    assert_eq!(
        stream[2]["class"],
        "BetaManagedAgentsAgentCustomToolUseEvent"
    );
    assert_eq!(
        stream[5]["class"],
        "BetaManagedAgentsUserCustomToolResultEvent"
    );
    assert_eq!(stream[2]["input"], json!({"city": "Paris"}));
    assert_eq!(stream[3]["asked"], stream[2]["id"]);
    assert_eq!(stream[5]["custom_tool_use_id"], stream[2]["id"]);
    assert_eq!(stream[5]["text"], "sunny, 21 C");
    assert_eq!(stream[5]["is_error"], false);
    assert_eq!(stream[7]["asked"], stream[6]["id"]);
    assert_eq!(stream[9]["text"], "station offline");
    assert_eq!(stream[9]["is_error"], true);
    assert_eq!(seen["confirm"]["class"], "BadRequestError", "{seen}");
    assert_eq!(seen["message"]["class"], "ConflictError", "{seen}");
    // The list equals the stream.
    let listed: Vec<&str> = seen["listed"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    let streamed: Vec<&str> = stream.iter().filter_map(|e| e["type"].as_str()).collect();
    assert_eq!(listed, streamed, "{seen}");

    // The model was offered the tool as defined and got each result.
    let bodies = model.bodies();
    assert_eq!(bodies.len(), 3, "{bodies:#?}");
    let offered = bodies[0]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["function"]["name"] == "get_weather")
        .cloned();
    assert_eq!(
        offered.map(|t| t["function"]["parameters"]["required"].clone()),
        Some(json!(["city"])),
        "{:#}",
        bodies[0]["tools"]
    );
    let result_of = |body: &Value, call: &str| -> String {
        body["messages"]
            .as_array()
            .unwrap()
            .iter()
            .find(|m| m["role"] == "tool" && m["tool_call_id"] == call)
            .map(|m| m["content"].to_string())
            .unwrap_or_default()
    };
    assert!(
        result_of(&bodies[1], "c1").contains("sunny, 21 C"),
        "{:#}",
        bodies[1]
    );
    assert!(
        result_of(&bodies[2], "c2").contains("station offline"),
        "{:#}",
        bodies[2]
    );
}

/// Asks for the weather and stops once the session waits for the result.
const PARK: &str = r#"
import json, os, signal
import anthropic

signal.alarm(60)
client = anthropic.Anthropic(base_url=os.environ["POD_BASE"], api_key=os.environ["POD_KEY"], max_retries=0)
WEATHER
agent = client.beta.agents.create(name="forecaster", model="default", tools=[weather])
environment = client.beta.environments.create(name="here")
session = client.beta.sessions.create(agent=agent.id, environment_id=environment.id)
with client.beta.sessions.events.stream(session.id) as stream:
    client.beta.sessions.events.send(session.id, events=[{"type": "user.message", "content": [{"type": "text", "text": "Weather in Paris?"}]}])
    for event in stream:
        if event.type == "session.status_idle":
            print(json.dumps({"session": session.id, "reason": event.stop_reason.type, "asked": event.stop_reason.event_ids}))
            break
"#;

/// Answers the call SESSION waits on, on a server started since.
const ANSWER: &str = r#"
import json, os, signal
import anthropic

signal.alarm(60)
client = anthropic.Anthropic(base_url=os.environ["POD_BASE"], api_key=os.environ["POD_KEY"], max_retries=0)
out = {"status": client.beta.sessions.retrieve("SESSION").status}
seen = []
with client.beta.sessions.events.stream("SESSION") as stream:
    client.beta.sessions.events.send("SESSION", events=[{"type": "user.custom_tool_result", "custom_tool_use_id": "ASKED", "content": [{"type": "text", "text": "sunny"}]}])
    for event in stream:
        if not event.type.startswith("span."):
            seen.append(event.type)
        if event.type == "session.status_idle":
            out["reason"] = event.stop_reason.type
            break
out["seen"] = seen
print(json.dumps(out))
"#;

#[test]
fn a_custom_tool_result_pending_when_the_server_is_killed_is_taken_after_a_restart() {
    let env = TestEnv::new();
    let script = json!({"steps": [
        call("get_weather", json!({"city": "Paris"})),
        {"text": "Sunny in Paris."}
    ]});
    let path = env.script("serve-script.json", &script);
    let start = || {
        let mut command = env.pod_process();
        command.arg("--yes").arg("--script").arg(&path);
        Server::start_with(command, &env)
    };
    let server = start();
    let parked = run_client(&env, &server, &PARK.replace("WEATHER", WEATHER));
    assert_eq!(parked["reason"], "requires_action", "{parked}");
    // SIGKILL: the wait is only in the log.
    drop(server);
    let server = start();
    let code = ANSWER
        .replace("SESSION", parked["session"].as_str().unwrap())
        .replace("ASKED", parked["asked"][0].as_str().unwrap());
    let seen = run_client(&env, &server, &code);
    assert_eq!(seen["status"], "idle", "{seen}");
    assert_eq!(
        seen["seen"],
        json!([
            "session.status_running",
            "user.custom_tool_result",
            "agent.message",
            "session.status_idle"
        ]),
        "{seen}"
    );
    assert_eq!(seen["reason"], "end_turn", "{seen}");
}
