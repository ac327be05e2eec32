//! The composition rules of an `InterceptorStack`, hook by hook, with two
//! or more interceptors.

use crate::support::{result_of, shape, Observed, TestWorker};
use async_trait::async_trait;
use pod_llm::{Item, ItemKind, ScriptStep};
use pod_worker::{
    Interceptor, InterceptorStack, Limit, PostToolAction, PreRequestAction, PreToolAction,
    PromptAction, ToolCallInfo, ToolResultInfo, TurnEndAction, TurnEndReason,
};
use serde_json::json;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};

type Log = Arc<Mutex<Vec<String>>>;

/// One layer: says what it saw in the shared log and answers as told.
#[derive(Default)]
struct Layer {
    name: &'static str,
    log: Log,
    prompt: Option<PromptAction>,
    append: Option<&'static str>,
    tag_request: bool,
    request: Option<PreRequestAction>,
    tool: Option<PreToolAction>,
    rewrite_result: bool,
    post: Option<PostToolAction>,
    turn_end: Vec<TurnEndAction>,
}

impl Layer {
    fn new(name: &'static str, log: &Log) -> Self {
        Self {
            name,
            log: log.clone(),
            ..Self::default()
        }
    }

    fn say(&self, what: String) {
        self.log
            .lock()
            .unwrap()
            .push(format!("{} {what}", self.name));
    }
}

#[async_trait]
impl Interceptor for Layer {
    async fn on_prompt_submit(&mut self, prompt: &mut Item) -> PromptAction {
        if let ItemKind::User { text } = &mut prompt.kind {
            self.say(format!("prompt {text}"));
            text.push_str(&format!("+{}", self.name));
        }
        self.prompt.take().unwrap_or(PromptAction::Continue)
    }

    async fn pending_history_appends(&mut self, _history: &[Item]) -> Vec<Item> {
        self.append.map(Item::user).into_iter().collect()
    }

    async fn pre_llm_request(&mut self, request: &mut Arc<Vec<Item>>) -> PreRequestAction {
        self.say(format!("request of {}", request.len()));
        if self.tag_request {
            Arc::make_mut(request).push(Item::user(format!("tag {}", self.name)));
        }
        self.request.take().unwrap_or(PreRequestAction::Continue)
    }

    async fn pre_tool_call(&mut self, call: &mut ToolCallInfo) -> PreToolAction {
        self.say(format!("call {}", call.arguments));
        self.tool.take().unwrap_or(PreToolAction::Continue)
    }

    async fn post_tool_call(&mut self, result: &mut ToolResultInfo) -> PostToolAction {
        self.say(format!("result {}", result.content));
        if self.rewrite_result {
            result.content.push_str(&format!(" [{}]", self.name));
        }
        self.post.take().unwrap_or(PostToolAction::Continue)
    }

    async fn on_turn_end(&mut self, _turn: &[Item]) -> TurnEndAction {
        self.say("turn end".into());
        if self.turn_end.is_empty() {
            TurnEndAction::Finish
        } else {
            self.turn_end.remove(0)
        }
    }
}

fn stack(layers: Vec<Layer>) -> InterceptorStack {
    let mut stack = InterceptorStack::new();
    for layer in layers {
        stack.push(layer);
    }
    stack
}

fn lines(log: &Log) -> Vec<String> {
    log.lock().unwrap().clone()
}

#[tokio::test]
async fn prompts_are_edited_in_turn_and_the_first_cancel_wins() {
    let log = Log::default();
    let mut t = TestWorker::new(vec![ScriptStep::text("ok")]);
    let mut hooks = stack(vec![Layer::new("a", &log), Layer::new("b", &log)]);
    t.turn(Some("go"), &mut hooks, &mut Observed::default())
        .await
        .unwrap();
    assert_eq!(shape(t.history())[0], "user:go+a+b");

    let log = Log::default();
    let mut t = TestWorker::new(vec![ScriptStep::text("ok")]);
    let mut a = Layer::new("a", &log);
    a.prompt = Some(PromptAction::Cancel("no".into()));
    let mut hooks = stack(vec![a, Layer::new("b", &log)]);
    let outcome = t
        .turn(Some("go"), &mut hooks, &mut Observed::default())
        .await
        .unwrap();
    assert_eq!(outcome.reason, TurnEndReason::Rejected("no".into()));
    assert_eq!(lines(&log), ["a prompt go"], "b is never asked");
    assert!(t.history().is_empty());
}

#[tokio::test]
async fn appends_concatenate_and_request_edits_are_seen_by_later_layers() {
    let log = Log::default();
    let mut t = TestWorker::new(vec![ScriptStep::text("ok")]);
    let mut a = Layer::new("a", &log);
    a.append = Some("from a");
    a.tag_request = true;
    let mut b = Layer::new("b", &log);
    b.append = Some("from b");
    let mut hooks = stack(vec![a, b]);
    t.turn(Some("go"), &mut hooks, &mut Observed::default())
        .await
        .unwrap();
    assert_eq!(
        shape(t.history()),
        [
            "user:go+a+b",
            "user:from a",
            "user:from b",
            "assistant:ok[]"
        ]
    );
    // b sees the request a tagged; the tag never reaches history.
    assert!(lines(&log).contains(&"b request of 4".to_string()));
    let sent = &t.provider.requests()[0].history;
    assert_eq!(sent.len(), 4);
}

