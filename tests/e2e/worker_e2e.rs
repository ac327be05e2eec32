//! A pod-worker `Worker` running a multi-turn, tool-calling session against
//! each wire format over loopback, through `build_provider` and the retry
//! wrapper.

use pod_llm::{validate_history, Item, ItemKind, SystemKind};
use pod_providers::{build_provider, ProviderKind, RawProviderConfig};
use pod_testkit::server::{LoopbackServer, Reply};
use pod_testkit::wire::{anthropic_step, openai_step, response_id, responses_step, Call};
use pod_worker::{
    Interceptor, NoopInterceptor, NullObserver, PreRequestAction, Tool, ToolContext, ToolOutput,
    ToolRegistry, TurnEndReason, Worker, WorkerConfig,
};
use serde_json::{json, Value};
use std::sync::Arc;
use tokio_util::sync::CancellationToken;

/// Looks a key up in a fixed table.
struct Lookup;

#[derive(serde::Deserialize)]
struct LookupArgs {
    key: String,
}

#[async_trait::async_trait]
impl Tool for Lookup {
    type Args = LookupArgs;

    fn name(&self) -> &str {
        "lookup"
    }

    fn description(&self) -> String {
        "Looks up a key.".into()
    }

    fn parameters(&self) -> Arc<Value> {
        Arc::new(
            json!({"type": "object", "properties": {"key": {"type": "string"}}, "required": ["key"]}),
        )
    }

    async fn call(&self, args: LookupArgs, _ctx: ToolContext) -> ToolOutput {
        match args.key.as_str() {
            "a" => ToolOutput::ok("1"),
            "b" => ToolOutput::ok("2"),
            other => ToolOutput::error(format!("no key {other}")),
        }
    }
}

/// Injects one runtime reminder before the second request.
#[derive(Default)]
struct Reminder {
    requests: u32,
}

#[async_trait::async_trait]
impl Interceptor for Reminder {
    async fn pending_history_appends(&mut self, _history: &[Item]) -> Vec<Item> {
        self.requests += 1;
        if self.requests == 2 {
            vec![Item::system(SystemKind::Reminder, "Stay on task.")]
        } else {
            Vec::new()
        }
    }
}

