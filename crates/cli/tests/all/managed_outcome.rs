//! `user.define_outcome` through the official Python SDK: the outcome is
//! pod's verified goal, graded by the agent's model against the rubric.
//! A grader on a real (loopback, OpenAI-compatible) provider fails the
//! first answer, the agent revises, the grader passes it; the stream tells
//! both rounds as `span.outcome_evaluation_*` events and the session's
//! `outcome_evaluations` ends `satisfied`.

use crate::http::Server;
use crate::managed::run_client;
use crate::support::*;
use pod_testkit::server::LoopbackServer;
use pod_testkit::wire::{openai_named_step, openai_step};
use serde_json::{json, Value};

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
        return {"class": type(err).__name__, "status": err.status_code, "message": err.body["error"]["message"]}

agent = client.beta.agents.create(name="writer", model="default")
environment = client.beta.environments.create(name="here")
outcome = {"type": "user.define_outcome", "description": "Write add.py with a documented add function.",
           "rubric": {"type": "text", "content": "Every function has a docstring."}, "max_iterations": 3}
out["bad_rubric"] = error_of(lambda: client.beta.sessions.create(agent=agent.id, environment_id=environment.id,
    initial_events=[dict(outcome, rubric={"type": "text", "content": ""})]))
out["too_many"] = error_of(lambda: client.beta.sessions.create(agent=agent.id, environment_id=environment.id,
    initial_events=[dict(outcome, max_iterations=21)]))

session = client.beta.sessions.create(agent=agent.id, environment_id=environment.id)
seen = []
with client.beta.sessions.events.stream(session.id) as stream:
    sent = client.beta.sessions.events.send(session.id, events=[outcome])
    out["sent_outcome_id"] = sent.data[0].outcome_id if hasattr(sent.data[0], "outcome_id") else None
    for event in stream:
        if event.type.startswith("span.model_request"):
            continue
        one = {"type": event.type}
        if event.type == "user.define_outcome":
            one["outcome_id"] = event.outcome_id
            one["rubric"] = event.rubric.content
        if event.type.startswith("span.outcome_evaluation"):
            one["iteration"] = event.iteration
            one["outcome_id"] = event.outcome_id
        if event.type == "span.outcome_evaluation_end":
            one["result"] = event.result
            one["explanation"] = event.explanation
            one["start"] = event.outcome_evaluation_start_id
        if event.type == "session.status_idle":
            one["stop_reason"] = event.stop_reason.type
        seen.append(one)
        if event.type == "session.status_idle":
            break
out["stream"] = seen
done = client.beta.sessions.retrieve(session.id)
out["evaluations"] = [{"result": e.result, "iteration": e.iteration, "outcome_id": e.outcome_id, "description": e.description} for e in done.outcome_evaluations]
out["again"] = error_of(lambda: client.beta.sessions.events.send(session.id, events=[outcome]))
out["session"] = session.id
print(json.dumps(out))
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_outcome_is_graded_revised_and_satisfied() {
    let first = r#"{"path": "add.py", "content": "def add(a, b):\n    return a + b\n"}"#;
    let second = r#"{"path": "add.py", "content": "def add(a, b):\n    \"\"\"Adds.\"\"\"\n    return a + b\n"}"#;
    // The session's requests and the grader's, in the order they come.
    let model = LoopbackServer::start(vec![
        openai_named_step("", &[("c1", "write_file", first)]),
        openai_step("Done.", &[]),
        openai_step(
            r#"{"verdict": "fail", "reasons": ["add has no docstring"]}"#,
            &[],
        ),
        openai_named_step("", &[("c2", "write_file", second)]),
        openai_step("Documented.", &[]),
        openai_step(r#"{"verdict": "pass", "reasons": ["documented"]}"#, &[]),
    ])
    .await;
    let env = TestEnv::new();
    env.config_file(&format!(
        "[profiles.judge]\nkind = \"openai\"\nbase_url = \"{}\"\nmodel = \"judge-model\"\n\
         api_key_env = \"JUDGE_KEY\"\n",
        model.url("/v1")
    ));
    let mut command = env.pod_process();
    command
        .env("JUDGE_KEY", "k")
        .args(["--yes", "--profile", "judge"]);
    let server = Server::start_with(command, &env);
    // The client blocks; the loopback model answers on the other worker.
    let seen = tokio::task::block_in_place(|| run_client(&env, &server, CLIENT));

    assert_eq!(seen["bad_rubric"]["class"], "BadRequestError", "{seen}");
    assert_eq!(seen["too_many"]["class"], "BadRequestError", "{seen}");
    let stream: Vec<Value> = seen["stream"].as_array().unwrap().clone();
    let types: Vec<&str> = stream.iter().filter_map(|e| e["type"].as_str()).collect();
    assert_eq!(
        types,
        [
            "user.define_outcome",
            "session.status_running",
            "agent.tool_use",
            "agent.tool_result",
            "agent.message",
            "span.outcome_evaluation_start",
            "span.outcome_evaluation_end",
            "agent.tool_use",
            "agent.tool_result",
            "agent.message",
            "span.outcome_evaluation_start",
            "span.outcome_evaluation_end",
            "session.status_idle",
        ],
        "{seen}"
    );
    let outcome_id = stream[0]["outcome_id"].as_str().unwrap();
    assert!(outcome_id.starts_with("outc_"), "{seen}");
    assert_eq!(stream[0]["rubric"], "Every function has a docstring.");
    assert_eq!(
        seen["sent_outcome_id"], outcome_id,
        "the send's echo names it"
    );
    let ends: Vec<&Value> = stream
        .iter()
        .filter(|e| e["type"] == "span.outcome_evaluation_end")
        .collect();
    assert_eq!(ends[0]["result"], "needs_revision", "{seen}");
    assert_eq!(ends[0]["iteration"], 0);
    assert_eq!(ends[0]["explanation"], "add has no docstring", "{seen}");
    assert_eq!(ends[0]["outcome_id"], outcome_id);
    assert_eq!(ends[1]["result"], "satisfied", "{seen}");
    assert_eq!(ends[1]["iteration"], 1);
    assert_eq!(stream[12]["stop_reason"], "end_turn", "{seen}");
    assert_eq!(
        seen["evaluations"],
        json!([{"result": "satisfied", "iteration": 1, "outcome_id": outcome_id,
                "description": "Write add.py with a documented add function."}]),
        "{seen}"
    );
    assert_eq!(seen["again"]["class"], "BadRequestError", "{seen}");

    // The grader judged the rubric, in a context of its own, twice.
    let bodies = model.bodies();
    assert_eq!(bodies.len(), 6, "{bodies:#?}");
    let grader = bodies[2].to_string();
    assert!(
        grader.contains("Every function has a docstring."),
        "{grader}"
    );
    assert!(bodies[2]["tools"].is_null(), "the grader has no tools");
    // The work: the documented file.
    let written = std::fs::read_to_string(env.workspace().join("add.py")).unwrap();
    assert!(written.contains("Adds."), "{written}");
}
