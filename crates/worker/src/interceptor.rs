//! The hooks through which upper layers steer a turn.

use crate::budget::Limit;
use pod_llm::Item;
use std::sync::Arc;
use tokio_util::sync::CancellationToken;

/// A run begins: a prompt (or a bare continue) and every continuation of
/// it. Given to [`Interceptor::on_run_start`].
#[derive(Debug, Clone, Copy)]
pub struct RunStart<'a> {
    /// The history before the run (the prompt is not in it yet).
    pub history: &'a [Item],
    /// The run's prompt; `None` when the model goes on from the history.
    pub prompt: Option<&'a Item>,
    /// Cancelled when the run is cancelled, for hooks that wait on someone
    /// (an approval question) and must give up with the run.
    pub cancel: &'a CancellationToken,
}

/// Why `pre_llm_request` yields the turn to its caller.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum YieldReason {
    /// The context is too large: the caller compacts the history, then
    /// continues the run.
    Compact,
}

/// How a compaction asked for by [`PreRequestAction::Yield`] with
/// [`YieldReason::Compact`] went; given to [`Interceptor::on_compaction`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CompactionOutcome {
    /// The history was compacted; estimated context tokens before and
    /// after.
    Compacted {
        /// Before.
        tokens_before: u64,
        /// After.
        tokens_after: u64,
    },
    /// Nothing could be summarised (everything is in the kept tail): the
    /// request goes out as it is.
    NothingToCompact,
    /// The compaction failed (the compact model, say); the history is
    /// unchanged and the request goes out as it is.
    Failed(String),
    /// The run was cancelled during it.
    Cancelled,
}

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
    /// End the turn without sending it, to be continued by the caller after
    /// it did what the reason asks; it ends as
    /// [`TurnEndReason::Yielded`](crate::TurnEndReason::Yielded).
    Yield(YieldReason),
    /// End the run without sending it because a budget is spent; it ends as
    /// [`TurnEndReason::Limit`](crate::TurnEndReason::Limit). History is
    /// valid; a later run may go on.
    Stop(Limit),
}

/// What to do before one tool call.
#[derive(Debug, Clone, PartialEq)]
pub enum PreToolAction {
    /// Run the call (with any edits made to the [`ToolCallInfo`]).
    Continue,
    /// Do not run it; the model gets an error result with exactly this text,
    /// so it should say that the call did not run, why, and what to do.
    Skip(String),
    /// Do not run it here: this is its result, made elsewhere (a client
    /// that runs the tool itself answered with it).
    Respond(crate::ToolOutput),
    /// Do not run it or any later call; end the turn as aborted.
    Abort(String),
    /// Do not run it or any later call; end the turn as paused.
    Pause(String),
    /// Do not run it or any later call, and give none of them a result:
    /// the turn ends as [`Parked`](crate::TurnEndReason::Parked) with
    /// these calls open, and they run when the session is continued (the
    /// call waits for something outside the turn, such as a person's
    /// answer). Calls before it in its batch still run.
    Park(String),
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
    /// End the turn as [`Stalled`](crate::TurnEndReason::Stalled): it
    /// makes no progress toward its goal.
    Stall,
    /// End the turn as [`GoalUnmet`](crate::TurnEndReason::GoalUnmet):
    /// what decides that its goal is met (the operator's checks) kept
    /// saying no, and asking again is not worth it. The text says what.
    GiveUp(String),
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

/// Hooks into a run, called in this order:
///
/// `on_run_start` once per run, then `on_prompt_submit` if there is a
/// prompt, then for each request `pending_history_appends`,
/// `pre_llm_request` (and `on_compaction` after a compaction it yielded
/// for, before the request is prepared again), and for each tool call of
/// the response `pre_tool_call` and (after it ran) `post_tool_call`;
/// `on_turn_end` when a response has no tool calls; `on_abort` when the
/// turn is aborted or cancelled. The order is decided by
/// [`Turn`](crate::Turn), the step machine.
///
/// Every method has a do-nothing default. Several interceptors compose in an
/// [`InterceptorStack`](crate::InterceptorStack).
#[async_trait::async_trait]
pub trait Interceptor: Send {
    /// A run begins; reset per-run state here.
    async fn on_run_start(&mut self, _run: &RunStart<'_>) {}

    /// A prompt was submitted; may edit it, cancel the turn or add items.
    async fn on_prompt_submit(&mut self, _prompt: &mut Item) -> PromptAction {
        PromptAction::Continue
    }

    /// Items to commit to history right before the next request; `history`
    /// is everything committed so far.
    async fn pending_history_appends(&mut self, _history: &[Item]) -> Vec<Item> {
        Vec::new()
    }

    /// May edit the history this request sends; edits never reach history.
    /// The request shares the history until an edit: `Arc::make_mut`
    /// gives this request its own copy to change.
    async fn pre_llm_request(&mut self, _request: &mut Arc<Vec<Item>>) -> PreRequestAction {
        PreRequestAction::Continue
    }

    /// A compaction this run yielded for is over: how it went.
    async fn on_compaction(&mut self, _outcome: &CompactionOutcome) {}

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
