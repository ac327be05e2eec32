//! The Managed Agents API on a fleet: two `pod serve --http` workers on
//! one PostgreSQL store share the API's resources (an agent made on one is
//! read on the other) and its sessions, which the fleet's workers run:
//! created on one server, streamed on the other, answered on the first.

use crate::http::Server;
use crate::managed::run_client;
use crate::support::*;
use serde_json::json;

const CLIENT: &str = r#"
import json, os, signal
import anthropic

signal.alarm(120)
a = anthropic.Anthropic(base_url=os.environ["POD_BASE"], api_key=os.environ["POD_KEY"], max_retries=0)
b = anthropic.Anthropic(base_url="BASE_B", api_key=os.environ["POD_KEY"], max_retries=0)
out = {}
weather = {"type": "custom", "name": "get_weather", "description": "The weather in a city.",
           "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}}}
agent = a.beta.agents.create(name="forecaster", model="default", tools=[{"type": "agent_toolset_20260401"}, weather])
environment = a.beta.environments.create(name="here")
out["agent_on_b"] = b.beta.agents.retrieve(agent.id).name
out["environment_on_b"] = b.beta.environments.retrieve(environment.id).id == environment.id
session = b.beta.sessions.create(agent=agent.id, environment_id=environment.id)
seen = []
with a.beta.sessions.events.stream(session.id) as stream:
    a.beta.sessions.events.send(session.id, events=[{"type": "user.message", "content": [{"type": "text", "text": "Weather in Paris?"}]}])
    for event in stream:
        if event.type.startswith("span."):
            continue
        seen.append(event.type)
        if event.type == "session.status_idle":
            if event.stop_reason.type == "requires_action":
                b.beta.sessions.events.send(session.id, events=[{"type": "user.custom_tool_result", "custom_tool_use_id": event.stop_reason.event_ids[0], "content": [{"type": "text", "text": "sunny"}]}])
            else:
                out["reason"] = event.stop_reason.type
                break
out["stream"] = seen
out["listed_on_b"] = [e.type for e in b.beta.sessions.events.list(session.id) if not e.type.startswith("span.")]
out["sessions_on_a"] = [s.id for s in a.beta.sessions.list()]
out["session"] = session.id
print(json.dumps(out))
"#;

#[test]
fn two_fleet_servers_share_the_apis_resources_and_sessions() {
    let pg = pod_testkit::postgres::Postgres::start();
    let env = TestEnv::new();
    let script = env.script(
        "fleet.json",
        &json!({"steps": [
            call("get_weather", json!({"city": "Paris"})),
            {"text": "Sunny in Paris."}
        ]}),
    );
    let start = || {
        let mut command = env.pod_process();
        command
            .env("POD_STORE", pg.url())
            .args(["--workers", "1", "--yes", "--script"])
            .arg(&script);
        Server::start_with(command, &env)
    };
    let (first, second) = (start(), start());
    let seen = run_client(&env, &first, &CLIENT.replace("BASE_B", &second.base));
    assert_eq!(seen["agent_on_b"], "forecaster", "{seen}");
    assert_eq!(seen["environment_on_b"], true, "{seen}");
    let stream = json!([
        "user.message",
        "session.status_running",
        "agent.custom_tool_use",
        "session.status_idle",
        "session.status_running",
        "user.custom_tool_result",
        "agent.message",
        "session.status_idle"
    ]);
    assert_eq!(seen["stream"], stream, "{seen}");
    assert_eq!(seen["reason"], "end_turn", "{seen}");
    assert_eq!(seen["listed_on_b"], stream, "{seen}");
    assert!(
        seen["sessions_on_a"]
            .as_array()
            .unwrap()
            .contains(&seen["session"]),
        "{seen}"
    );
    // Nothing of the API's was written under POD_HOME: the fleet's
    // database holds it.
    assert!(!env.pod_home().join("managed").exists());
}