#[tokio::test]
async fn the_first_stop_before_a_request_ends_the_run() {
    let log = Log::default();
    let mut t = TestWorker::new(vec![ScriptStep::text("never")]);
    let mut a = Layer::new("a", &log);
    a.request = Some(PreRequestAction::Stop(Limit::SessionTokens(10)));
    let mut hooks = stack(vec![a, Layer::new("b", &log)]);
    let outcome = t
        .turn(Some("go"), &mut hooks, &mut Observed::default())
        .await
        .unwrap();
    assert_eq!(
        outcome.reason,
        TurnEndReason::Limit(Limit::SessionTokens(10))
    );
    assert!(t.provider.requests().is_empty());
    assert!(!lines(&log).iter().any(|l| l.starts_with("b request")));
}

#[tokio::test]
async fn a_user_interceptor_that_skips_a_call_stops_the_layers_after_it() {
    let log = Log::default();
    let mut t = TestWorker::new(vec![
        ScriptStep::tool_call("echo", json!({"text": "x"})),
        ScriptStep::text("done"),
    ]);
    let mut user = Layer::new("user", &log);
    user.tool = Some(PreToolAction::Skip(
        "Not run: the embedder forbids echo.".into(),
    ));
    let mut hooks = stack(vec![user, Layer::new("approval", &log)]);
    let mut seen = Observed::default();
    let outcome = t.turn(Some("go"), &mut hooks, &mut seen).await.unwrap();
    assert_eq!(outcome.reason, TurnEndReason::EndTurn);
    assert_eq!(t.echo.runs.load(Ordering::SeqCst), 0);
    assert_eq!(
        result_of(t.history(), "call_0_0"),
        ("Not run: the embedder forbids echo.".into(), true)
    );
    let log = lines(&log);
    assert!(log.contains(&"user call {\"text\":\"x\"}".to_string()));
    assert!(
        !log.iter().any(|l| l.starts_with("approval call")),
        "{log:?}"
    );
    t.assert_valid(&seen);
}

#[tokio::test]
async fn every_layer_sees_a_result_in_turn_and_the_first_abort_wins() {
    let log = Log::default();
    let mut t = TestWorker::new(vec![
        ScriptStep::tool_call("echo", json!({"text": "x"})),
        ScriptStep::text("never"),
    ]);
    let mut a = Layer::new("a", &log);
    a.rewrite_result = true;
    a.post = Some(PostToolAction::Abort("a stops".into()));
    let mut b = Layer::new("b", &log);
    b.post = Some(PostToolAction::Abort("b stops".into()));
    let mut hooks = stack(vec![a, b]);
    let mut seen = Observed::default();
    let outcome = t.turn(Some("go"), &mut hooks, &mut seen).await.unwrap();
    assert_eq!(outcome.reason, TurnEndReason::Aborted("a stops".into()));
    assert!(lines(&log).contains(&"b result x [a]".to_string()));
    assert_eq!(result_of(t.history(), "call_0_0").0, "x [a]");
    t.assert_valid(&seen);
}

#[tokio::test]
async fn a_user_interceptor_can_end_or_continue_a_turn_and_a_pause_wins() {
    // One layer continues: the turn goes on with its message.
    let log = Log::default();
    let mut t = TestWorker::new(vec![ScriptStep::text("one"), ScriptStep::text("two")]);
    let mut a = Layer::new("a", &log);
    a.turn_end = vec![TurnEndAction::ContinueWithMessages(vec![Item::user(
        "more",
    )])];
    let mut hooks = stack(vec![a, Layer::new("b", &log)]);
    let outcome = t
        .turn(Some("go"), &mut hooks, &mut Observed::default())
        .await
        .unwrap();
    assert_eq!(outcome.reason, TurnEndReason::EndTurn);
    assert_eq!(
        shape(t.history()),
        [
            "user:go+a+b",
            "assistant:one[]",
            "user:more",
            "assistant:two[]"
        ]
    );

    // One continues, a later one pauses: the pause wins, nothing is added.
    let log = Log::default();
    let mut t = TestWorker::new(vec![ScriptStep::text("one"), ScriptStep::text("never")]);
    let mut a = Layer::new("a", &log);
    a.turn_end = vec![TurnEndAction::ContinueWithMessages(vec![Item::user(
        "more",
    )])];
    let mut b = Layer::new("b", &log);
    b.turn_end = vec![TurnEndAction::Pause];
    let mut hooks = stack(vec![a, b]);
    let outcome = t
        .turn(Some("go"), &mut hooks, &mut Observed::default())
        .await
        .unwrap();
    assert!(matches!(outcome.reason, TurnEndReason::Paused(_)));
    assert_eq!(shape(t.history()), ["user:go+a+b", "assistant:one[]"]);
    assert_eq!(
        lines(&log)
            .iter()
            .filter(|l| l.ends_with("turn end"))
            .count(),
        2
    );
}
