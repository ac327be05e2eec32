//! Test helpers: a recording interceptor, a recording observer, tiny tools
//! and a worker builder around the scripted provider.

use async_trait::async_trait;
use parking_lot::Mutex;
use pod_llm::{validate_history, Item, ItemKind, ScriptStep, ScriptedProvider};
use pod_worker::{
    AbortReason, Interceptor, PersistError, PostToolAction, PreRequestAction, PreToolAction,
    PromptAction, Tool, ToolCallInfo, ToolContext, ToolOutput, ToolRegistry, ToolResultInfo,
    TurnEndAction, TurnObserver, TurnOutcome, Worker, WorkerConfig, WorkerError, WorkerEvent,
};
use serde::Deserialize;
use serde_json::{json, Value};
use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

// ---------------------------------------------------------------- interceptor

type RequestEdit = Box<dyn FnMut(&mut Vec<Item>) + Send>;

/// Logs every hook call in order and answers with configured actions
/// (`Continue`/`Finish` when nothing is configured).
#[derive(Default)]
pub struct Recorder {
    /// One line per hook call, e.g. `pre_tool_call call_0_0 echo`.
    pub log: Vec<String>,
    /// Reasons passed to `on_abort`.
    pub aborts: Vec<AbortReason>,
    /// What `on_turn_end` was given, per call.
    pub turn_end_seen: Vec<Vec<Item>>,
    prompt: Option<PromptAction>,
    prompt_rewrite: Option<String>,
    appends: VecDeque<Vec<Item>>,
    pre_request: VecDeque<PreRequestAction>,
    request_edit: Option<RequestEdit>,
    pre_tool: HashMap<String, PreToolAction>,
    tool_args: HashMap<String, String>,
    post_tool: HashMap<String, PostToolAction>,
    result_rewrite: HashMap<String, String>,
    turn_end: VecDeque<TurnEndAction>,
    cancel_on_request: Option<CancellationToken>,
}

impl Recorder {
    pub fn new() -> Self {
        Self::default()
    }
    pub fn on_prompt(mut self, action: PromptAction) -> Self {
        self.prompt = Some(action);
        self
    }
    pub fn rewrite_prompt(mut self, text: &str) -> Self {
        self.prompt_rewrite = Some(text.into());
        self
    }
    /// Items returned by successive `pending_history_appends` calls.
    pub fn appends(mut self, items: Vec<Item>) -> Self {
        self.appends.push_back(items);
        self
    }
    /// Actions returned by successive `pre_llm_request` calls.
    pub fn pre_request(mut self, action: PreRequestAction) -> Self {
        self.pre_request.push_back(action);
        self
    }
    pub fn edit_request(mut self, edit: impl FnMut(&mut Vec<Item>) + Send + 'static) -> Self {
        self.request_edit = Some(Box::new(edit));
        self
    }
    /// Cancels `token` inside the next `pre_llm_request`.
    pub fn cancel_on_request(mut self, token: CancellationToken) -> Self {
        self.cancel_on_request = Some(token);
        self
    }
    pub fn pre_tool(mut self, call_id: &str, action: PreToolAction) -> Self {
        self.pre_tool.insert(call_id.into(), action);
        self
    }
    pub fn tool_args(mut self, call_id: &str, arguments: &str) -> Self {
        self.tool_args.insert(call_id.into(), arguments.into());
        self
    }
    pub fn post_tool(mut self, call_id: &str, action: PostToolAction) -> Self {
        self.post_tool.insert(call_id.into(), action);
        self
    }
    pub fn rewrite_result(mut self, call_id: &str, content: &str) -> Self {
        self.result_rewrite.insert(call_id.into(), content.into());
        self
    }
    /// Actions returned by successive `on_turn_end` calls.
    pub fn turn_end(mut self, action: TurnEndAction) -> Self {
        self.turn_end.push_back(action);
        self
    }
}

#[async_trait]
impl Interceptor for Recorder {
    async fn on_prompt_submit(&mut self, prompt: &mut Item) -> PromptAction {
        self.log.push("on_prompt_submit".into());
        if let (Some(text), ItemKind::User { text: t }) = (&self.prompt_rewrite, &mut prompt.kind) {
            *t = text.clone();
        }
        self.prompt.take().unwrap_or(PromptAction::Continue)
    }

    async fn pending_history_appends(&mut self, _history: &[Item]) -> Vec<Item> {
        self.log.push("pending_history_appends".into());
        self.appends.pop_front().unwrap_or_default()
    }

    async fn pre_llm_request(&mut self, request: &mut Vec<Item>) -> PreRequestAction {
        self.log.push("pre_llm_request".into());
        if let Some(edit) = &mut self.request_edit {
            edit(request);
        }
        if let Some(token) = self.cancel_on_request.take() {
            token.cancel();
        }
        self.pre_request
            .pop_front()
            .unwrap_or(PreRequestAction::Continue)
    }

