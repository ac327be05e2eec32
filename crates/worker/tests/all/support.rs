//! Test helpers: a recording interceptor, a recording observer and a worker
//! builder around the scripted provider; the tools and history helpers are
//! the workspace test kit's.

use async_trait::async_trait;
use pod_llm::{validate_history, Item, ItemKind, ScriptStep, ScriptedProvider};
use pod_worker::{
    AbortReason, Interceptor, PersistError, PostToolAction, PreRequestAction, PreToolAction,
    PromptAction, ToolCallInfo, ToolRegistry, ToolResultInfo, TurnEndAction, TurnObserver,
    TurnOutcome, Worker, WorkerConfig, WorkerError, WorkerEvent,
};
use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
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

    async fn pre_llm_request(&mut self, request: &mut Arc<Vec<Item>>) -> PreRequestAction {
        self.log.push("pre_llm_request".into());
        if let Some(edit) = &mut self.request_edit {
            // Copy-on-write: the history the request shares stays as it was.
            edit(Arc::make_mut(request));
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
            return Err(PersistError::new(
                pod_worker::PersistKind::Failed,
                std::io::Error::new(std::io::ErrorKind::StorageFull, "disk full"),
            ));
        }
        self.items.push(item.clone());
        Ok(())
    }

    fn on_event(&mut self, event: WorkerEvent) {
        self.events.push(event);
    }
}

// ---------------------------------------------------------------------- tools

pub use pod_testkit::tools::{Echo, Gauge, GaugeState, Panics, Slow};
pub use pod_testkit::{result_of, shape};

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
