//! The Managed Agents API of `pod serve --http`, driven by the official
//! Python SDK (`anthropic`, pinned in scripts/test and installed into
//! target/python-sdk): agents, environments and sessions created, a
//! message sent, the events streamed until the session is idle and listed
//! in pages, typed by the SDK; errors as the SDK's exception types.

use crate::http::Server;
use crate::support::*;
use serde_json::{json, Value};
use std::path::PathBuf;

/// The SDK's version scripts/test installs.
const SDK_VERSION: &str = "2.17.0";

/// The directory holding the `anthropic` package; the test fails, saying
/// how to install it, when it is missing.
pub(crate) fn python_sdk() -> PathBuf {
    let dirs = [
        std::env::var_os("POD_PYTHON_SDK").map(PathBuf::from),
        Some(PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../target/python-sdk")),
    ];
    dirs.into_iter()
        .flatten()
        .find(|dir| {
            dir.join("anthropic/resources/beta/sessions").is_dir()
                && dir.join("standardwebhooks").is_dir()
        })
        .unwrap_or_else(|| {
            panic!(
                "the Anthropic Python SDK is not installed: run ./scripts/test, or \
                 `pip install --target target/python-sdk anthropic=={SDK_VERSION} \
                 standardwebhooks==1.3.0` \
                 (POD_PYTHON_SDK may name another directory holding it)"
            )
        })
}

/// What the client does, printing what it saw as one JSON document.
const CLIENT: &str = r#"
import json, os, signal, sys
import anthropic

# A guard against a hang: the stream must reach idle within a minute.
signal.alarm(60)
client = anthropic.Anthropic(base_url=os.environ["POD_BASE"], api_key=os.environ["POD_KEY"], max_retries=0)
out = {"version": anthropic.__version__}

def error_of(call):
    try:
        call()
        return "accepted"
    except anthropic.APIStatusError as err:
        return {"class": type(err).__name__, "status": err.status_code, "type": err.body["error"]["type"], "message": err.body["error"]["message"]}

out["unknown_model"] = error_of(lambda: client.beta.agents.create(name="x", model="no-such-model"))
agent = client.beta.agents.create(name="helper", model="default", system="Be brief.", tools=[{"type": "agent_toolset_20260401"}])
out["agent"] = {"id": agent.id, "model": agent.model.id, "tools": [t.type for t in agent.tools], "version": agent.version}
out["agent_again"] = client.beta.agents.retrieve(agent.id).name
out["agents"] = [a.id for a in client.beta.agents.list()]
environment = client.beta.environments.create(name="here", config={"type": "cloud", "networking": {"type": "unrestricted"}})
out["environment"] = {"id": environment.id, "config": environment.config.type}
out["environments"] = [e.id for e in client.beta.environments.list()]
out["vaults"] = error_of(lambda: client.beta.sessions.create(agent=agent.id, environment_id=environment.id, vault_ids=["vlt_1"]))
out["no_session"] = error_of(lambda: client.beta.sessions.retrieve("sesn_00000000000000000000000000000000"))
out["outside"] = error_of(lambda: client.beta.environments.create(name="out", metadata={"pod.workspace": "/"}))
out["vault_list"] = error_of(lambda: client.beta.vaults.list().data)
out["vault_get"] = error_of(lambda: client.beta.vaults.retrieve("vlt_1"))
out["unknown_session_send"] = error_of(lambda: client.beta.sessions.events.send("sesn_00000000000000000000000000000000", events=[{"type": "user.message", "content": [{"type": "text", "text": "x"}]}]))
out["wrong_key"] = error_of(lambda: anthropic.Anthropic(base_url=os.environ["POD_BASE"], api_key="nope", max_retries=0).beta.agents.list())

session = client.beta.sessions.create(agent=agent.id, environment_id=environment.id, title="first")
out["session"] = {"id": session.id, "status": session.status, "agent": session.agent.id}
seen = []
with client.beta.sessions.events.stream(session.id) as stream:
    client.beta.sessions.events.send(session.id, events=[{"type": "user.message", "content": [{"type": "text", "text": "Plan, then answer."}]}])
    for event in stream:
        one = {"type": event.type, "class": type(event).__name__, "id": event.id}
        if event.type == "agent.message":
            one["text"] = "".join(block.text for block in event.content)
        if event.type == "agent.tool_use":
            one["name"] = event.name
        if event.type == "agent.tool_result":
            one["tool_use_id"] = event.tool_use_id
        if event.type == "span.model_request_end":
            one["start"] = event.model_request_start_id
            one["output_tokens"] = event.model_usage.output_tokens
        if event.type == "session.status_idle":
            one["stop_reason"] = event.stop_reason.type
        seen.append(one)
        if event.type == "session.status_idle":
            break
out["stream"] = seen
out["after"] = client.beta.sessions.retrieve(session.id).status
out["listed"] = [e.id for e in client.beta.sessions.events.list(session.id, limit=2)]
out["sessions"] = [s.id for s in client.beta.sessions.list()]
print(json.dumps(out))
"#;

/// Starts `pod serve --http 127.0.0.1:0 --yes` on `script`.
fn serve(env: &TestEnv, script: &Value) -> Server {
    let path = env.script("serve-script.json", script);
    let mut command = env.pod_process();
    command.arg("--yes").arg("--script").arg(path);
    Server::start_with(command, env)
}

/// `pod serve --http` with every tool allowed (`--yes`), on profile
/// `main`: an OpenAI-compatible model at `model_url`, with `extra`
/// config lines before the profile and `vars` in its environment.
pub(crate) fn serve_on(
    env: &TestEnv,
    model_url: &str,
    extra: &str,
    vars: &[(&str, &str)],
) -> Server {
    env.config_file(&format!(
        "{extra}[profiles.main]\nkind = \"openai\"\nbase_url = \"{model_url}\"\nmodel = \"m\"\n\
         api_key_env = \"MAIN_KEY\"\n"
    ));
    let mut command = env.pod_process();
    command
        .env("MAIN_KEY", "k")
        .envs(vars.iter().copied())
        .args(["--yes", "--profile", "main"]);
    Server::start_with(command, env)
}

/// The types of a client's `stream` events, an idle as `idle:REASON`.
pub(crate) fn shape_of(stream: &[Value]) -> Vec<String> {
    stream
        .iter()
        .map(|e| match e["stop_reason"].as_str() {
            Some(reason) => format!("idle:{reason}"),
            None => e["type"].as_str().unwrap_or_default().to_string(),
        })
        .collect()
}

/// Runs `code` with the SDK against `server`; what it printed, parsed.
pub(crate) fn run_client(env: &TestEnv, server: &Server, code: &str) -> Value {
    let sdk = python_sdk();
    let client = env.script("client.py", &Value::Null);
    std::fs::write(&client, code).unwrap();
    let out = std::process::Command::new("python3")
        .arg(&client)
        .env("PYTHONPATH", &sdk)
        .env("POD_BASE", &server.base)
        .env("POD_KEY", server.token.trim())
        .output()
        .expect("python3 runs (scripts/test installs it)");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "the client failed: {stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_str(stdout.trim()).expect("the client prints JSON")
}

#[test]
fn the_python_sdk_creates_an_agent_and_a_session_and_streams_its_turn() {
    let env = TestEnv::new();
    let script = json!({"steps": [
        write_todos(&[todo("1", "completed")]),
        {"text": "All done from pod."}
    ]});
    let server = serve(&env, &script);
    let seen = run_client(&env, &server, CLIENT);
    assert_eq!(seen["version"], SDK_VERSION);

    // Typed errors, as the SDK's exception types.
    assert_eq!(seen["unknown_model"]["class"], "BadRequestError", "{seen}");
    assert_eq!(seen["unknown_model"]["type"], "invalid_request_error");
    assert!(
        seen["unknown_model"]["message"]
            .as_str()
            .unwrap()
            .contains("no-such-model"),
        "{seen}"
    );
    assert_eq!(seen["vaults"]["class"], "BadRequestError", "{seen}");
    assert!(seen["vaults"]["message"]
        .as_str()
        .unwrap()
        .contains("vaults"));
    assert_eq!(seen["no_session"]["class"], "NotFoundError", "{seen}");
    assert_eq!(seen["no_session"]["type"], "not_found_error");
    assert_eq!(seen["wrong_key"]["class"], "AuthenticationError", "{seen}");
    // The server's ceiling: no workspace outside its roots.
    assert_eq!(seen["outside"]["class"], "PermissionDeniedError", "{seen}");
    assert_eq!(seen["outside"]["type"], "permission_error");
    // What pod does not serve yet: a 404 naming it.
    for endpoint in ["vault_list", "vault_get"] {
        assert_eq!(seen[endpoint]["class"], "NotFoundError", "{seen}");
        assert!(
            seen[endpoint]["message"]
                .as_str()
                .unwrap()
                .contains("pod does not support"),
            "{seen}"
        );
    }
    assert_eq!(
        seen["unknown_session_send"]["class"], "NotFoundError",
        "{seen}"
    );

    // The resources, as created and listed.
    let agent = seen["agent"]["id"].as_str().unwrap();
    assert!(agent.starts_with("agent_"), "{seen}");
    assert_eq!(seen["agent"]["tools"], json!(["agent_toolset_20260401"]));
    assert_eq!(seen["agent_again"], "helper");
    assert_eq!(seen["agents"], json!([agent]));
    let environment = seen["environment"]["id"].as_str().unwrap();
    assert!(environment.starts_with("env_"));
    assert_eq!(seen["environments"], json!([environment]));
    let session = seen["session"]["id"].as_str().unwrap();
    assert_eq!(seen["session"]["status"], "idle");
    assert_eq!(seen["session"]["agent"], agent);
    assert_eq!(seen["sessions"], json!([session]));

    // The turn, every event typed by the SDK's own classes.
    let stream = seen["stream"].as_array().unwrap();
    let types: Vec<&str> = stream.iter().map(|e| e["type"].as_str().unwrap()).collect();
    assert_eq!(
        types,
        [
            "user.message",
            "session.status_running",
            "span.model_request_start",
            "agent.tool_use",
            "span.model_request_end",
            "agent.tool_result",
            "span.model_request_start",
            "agent.message",
            "span.model_request_end",
            "session.status_idle"
        ],
        "{seen}"
    );
    for event in stream {
        assert!(
            event["class"]
                .as_str()
                .unwrap()
                .starts_with("BetaManagedAgents"),
            "an event the SDK did not type: {event}"
        );
    }
    assert_eq!(stream[3]["name"], "todo_write");
    assert_eq!(stream[5]["tool_use_id"], stream[3]["id"]);
    assert_eq!(stream[7]["text"], "All done from pod.");
    assert_eq!(stream[9]["stop_reason"], "end_turn");
    // Each model request is a span: its end names its start.
    assert_eq!(stream[4]["start"], stream[2]["id"], "{seen}");
    assert_eq!(stream[8]["start"], stream[6]["id"], "{seen}");
    assert!(stream[4]["output_tokens"].is_u64(), "{seen}");
    assert_eq!(seen["after"], "idle");
    // Listed page by page (two at a time), the same events as streamed.
    let streamed: Vec<&Value> = stream.iter().map(|e| &e["id"]).collect();
    let listed: Vec<&Value> = seen["listed"].as_array().unwrap().iter().collect();
    assert_eq!(listed, streamed);

    // An ordinary pod session with the same id.
    let uuid = session.strip_prefix("sesn_").unwrap();
    let sessions = env.sessions_json();
    assert!(
        sessions
            .iter()
            .any(|s| s["id"].as_str().unwrap_or_default().replace('-', "") == uuid),
        "pod sessions does not list {session}: {sessions:?}"
    );
    // It runs as its agent: the agent's system prompt is in its launch
    // record, after pod's own.
    let id = uuid::Uuid::parse_str(uuid).unwrap().to_string();
    let shown = env.show_json(&id);
    let log = std::fs::read_to_string(shown["session"]["log_path"].as_str().unwrap()).unwrap();
    let header: Value = serde_json::from_str(log.lines().next().unwrap()).unwrap();
    let agent = &header["rec"]["header"]["launch"]["prompt"]["agent"];
    assert_eq!(agent["name"], "helper", "{header}");
    assert_eq!(agent["prompt"], "Be brief.", "{header}");
}

/// A session started by its `initial_events`, read once idle, prompted
/// again and interrupted; a stream resumed with `Last-Event-ID`.
const SECOND_TURN: &str = r#"
import json, os, signal, time
import anthropic

signal.alarm(60)
client = anthropic.Anthropic(base_url=os.environ["POD_BASE"], api_key=os.environ["POD_KEY"], max_retries=0)
out = {}
agent = client.beta.agents.create(name="helper", model={"id": "default"})
environment = client.beta.environments.create(name="offline", config={"type": "cloud", "networking": {"type": "limited"}})
out["networking"] = environment.config.networking.type
session = client.beta.sessions.create(agent={"type": "agent", "id": agent.id, "version": 1}, environment_id=environment.id,
                                      initial_events=[{"type": "user.message", "content": [{"type": "text", "text": "One"}]}])
# Started by its first message: it runs, then it is idle (polled, with the alarm as the guard).
while client.beta.sessions.retrieve(session.id).status != "idle":
    time.sleep(0.05)
first = list(client.beta.sessions.events.list(session.id))
out["first"] = [[e.type, getattr(e, "content", None) and e.content[0].text] for e in first if not e.type.startswith("span.model_request")]
out["usage"] = client.beta.sessions.retrieve(session.id).usage.output_tokens is not None

seen = []
with client.beta.sessions.events.stream(session.id) as stream:
    client.beta.sessions.events.send(session.id, events=[{"type": "user.message", "content": [{"type": "text", "text": "Two"}]}])
    for event in stream:
        if not event.type.startswith("span.model_request"):
            seen.append(event.type)
        if event.type == "session.status_running":
            out["running"] = client.beta.sessions.retrieve(session.id).status
            client.beta.sessions.events.send(session.id, events=[{"type": "user.interrupt"}])
        if event.type == "session.status_idle":
            out["stop_reason"] = event.stop_reason.type
            break
out["second"] = seen

# Reconnecting after the first event gets the ones after it.
resumed = []
with client.beta.sessions.events.stream(session.id, extra_headers={"Last-Event-ID": first[0].id}) as stream:
    for event in stream:
        resumed.append(event.id)
        if len(resumed) == 3:
            break
out["resumed"] = resumed == [e.id for e in first[1:4]]
out["all"] = [e.type for e in client.beta.sessions.events.list(session.id, limit=3) if not e.type.startswith("span.model_request")]
out["newest"] = [e.type for e in client.beta.sessions.events.list(session.id, order="desc", limit=1)][0]
print(json.dumps(out))
"#;

#[test]
fn a_session_started_by_its_initial_events_takes_another_message_and_an_interrupt() {
    let env = TestEnv::new();
    let script = json!({"steps": [
        {"text": "First answer."},
        {"text": "slow", "delay_ms": 600_000}
    ]});
    let server = serve(&env, &script);
    let seen = run_client(&env, &server, SECOND_TURN);
    assert_eq!(seen["networking"], "limited", "{seen}");
    assert_eq!(
        seen["first"],
        json!([
            ["user.message", "One"],
            ["session.status_running", null],
            ["agent.message", "First answer."],
            ["session.status_idle", null]
        ]),
        "{seen}"
    );
    assert_eq!(seen["usage"], true);
    assert_eq!(seen["running"], "running", "{seen}");
    assert_eq!(
        seen["second"],
        json!([
            "user.message",
            "session.status_running",
            "session.status_idle"
        ]),
        "{seen}"
    );
    assert_eq!(seen["stop_reason"], "end_turn");
    assert_eq!(seen["resumed"], true, "{seen}");
    assert_eq!(
        seen["all"],
        json!([
            "user.message",
            "session.status_running",
            "agent.message",
            "session.status_idle",
            "user.message",
            "session.status_running",
            "session.status_idle"
        ]),
        "{seen}"
    );
    assert_eq!(seen["newest"], "session.status_idle");
}

/// A call that asks, confirmed, then one denied, streamed as the SDK types
/// them.
const CONFIRMATIONS: &str = r#"
import json, os, signal
import anthropic

signal.alarm(60)
client = anthropic.Anthropic(base_url=os.environ["POD_BASE"], api_key=os.environ["POD_KEY"], max_retries=0)
agent = client.beta.agents.create(name="writer", model="default")
environment = client.beta.environments.create(name="here")
session = client.beta.sessions.create(agent=agent.id, environment_id=environment.id)
out = {}

def turn(text, result):
    seen = []
    with client.beta.sessions.events.stream(session.id) as stream:
        client.beta.sessions.events.send(session.id, events=[{"type": "user.message", "content": [{"type": "text", "text": text}]}])
        for event in stream:
            if event.type.startswith("span.model_request"):
                continue
            one = {"type": event.type}
            if event.type == "session.status_idle":
                one["stop_reason"] = event.stop_reason.type
                if event.stop_reason.type == "requires_action":
                    asked = event.stop_reason.event_ids
                    one["asked"] = asked == [e["id"] for e in seen if e["type"] == "agent.tool_use"]
                    out["busy_" + result] = error_of(lambda: client.beta.sessions.events.send(session.id, events=[{"type": "user.message", "content": [{"type": "text", "text": "hurry"}]}]))
                    out["wrong_" + result] = error_of(lambda: client.beta.sessions.events.send(session.id, events=[{"type": "user.tool_confirmation", "tool_use_id": "sevt_nope", "result": "allow"}]))
                    client.beta.sessions.events.send(session.id, events=[{"type": "user.tool_confirmation", "tool_use_id": asked[0], "result": result}])
            if event.type == "agent.tool_use":
                one["id"] = event.id
            if event.type == "agent.tool_result":
                one["is_error"] = event.is_error
            if event.type == "agent.message":
                one["text"] = event.content[0].text
            seen.append(one)
            if one.get("stop_reason") == "end_turn":
                break
    return seen

def error_of(call):
    try:
        call()
        return "accepted"
    except anthropic.APIStatusError as err:
        return type(err).__name__

out["allowed"] = turn("Write a.txt", "allow")
out["denied"] = turn("Write b.txt", "deny")
print(json.dumps(out))
"#;

#[test]
fn a_call_that_asks_waits_for_a_tool_confirmation_allowed_or_denied() {
    let env = TestEnv::new();
    let script = json!({"steps": [
        call("write_file", json!({"path": "a.txt", "content": "allowed\n"})),
        {"text": "Wrote a."},
        call("write_file", json!({"path": "b.txt", "content": "denied\n"})),
        {"text": "Left b alone."}
    ]});
    // Without --yes: writing a file asks.
    let path = env.script("serve-script.json", &script);
    let mut command = env.pod_process();
    command.arg("--script").arg(path);
    let server = Server::start_with(command, &env);
    let seen = run_client(&env, &server, CONFIRMATIONS);
    let shape = |turn: &Value| -> Vec<String> {
        turn.as_array()
            .unwrap()
            .iter()
            .map(|e| match e["stop_reason"].as_str() {
                Some(reason) => format!("idle:{reason}"),
                None => e["type"].as_str().unwrap().to_string(),
            })
            .collect()
    };
    let expected = [
        "user.message",
        "session.status_running",
        "agent.tool_use",
        "idle:requires_action",
        "session.status_running",
        "agent.tool_result",
        "agent.message",
        "idle:end_turn",
    ];
    for (turn, result, text) in [
        ("allowed", "allow", "Wrote a."),
        ("denied", "deny", "Left b alone."),
    ] {
        let events = &seen[turn];
        assert_eq!(shape(events), expected, "{seen}");
        assert_eq!(events[3]["asked"], true, "{seen}");
        assert_eq!(events[5]["is_error"], turn == "denied", "{seen}");
        assert_eq!(events[6]["text"], text);
        // While it waits: no message, no confirmation of another call.
        assert_eq!(seen[format!("busy_{result}")], "ConflictError", "{seen}");
        assert_eq!(seen[format!("wrong_{result}")], "ConflictError", "{seen}");
    }
    let workspace = env.workspace();
    assert_eq!(
        std::fs::read_to_string(workspace.join("a.txt")).unwrap(),
        "allowed\n"
    );
    assert!(!workspace.join("b.txt").exists());
}

/// Asks for a write and stops once the session waits for a confirmation.
const PARK: &str = r#"
import json, os, signal
import anthropic

signal.alarm(60)
client = anthropic.Anthropic(base_url=os.environ["POD_BASE"], api_key=os.environ["POD_KEY"], max_retries=0)
agent = client.beta.agents.create(name="writer", model="default")
environment = client.beta.environments.create(name="here")
session = client.beta.sessions.create(agent=agent.id, environment_id=environment.id)
with client.beta.sessions.events.stream(session.id) as stream:
    client.beta.sessions.events.send(session.id, events=[{"type": "user.message", "content": [{"type": "text", "text": "Write a.txt"}]}])
    for event in stream:
        if event.type == "session.status_idle":
            print(json.dumps({"session": session.id, "reason": event.stop_reason.type, "asked": event.stop_reason.event_ids}))
            break
"#;

/// Confirms the call SESSION waits on, on a server started since.
const CONFIRM: &str = r#"
import json, os, signal
import anthropic

signal.alarm(60)
client = anthropic.Anthropic(base_url=os.environ["POD_BASE"], api_key=os.environ["POD_KEY"], max_retries=0)
out = {"status": client.beta.sessions.retrieve("SESSION").status, "agents": len(client.beta.agents.list().data)}
seen = []
with client.beta.sessions.events.stream("SESSION") as stream:
    client.beta.sessions.events.send("SESSION", events=[{"type": "user.tool_confirmation", "tool_use_id": "ASKED", "result": "allow"}])
    for event in stream:
        if not event.type.startswith("span.model_request"):
            seen.append(event.type)
        if event.type == "session.status_idle":
            out["reason"] = event.stop_reason.type
            break
out["seen"] = seen
print(json.dumps(out))
"#;

#[test]
fn a_confirmation_pending_when_the_server_is_killed_is_answered_after_a_restart() {
    let env = TestEnv::new();
    let script = json!({"steps": [
        call("write_file", json!({"path": "a.txt", "content": "after the crash\n"})),
        {"text": "Wrote a."}
    ]});
    let path = env.script("serve-script.json", &script);
    let start = || {
        let mut command = env.pod_process();
        command.arg("--script").arg(&path);
        Server::start_with(command, &env)
    };
    let server = start();
    let parked = run_client(&env, &server, PARK);
    assert_eq!(parked["reason"], "requires_action", "{parked}");
    // SIGKILL: nothing is shut down, the question is only in the log.
    drop(server);
    let server = start();
    let code = CONFIRM
        .replace("SESSION", parked["session"].as_str().unwrap())
        .replace("ASKED", parked["asked"][0].as_str().unwrap());
    let seen = run_client(&env, &server, &code);
    assert_eq!(seen["status"], "idle", "{seen}");
    assert_eq!(seen["agents"], 1, "agents are kept across restarts: {seen}");
    assert_eq!(
        seen["seen"],
        json!([
            "session.status_running",
            "agent.tool_result",
            "agent.message",
            "session.status_idle"
        ]),
        "{seen}"
    );
    assert_eq!(seen["reason"], "end_turn");
    assert_eq!(
        std::fs::read_to_string(env.workspace().join("a.txt")).unwrap(),
        "after the crash\n"
    );
}
