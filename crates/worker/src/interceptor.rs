//! The hooks through which upper layers steer a turn.

use pod_llm::Item;

/// What to do with a submitted prompt.
#[derive(Debug, Clone, PartialEq)]
pub enum PromptAction {
    /// Commit the prompt and run the turn.
    Continue,
    /// Do not run the turn; nothing is committed.
    Cancel(String),
    /// Commit the prompt, then these items, then run the turn.
    ContinueWith(Vec<Item>),
}

/// What to do before one model request.
#[derive(Debug, Clone, PartialEq)]
pub enum PreRequestAction {
    /// Send the (possibly edited) request.
    Continue,
    /// End the turn without sending it; it ends as
    /// [`TurnEndReason::Aborted`](crate::TurnEndReason::Aborted) with this
    /// reason, and `on_abort` is called.
    Cancel(String),
    /// End the turn without sending it, to be continued later (for example
    /// after the caller compacts the history).
    Yield,
}

/// What to do before one tool call.
#[derive(Debug, Clone, PartialEq)]
pub enum PreToolAction {
    /// Run the call (with any edits made to the [`ToolCallInfo`]).
    Continue,
    /// Do not run it; the model gets an error result with exactly this text,
    /// so it should say that the call did not run, why, and what to do.
    Skip(String),
    /// Do not run it or any later call; end the turn as aborted.
    Abort(String),
    /// Do not run it or any later call; end the turn as paused.
    Pause(String),
}

/// What to do after one tool call.
#[derive(Debug, Clone, PartialEq)]
pub enum PostToolAction {
    /// Commit the (possibly edited) result and go on.
    Continue,
    /// Commit the result, run nothing more and end the turn as aborted.
    Abort(String),
}

/// What to do when the model answers without tool calls.
#[derive(Debug, Clone, PartialEq)]
pub enum TurnEndAction {
    /// End the turn.
    Finish,
    /// Commit these items and ask the model again.
    ContinueWithMessages(Vec<Item>),
    /// End the turn as paused.
    Pause,
}

/// Why a turn was aborted or cancelled.
#[derive(Debug, Clone, PartialEq)]
pub enum AbortReason {
    /// Cancelled from outside (the cancellation token).
    Cancelled,
    /// An interceptor asked for it.
    Interceptor(String),
}

/// A tool call about to run; fields may be edited by `pre_tool_call`.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolCallInfo {
    /// Call id.
    pub call_id: String,
    /// Tool name.
    pub name: String,
    /// Raw JSON arguments.
    pub arguments: String,
}

/// A tool call's result before it is committed; `content` and `is_error`
/// may be edited by `post_tool_call`.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolResultInfo {
    /// Call id.
    pub call_id: String,
    /// Tool name.
    pub name: String,
    /// The arguments the tool ran with.
    pub arguments: String,
    /// The result text.
    pub content: String,
    /// Whether the call failed.
    pub is_error: bool,
    /// Replay data the tool attached (kept in the log, not shown to the model).
    pub meta: Option<serde_json::Value>,
}

/// Hooks into a turn, called in this order:
///
/// `on_prompt_submit` once, then for each request `pending_history_appends`,
/// `pre_llm_request`, and for each tool call of the response `pre_tool_call`
/// and (after it ran) `post_tool_call`; `on_turn_end` when a response has no
/// tool calls; `on_abort` when the turn is aborted or cancelled.
///
/// Every method has a do-nothing default.
#[async_trait::async_trait]
pub trait Interceptor: Send {
    /// A prompt was submitted; may edit it, cancel the turn or add items.
    async fn on_prompt_submit(&mut self, _prompt: &mut Item) -> PromptAction {
        PromptAction::Continue
    }

    /// Items to commit to history right before the next request.
    async fn pending_history_appends(&mut self) -> Vec<Item> {
        Vec::new()
    }

    /// May edit this request's copy of the history; edits never reach history.
    async fn pre_llm_request(&mut self, _request: &mut Vec<Item>) -> PreRequestAction {
        PreRequestAction::Continue
    }

    /// A tool call is about to run.
    async fn pre_tool_call(&mut self, _call: &mut ToolCallInfo) -> PreToolAction {
        PreToolAction::Continue
    }

    /// A tool call ran; its result is not committed yet.
    async fn post_tool_call(&mut self, _result: &mut ToolResultInfo) -> PostToolAction {
        PostToolAction::Continue
    }

    /// The model answered without tool calls; `turn` is what this turn committed.
    async fn on_turn_end(&mut self, _turn: &[Item]) -> TurnEndAction {
        TurnEndAction::Finish
    }

    /// The turn is being aborted or cancelled; history is already valid.
    async fn on_abort(&mut self, _reason: &AbortReason) {}
}

/// An interceptor that changes nothing.
#[derive(Debug, Default)]
pub struct NoopInterceptor;

impl Interceptor for NoopInterceptor {}