    async fn pre_tool_call(&mut self, call: &mut ToolCallInfo) -> PreToolAction {
        self.log
            .push(format!("pre_tool_call {} {}", call.call_id, call.name));
        if let Some(args) = self.tool_args.get(&call.call_id) {
            call.arguments = args.clone();
        }
        self.pre_tool
            .remove(&call.call_id)
            .unwrap_or(PreToolAction::Continue)
    }

    async fn post_tool_call(&mut self, result: &mut ToolResultInfo) -> PostToolAction {
        self.log.push(format!(
            "post_tool_call {} {} error={}",
            result.call_id, result.name, result.is_error
        ));
        if let Some(content) = self.result_rewrite.get(&result.call_id) {
            result.content = content.clone();
        }
        self.post_tool
            .remove(&result.call_id)
            .unwrap_or(PostToolAction::Continue)
    }

    async fn on_turn_end(&mut self, turn: &[Item]) -> TurnEndAction {
        self.log.push("on_turn_end".into());
        self.turn_end_seen.push(turn.to_vec());
        self.turn_end.pop_front().unwrap_or(TurnEndAction::Finish)
    }

    async fn on_abort(&mut self, reason: &AbortReason) {
        self.log.push(format!("on_abort {reason:?}"));
        self.aborts.push(reason.clone());
    }
}

// ------------------------------------------------------------------- observer

/// Keeps every committed item and event; can refuse the n-th append.
#[derive(Default)]
pub struct Observed {
    pub items: Vec<Item>,
    pub events: Vec<WorkerEvent>,
    /// Refuse the append with this 0-based index.
    pub fail_at: Option<usize>,
    appends: usize,
}

impl Observed {
    /// An observer that refuses the append with this 0-based index.
    pub fn failing_at(n: usize) -> Self {
        Self {
            fail_at: Some(n),
            ..Self::default()
        }
    }
}

#[async_trait]
impl TurnObserver for Observed {
    async fn on_history_append(&mut self, item: &Item) -> Result<(), PersistError> {
        let n = self.appends;
        self.appends += 1;
        if self.fail_at == Some(n) {
            return Err(PersistError::new(std::io::Error::new(
                std::io::ErrorKind::StorageFull,
                "disk full",
            )));
        }
        self.items.push(item.clone());
        Ok(())
    }

    fn on_event(&mut self, event: WorkerEvent) {
        self.events.push(event);
    }
}

// ---------------------------------------------------------------------- tools

#[derive(Deserialize)]
pub struct TextArgs {
    pub text: String,
}

/// Echoes its text; counts its runs.
#[derive(Default, Clone)]
pub struct Echo {
    pub runs: Arc<AtomicUsize>,
}

