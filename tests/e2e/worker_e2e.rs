//! A pod-worker `Worker` running a multi-turn, tool-calling session against
//! each wire format over loopback, through `build_provider` and the retry
//! wrapper.

use pod_llm::{validate_history, Item, ItemKind, SystemKind};
use pod_providers::{build_provider, ProviderKind, RawProviderConfig};
use pod_testkit::server::{LoopbackServer, Reply};
use pod_testkit::wire::{anthropic_step, openai_step, Call};
use pod_worker::{
    Interceptor, NullObserver, Tool, ToolContext, ToolOutput, ToolRegistry, TurnEndReason, Worker,
    WorkerConfig,
};
use serde_json::{json, Value};
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

    fn parameters(&self) -> Value {
        json!({"type": "object", "properties": {"key": {"type": "string"}}, "required": ["key"]})
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
    let config = WorkerConfig {
        system_prompt: "You look things up.".into(),
        ..WorkerConfig::default()
    };
    let mut worker = Worker::new(provider, tools, config);
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