/// Turn 1: two parallel calls, then a call with malformed arguments, then an
/// answer (with a 429 before it); turn 2: a plain answer.
fn session(step: fn(&str, &[Call]) -> Reply) -> Vec<Reply> {
    vec![
        step(
            "Looking up.",
            &[("c1", r#"{"key":"a"}"#), ("c2", r#"{"key":"b"}"#)],
        ),
        step("", &[("c3", r#"{"key": "a""#)]),
        Reply::status(429, r#"{"error":{"message":"slow down"}}"#).header("retry-after", "0"),
        step("a=1, b=2", &[]),
        step("You're welcome.", &[]),
    ]
}

async fn run_session(
    kind: ProviderKind,
    base_path: &str,
    step: fn(&str, &[Call]) -> Reply,
) -> (LoopbackServer, Worker) {
    let server = LoopbackServer::start(session(step)).await;
    let raw = RawProviderConfig {
        kind: Some(kind),
        base_url: Some(server.url(base_path)),
        model: Some("loop-model".into()),
        api_key_env: Some("POD_TEST_KEY".into()),
        ..Default::default()
    };
    let config = raw
        .resolve_with(|name| (name == "POD_TEST_KEY").then(|| "sk-loop".to_string()))
        .unwrap();
    let provider = build_provider(&config).unwrap();
    let mut tools = ToolRegistry::new();
    tools.register(Lookup);
    let mut worker = Worker::new(provider, tools, worker_config());
    let cancel = CancellationToken::new();
    let mut hooks = Reminder::default();
    for prompt in ["What are a and b?", "Thanks"] {
        let outcome = worker
            .run_turn(
                Some(Item::user(prompt)),
                &mut hooks,
                &mut NullObserver,
                &cancel,
            )
            .await
            .unwrap();
        assert_eq!(outcome.reason, TurnEndReason::EndTurn);
    }
    validate_history(worker.history()).unwrap();
    (server, worker)
}

/// The session's worker settings: a system prompt and a cache key (the
/// conversation the Responses wire keeps on the server).
fn worker_config() -> WorkerConfig {
    WorkerConfig {
        system_prompt: "You look things up.".into(),
        cache_key: Some("session-1".into()),
        ..WorkerConfig::default()
    }
}

fn summary(history: &[Item]) -> Vec<String> {
    history
        .iter()
        .map(|item| match &item.kind {
            ItemKind::User { text } => format!("user: {text}"),
            ItemKind::System { text, .. } => format!("system: {text}"),
            ItemKind::ToolResult {
                call_id,
                content,
                is_error,
                ..
            } => format!(
                "result {call_id} error={is_error}: {}",
                content.chars().take(30).collect::<String>()
            ),
            ItemKind::Assistant {
                text, tool_calls, ..
            } => {
                let calls: Vec<_> = tool_calls
                    .iter()
                    .map(|c| format!("{}({})", c.id, c.arguments))
                    .collect();
                format!("assistant: {text} {}", calls.join(" "))
            }
        })
        .collect()
}

const EXPECTED: &[&str] = &[
    "user: What are a and b?",
    r#"assistant: Looking up. c1({"key":"a"}) c2({"key":"b"})"#,
    "result c1 error=false: 1",
    "result c2 error=false: 2",
    "system: Stay on task.",
    r#"assistant:  c3({"key": "a")"#,
    "result c3 error=true: The arguments of this `lookup`",
    "assistant: a=1, b=2 ",
    "user: Thanks",
    "assistant: You're welcome. ",
];

#[tokio::test]
async fn openai_wire_multi_turn_tool_session() {
    let (server, worker) = run_session(ProviderKind::OpenAi, "/v1", openai_step).await;
    assert_eq!(summary(worker.history()), EXPECTED);
    let bodies = server.bodies();
    assert_eq!(bodies.len(), 5, "four answers and one rate-limited retry");
    // The second request carries the results and the reminder in place.
    let roles: Vec<&str> = bodies[1]["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["role"].as_str().unwrap())
        .collect();
    assert_eq!(
        roles,
        ["system", "user", "assistant", "tool", "tool", "system"]
    );
    assert_eq!(bodies[1]["messages"][5]["content"], "Stay on task.");
    assert_eq!(bodies[1]["tools"][0]["function"]["name"], "lookup");
    assert_eq!(bodies[2], bodies[3], "the retry re-sent the same body");
    let usage = match &worker.history()[1].kind {
        ItemKind::Assistant { usage, .. } => *usage,
        _ => None,
    };
    assert_eq!(usage.map(|u| u.prompt_tokens), Some(50));
}

#[tokio::test]
async fn anthropic_wire_multi_turn_tool_session() {
    let (server, worker) = run_session(ProviderKind::Anthropic, "", anthropic_step).await;
    assert_eq!(summary(worker.history()), EXPECTED);
    let bodies = server.bodies();
    assert_eq!(bodies.len(), 5);
    let second = &bodies[1]["messages"];
    assert_eq!(second.as_array().unwrap().len(), 3, "user, assistant, user");
    assert_eq!(
        second[1]["content"][0],
        json!({"type": "thinking", "thinking": "Think.", "signature": "sig"})
    );
    let answer: Vec<&str> = second[2]["content"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b["type"].as_str().unwrap())
        .collect();
    assert_eq!(answer, ["tool_result", "tool_result", "text"]);
    assert_eq!(
        second[2]["content"][2]["text"],
        "<system-reminder>\nStay on task.\n</system-reminder>"
    );
    // The malformed call goes back with an empty input next to its error.
    let third = &bodies[2]["messages"];
    assert_eq!(third[3]["content"][1]["input"], json!({}));
    assert_eq!(third[4]["content"][0]["is_error"], true);
}

#[tokio::test]
async fn responses_wire_sends_only_what_follows_the_stored_response() {
    let (server, worker) = run_session(ProviderKind::OpenAiResponses, "/v1", responses_step).await;
    assert_eq!(summary(worker.history()), EXPECTED);
    assert!(server
        .requests()
        .iter()
        .all(|r| r.path() == "/v1/responses"));
    let bodies = server.bodies();
    assert_eq!(bodies.len(), 5, "four answers and one rate-limited retry");
    for body in &bodies {
        assert_eq!(body["instructions"], "You look things up.");
        assert_eq!(body["store"], true);
        assert_eq!(body["tools"][0]["name"], "lookup");
    }
    // The first request is the whole conversation.
    assert!(bodies[0].get("previous_response_id").is_none());
    assert_eq!(
        bodies[0]["input"],
        json!([{"role": "user", "content": "What are a and b?"}])
    );
    // Then each request names the last response and sends what came after
    // its answer: the results, and the reminder injected in between.
    let calls = [("c1", ""), ("c2", "")];
    assert_eq!(
        bodies[1]["previous_response_id"],
        response_id("Looking up.", &calls)
    );
    assert_eq!(
        bodies[1]["input"],
        json!([
            {"type": "function_call_output", "call_id": "c1", "output": "1"},
            {"type": "function_call_output", "call_id": "c2", "output": "2"},
            {"role": "system", "content": "Stay on task."},
        ])
    );
    assert_eq!(bodies[2], bodies[3], "the retry re-sent the same body");
    assert_eq!(
        bodies[2]["previous_response_id"],
        response_id("", &[("c3", "")])
    );
    let input = bodies[2]["input"].as_array().unwrap();
    assert_eq!(input.len(), 1);
    assert_eq!(input[0]["call_id"], "c3");
    assert!(input[0]["output"]
        .as_str()
        .unwrap()
        .starts_with("The arguments of this `lookup`"));
    assert_eq!(
        bodies[4]["previous_response_id"],
        response_id("a=1, b=2", &[])
    );
    assert_eq!(
        bodies[4]["input"],
        json!([{"role": "user", "content": "Thanks"}])
    );
}

#[tokio::test]
async fn responses_wire_sends_the_whole_history_when_the_chain_is_gone() {
    let server = LoopbackServer::start(vec![
        responses_step("", &[("c1", r#"{"key":"a"}"#)]),
        Reply::status(
            400,
            r#"{"error":{"message":"Previous response with id 'resp_c1' not found.","type":"invalid_request_error","param":"previous_response_id","code":"previous_response_not_found"}}"#,
        ),
        responses_step("a=1", &[]),
        responses_step("Bye.", &[]),
    ])
    .await;
    let provider = || {
        let raw = RawProviderConfig {
            kind: Some(ProviderKind::OpenAiResponses),
            base_url: Some(server.url("/v1")),
            model: Some("loop-model".into()),
            ..Default::default()
        };
        build_provider(&raw.resolve_with(|_| None).unwrap()).unwrap()
    };
    let tools = || {
        let mut tools = ToolRegistry::new();
        tools.register(Lookup);
        tools
    };
    let cancel = CancellationToken::new();
    let mut worker = Worker::new(provider(), tools(), worker_config());
    let outcome = worker
        .run_turn(
            Some(Item::user("What is a?")),
            &mut NoopInterceptor,
            &mut NullObserver,
            &cancel,
        )
        .await
        .unwrap();
    assert_eq!(outcome.reason, TurnEndReason::EndTurn);
    // The same history in a new process (a resumed session): its provider
    // knows no stored response, so the request goes out whole.
    let mut resumed = Worker::new(provider(), tools(), worker_config());
    resumed.set_history(worker.history().to_vec());
    resumed
        .run_turn(
            Some(Item::user("Bye")),
            &mut NoopInterceptor,
            &mut NullObserver,
            &cancel,
        )
        .await
        .unwrap();
    validate_history(resumed.history()).unwrap();
    let bodies = server.bodies();
    assert_eq!(bodies.len(), 4);
    assert_eq!(bodies[1]["previous_response_id"], "resp_c1");
    assert_eq!(bodies[1]["input"].as_array().unwrap().len(), 1);
    // The server lost it: the same request again, whole, before any event.
    assert!(bodies[2].get("previous_response_id").is_none());
    let whole = json!([
        {"role": "user", "content": "What is a?"},
        {"type": "function_call", "call_id": "c1", "name": "lookup", "arguments": "{\"key\":\"a\"}"},
        {"type": "function_call_output", "call_id": "c1", "output": "1"},
    ]);
    assert_eq!(bodies[2]["input"], whole);
    assert!(bodies[3].get("previous_response_id").is_none());
    let resent = bodies[3]["input"].as_array().unwrap();
    assert_eq!(resent.len(), 5, "{resent:?}");
    assert_eq!(resent[3], json!({"role": "assistant", "content": "a=1"}));
    assert_eq!(resent[4], json!({"role": "user", "content": "Bye"}));
}

/// Redacts the first user message of every request, a little differently
/// each time (an edit: the request becomes a copy of the history, and two
/// copies in a row may even share an address).
#[derive(Default)]
struct Redact(u32);

#[async_trait::async_trait]
impl Interceptor for Redact {
    async fn pre_llm_request(&mut self, request: &mut Arc<Vec<Item>>) -> PreRequestAction {
        self.0 += 1;
        if let Some(ItemKind::User { text }) =
            Arc::make_mut(request).first_mut().map(|i| &mut i.kind)
        {
            *text = format!("[redacted {}]", self.0);
        }
        PreRequestAction::Continue
    }
}

#[tokio::test]
async fn responses_wire_sends_an_edited_or_replaced_history_whole() {
    let server = LoopbackServer::start(vec![
        responses_step("", &[("c1", r#"{"key":"a"}"#)]),
        responses_step("a=1", &[]),
        responses_step("", &[("c2", r#"{"key":"a"}"#)]),
        responses_step("Again: a=1", &[]),
        responses_step("Going on.", &[]),
    ])
    .await;
    let raw = RawProviderConfig {
        kind: Some(ProviderKind::OpenAiResponses),
        base_url: Some(server.url("/v1")),
        model: Some("loop-model".into()),
        ..Default::default()
    };
    let provider = build_provider(&raw.resolve_with(|_| None).unwrap()).unwrap();
    let mut tools = ToolRegistry::new();
    tools.register(Lookup);
    let mut worker = Worker::new(provider, tools, worker_config());
    let cancel = CancellationToken::new();
    let turns: [(&str, Box<dyn Interceptor>); 2] = [
        ("What is a?", Box::new(NoopInterceptor)),
        ("Again?", Box::new(Redact::default())),
    ];
    for (prompt, mut hooks) in turns {
        worker
            .run_turn(
                Some(Item::user(prompt)),
                hooks.as_mut(),
                &mut NullObserver,
                &cancel,
            )
            .await
            .unwrap();
    }
    // A compaction replaces the history with a summary and what is kept.
    let kept = worker.history()[worker.history().len() - 4..].to_vec();
    let mut compacted = vec![Item::system(SystemKind::Summary, "Asked for a; a=1.")];
    compacted.extend(kept);
    worker.set_history(compacted);
    worker
        .run_turn(
            Some(Item::user("Go on")),
            &mut NoopInterceptor,
            &mut NullObserver,
            &cancel,
        )
        .await
        .unwrap();
    let bodies = server.bodies();
    assert_eq!(bodies.len(), 5);
    assert_eq!(bodies[1]["previous_response_id"], "resp_c1");
    // Both edited requests of the second turn: whole, as edited.
    for (body, n, items) in [(&bodies[2], 1, 5), (&bodies[3], 2, 7)] {
        assert!(body.get("previous_response_id").is_none(), "{body}");
        assert_eq!(body["input"][0]["content"], format!("[redacted {n}]"));
        assert_eq!(body["input"].as_array().unwrap().len(), items);
    }
    // The replaced history: whole, from the summary.
    assert!(bodies[4].get("previous_response_id").is_none());
    assert_eq!(
        bodies[4]["input"],
        json!([
            {"role": "system", "content": "Asked for a; a=1."},
            {"role": "user", "content": "Again?"},
            {"type": "function_call", "call_id": "c2", "name": "lookup", "arguments": "{\"key\":\"a\"}"},
            {"type": "function_call_output", "call_id": "c2", "output": "1"},
            {"role": "assistant", "content": "Again: a=1"},
            {"role": "user", "content": "Go on"},
        ])
    );
}

#[tokio::test]
async fn scripted_kind_builds_from_a_script_file() {
    let path = std::env::temp_dir().join(format!("pod-script-{}.json", uuid::Uuid::new_v4()));
    std::fs::write(&path, r#"{"model": "demo", "steps": [{"text": "hi"}]}"#).unwrap();
    let raw = RawProviderConfig {
        kind: Some(ProviderKind::Scripted),
        script: Some(path.clone()),
        ..Default::default()
    };
    let provider = build_provider(&raw.resolve_with(|_| None).unwrap()).unwrap();
    std::fs::remove_file(&path).unwrap();
    assert_eq!(provider.model_name(), "demo");
    let response =
        pod_testkit::provider::complete(provider.as_ref(), pod_testkit::provider::ask("x"))
            .await
            .unwrap();
    assert_eq!(response.text, "hi");
}