#[async_trait]
impl Tool for Echo {
    type Args = TextArgs;
    fn name(&self) -> &str {
        "echo"
    }
    fn description(&self) -> String {
        "Echoes its text.".into()
    }
    fn parameters(&self) -> Value {
        json!({"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]})
    }
    async fn call(&self, args: TextArgs, _ctx: ToolContext) -> ToolOutput {
        self.runs.fetch_add(1, Ordering::SeqCst);
        ToolOutput::ok(args.text)
    }
}

/// Runs until its call is cancelled; tells the test when it has started.
/// With `stubborn`, it ignores cancellation and must be dropped.
#[derive(Clone)]
pub struct Slow {
    pub started: Arc<Notify>,
    pub stubborn: bool,
    /// Set when the running call's future is dropped.
    pub dropped: Arc<AtomicBool>,
}

impl Slow {
    pub fn new(stubborn: bool) -> Self {
        Self {
            started: Arc::new(Notify::new()),
            stubborn,
            dropped: Arc::new(AtomicBool::new(false)),
        }
    }
}

struct SetOnDrop(Arc<AtomicBool>);

impl Drop for SetOnDrop {
    fn drop(&mut self) {
        self.0.store(true, Ordering::SeqCst);
    }
}

#[async_trait]
impl Tool for Slow {
    type Args = Value;
    fn name(&self) -> &str {
        if self.stubborn {
            "stubborn"
        } else {
            "slow"
        }
    }
    fn description(&self) -> String {
        "Runs until cancelled.".into()
    }
    fn parameters(&self) -> Value {
        json!({"type": "object"})
    }
    async fn call(&self, _args: Value, ctx: ToolContext) -> ToolOutput {
        let _guard = SetOnDrop(self.dropped.clone());
        self.started.notify_one();
        if self.stubborn {
            std::future::pending::<()>().await;
        }
        ctx.cancel.cancelled().await;
        ToolOutput::error("slow: stopped because the turn was cancelled")
    }
}

/// Panics with its text.
pub struct Panics;

#[async_trait]
impl Tool for Panics {
    type Args = TextArgs;
    fn name(&self) -> &str {
        "panics"
    }
    fn description(&self) -> String {
        "Always panics.".into()
    }
    fn parameters(&self) -> Value {
        json!({"type": "object"})
    }
    async fn call(&self, args: TextArgs, _ctx: ToolContext) -> ToolOutput {
        panic!("{}", args.text)
    }
}

#[derive(Deserialize)]
pub struct GaugeArgs {
    /// How often to yield before finishing, so calls can finish out of order.
    pub yields: usize,
}

/// Shared record of a [`Gauge`] tool: how many calls ran at once, and in
/// which order they finished.
#[derive(Default)]
pub struct GaugeState {
    pub running: AtomicUsize,
    pub max_running: AtomicUsize,
    pub finished: Mutex<Vec<String>>,
}

/// A tool that measures how many of its calls overlap.
#[derive(Clone)]
pub struct Gauge {
    pub name: &'static str,
    pub safe: bool,
    pub state: Arc<GaugeState>,
}

#[async_trait]
impl Tool for Gauge {
    type Args = GaugeArgs;
    fn name(&self) -> &str {
        self.name
    }
    fn description(&self) -> String {
        "Measures concurrency.".into()
    }
    fn parameters(&self) -> Value {
        json!({"type": "object", "properties": {"yields": {"type": "integer"}}})
    }
    fn concurrency_safe(&self) -> bool {
        self.safe
    }
    async fn call(&self, args: GaugeArgs, ctx: ToolContext) -> ToolOutput {
        let now = self.state.running.fetch_add(1, Ordering::SeqCst) + 1;
        self.state.max_running.fetch_max(now, Ordering::SeqCst);
        // Yielding lets the worker poll the other calls of the batch.
        for _ in 0..args.yields {
            tokio::task::yield_now().await;
        }
        self.state.running.fetch_sub(1, Ordering::SeqCst);
        self.state.finished.lock().push(ctx.call_id.clone());
        ToolOutput::ok(format!("{} done", ctx.call_id))
    }
}

// --------------------------------------------------------------------- worker

/// A worker over a scripted provider, with the test tools registered.
pub struct TestWorker {
    pub worker: Worker,
    pub provider: ScriptedProvider,
    pub echo: Echo,
    pub slow: Slow,
    pub stubborn: Slow,
    /// Shared by the `parallel` (safe) and `serial` (unsafe) gauges.
    pub gauge: Arc<GaugeState>,
    pub cancel: CancellationToken,
}

impl TestWorker {
    pub fn new(steps: Vec<ScriptStep>) -> Self {
        Self::with_config(steps, WorkerConfig::default())
    }

    pub fn with_config(steps: Vec<ScriptStep>, config: WorkerConfig) -> Self {
        let provider = ScriptedProvider::from_steps(steps);
        let echo = Echo::default();
        let slow = Slow::new(false);
        let stubborn = Slow::new(true);
        let gauge = Arc::new(GaugeState::default());
        let mut tools = ToolRegistry::new();
        tools
            .register(echo.clone())
            .register(slow.clone())
            .register(stubborn.clone())
            .register(Panics)
            .register(Gauge {
                name: "parallel",
                safe: true,
                state: gauge.clone(),
            })
            .register(Gauge {
                name: "serial",
                safe: false,
                state: gauge.clone(),
            });
        let worker = Worker::new(Arc::new(provider.clone()), tools, config);
        Self {
            worker,
            provider,
            echo,
            slow,
            stubborn,
            gauge,
            cancel: CancellationToken::new(),
        }
    }

    /// Runs a turn with `prompt` as a user message.
    pub async fn turn(
        &mut self,
        prompt: Option<&str>,
        hooks: &mut dyn Interceptor,
        observer: &mut Observed,
    ) -> Result<TurnOutcome, WorkerError> {
        self.worker
            .run_turn(prompt.map(Item::user), hooks, observer, &self.cancel)
            .await
    }

    pub fn history(&self) -> &[Item] {
        self.worker.history()
    }

    /// Asserts the tool-call/result invariant and that the observer saw
    /// exactly the history.
    pub fn assert_valid(&self, observed: &Observed) {
        validate_history(self.history()).expect("history keeps the tool-call invariant");
        assert_eq!(
            observed.items,
            self.history(),
            "observer saw exactly the history"
        );
    }
}

/// The result item answering `call_id`: (content, is_error).
pub fn result_of(history: &[Item], call_id: &str) -> (String, bool) {
    history
        .iter()
        .find_map(|item| match &item.kind {
            ItemKind::ToolResult {
                call_id: id,
                content,
                is_error,
                ..
            } if id == call_id => Some((content.clone(), *is_error)),
            _ => None,
        })
        .unwrap_or_else(|| panic!("no result for {call_id}"))
}

/// A compact description of each item: `user:..`, `assistant:..[calls]`,
/// `result:<id>`, `system:..`.
pub fn shape(history: &[Item]) -> Vec<String> {
    history
        .iter()
        .map(|item| match &item.kind {
            ItemKind::User { text } => format!("user:{text}"),
            ItemKind::Assistant {
                text, tool_calls, ..
            } => {
                let ids: Vec<&str> = tool_calls.iter().map(|c| c.id.as_str()).collect();
                format!("assistant:{text}{ids:?}")
            }
            ItemKind::ToolResult { call_id, .. } => format!("result:{call_id}"),
            ItemKind::System { text, .. } => format!("system:{text}"),
        })
        .collect()
}
