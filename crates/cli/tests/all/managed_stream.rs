//! A Managed Agents stream with `event_deltas=agent.message`, through the
//! official Python SDK: while the model streams its answer in pieces, the
//! stream previews it (`event_start`, then `event_delta`s, typed by the
//! SDK), and the `agent.message` with the preview's id concludes it with
//! the whole text. A stream that did not ask gets no previews, and an
//! unknown preview type is a 400. The session's usage is its answer's.

use crate::managed::{run_client, serve_on};
use crate::support::*;
use pod_testkit::server::{LoopbackServer, Part, Reply};
use serde_json::json;
use std::time::Duration;

const CLIENT: &str = r#"
import json, os, signal
import anthropic

signal.alarm(90)
client = anthropic.Anthropic(base_url=os.environ["POD_BASE"], api_key=os.environ["POD_KEY"], max_retries=0)
out = {}
agent = client.beta.agents.create(name="talker", model="default")
environment = client.beta.environments.create(name="here")
session = client.beta.sessions.create(agent=agent.id, environment_id=environment.id)
try:
    with client.beta.sessions.events.stream(session.id, event_deltas=["agent.speech"]) as stream:
        next(iter(stream))
    out["bad"] = "accepted"
except anthropic.APIStatusError as err:
    out["bad"] = type(err).__name__

seen = []
with client.beta.sessions.events.stream(session.id, event_deltas=["agent.message"]) as stream:
    client.beta.sessions.events.send(session.id, events=[{"type": "user.message", "content": [{"type": "text", "text": "Talk."}]}])
    for event in stream:
        if event.type.startswith("span."):
            continue
        one = {"type": event.type, "class": type(event).__name__}
        if event.type == "event_start":
            one.update(previews=event.event.type, id=event.event.id)
        if event.type == "event_delta":
            one.update(id=event.event_id, delta=event.delta.type, text=event.delta.content.text)
        if event.type == "agent.message":
            one.update(id=event.id, text="".join(b.text for b in event.content))
        seen.append(one)
        if event.type == "session.status_idle":
            break
out["stream"] = seen
usage = client.beta.sessions.retrieve(session.id).usage
out["usage"] = [usage.input_tokens, usage.output_tokens, usage.cache_read_input_tokens]
out["listed"] = [e.type for e in client.beta.sessions.events.list(session.id) if not e.type.startswith("span.")]
print(json.dumps(out))
"#;

/// An OpenAI-compatible answer whose text comes in `pieces`, a pause
/// before each.
fn slow_answer(pieces: &[&str]) -> Reply {
    let mut reply = Reply::sse(Vec::<String>::new());
    for piece in pieces {
        let chunk = json!({"choices": [{"index": 0, "delta": {"content": piece}}]});
        reply = reply
            .then(Part::Pause(Duration::from_millis(400)))
            .then(Part::Bytes(format!("data: {chunk}\n\n").into_bytes()));
    }
    let done = json!({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]});
    let usage = json!({"choices": [], "usage": {"prompt_tokens": 5, "completion_tokens": 5}});
    for last in [
        format!("data: {done}\n\n"),
        format!("data: {usage}\n\n"),
        "data: [DONE]\n\n".into(),
    ] {
        reply = reply.then(Part::Bytes(last.into_bytes()));
    }
    reply
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_that_asks_for_deltas_previews_the_answer_as_it_streams() {
    let pieces = ["Streaming ", "in ", "three pieces."];
    let model = LoopbackServer::start(vec![slow_answer(&pieces)]).await;
    let env = TestEnv::new();
    let server = serve_on(&env, &model.url("/v1"), "", &[]);
    let seen = tokio::task::block_in_place(|| run_client(&env, &server, CLIENT));

    assert_eq!(seen["bad"], "BadRequestError", "{seen}");
    // The session's usage is the answer's, as the model reported it.
    assert_eq!(seen["usage"], json!([5, 5, 0]), "{seen}");
    let stream = seen["stream"].as_array().unwrap();
    let message = stream
        .iter()
        .find(|e| e["type"] == "agent.message")
        .unwrap_or_else(|| panic!("{seen:#}"));
    assert_eq!(message["text"], pieces.concat());
    let start = stream
        .iter()
        .position(|e| e["type"] == "event_start")
        .unwrap_or_else(|| panic!("no preview: {seen:#}"));
    assert_eq!(stream[start]["class"], "BetaManagedAgentsStartEvent");
    assert_eq!(stream[start]["previews"], "agent.message");
    // The preview's id is the message's, and its deltas, before it, make
    // its text.
    assert_eq!(stream[start]["id"], message["id"], "{seen:#}");
    let at_message = stream
        .iter()
        .position(|e| e["type"] == "agent.message")
        .unwrap();
    assert!(start < at_message, "{seen:#}");
    let deltas: Vec<&serde_json::Value> = stream[start..at_message]
        .iter()
        .filter(|e| e["type"] == "event_delta")
        .collect();
    assert!(!deltas.is_empty(), "{seen:#}");
    let mut text = String::new();
    for delta in &deltas {
        assert_eq!(delta["class"], "BetaManagedAgentsDeltaEvent");
        assert_eq!(delta["delta"], "content_delta");
        assert_eq!(delta["id"], message["id"]);
        text.push_str(delta["text"].as_str().unwrap());
    }
    // Best effort: a piece streamed before the stream followed the
    // session's tail is not previewed; what is previewed is the answer's
    // text, in order, up to its end.
    assert!(pieces.concat().ends_with(&text), "{text:?}: {seen:#}");
    // Previews are never history.
    let listed: Vec<&str> = seen["listed"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t.as_str())
        .collect();
    assert!(!listed.contains(&"event_start") && !listed.contains(&"event_delta"));
    assert!(listed.contains(&"agent.message"), "{listed:?}");
}
