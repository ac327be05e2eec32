//! How a turn ended: a leaf, shared by the step machine and its driver.

use crate::budget::Limit;
use crate::interceptor::YieldReason;
use pod_llm::Usage;

/// How a turn ended.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(tag = "kind", content = "detail", rename_all = "snake_case")]
pub enum TurnEndReason {
    /// The model answered without tool calls.
    EndTurn,
    /// The model's answer was cut by its output token limit.
    MaxTokens,
    /// The provider refused or filtered the answer.
    Refusal,
    /// A [`Limit`] of the run's [`Budget`] stopped it; every tool call has its
    /// result, and continuing (with a fresh budget) is safe.
    Limit(Limit),
    /// Cancelled from outside.
    Cancelled,
    /// An interceptor judged that the turn stopped making progress toward
    /// its goal (until-done: a continuation answered without any tool call
    /// while the plan is unfinished); continuing as it is would loop.
    Stalled,
    /// An interceptor judged that the run's goal is not met and stopped
    /// trying (the operator's checks failed round after round); what, in
    /// words. Every tool call has its result; a later run may go on.
    GoalUnmet(String),
    /// An interceptor aborted it.
    Aborted(String),
    /// An interceptor paused it; it can be continued with a new turn.
    Paused(String),
    /// An interceptor parked it at a tool call that waits for something
    /// outside the turn (a person's answer): that call and the later ones of
    /// the answer have no result yet, and a continued run runs them first.
    Parked(String),
    /// `pre_llm_request` yielded before a request, for the caller to do what
    /// the reason asks and continue the run (a run with a [`Compaction`](crate::Compaction)
    /// compacts by itself and never ends so).
    Yielded(YieldReason),
    /// `on_prompt_submit` refused the prompt; nothing was committed.
    Rejected(String),
}

/// How a turn ended, in words for people (a worker's log line, an end
/// line); not a label to match on.
impl std::fmt::Display for TurnEndReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            TurnEndReason::EndTurn => f.write_str("the model finished"),
            TurnEndReason::MaxTokens => f.write_str("the answer hit the output token limit"),
            TurnEndReason::Refusal => f.write_str("the provider refused the answer"),
            TurnEndReason::Limit(limit) => f.write_str(&limit.stop_line()),
            TurnEndReason::Cancelled => f.write_str("cancelled"),
            TurnEndReason::Stalled => f.write_str("no progress on the unfinished plan"),
            TurnEndReason::GoalUnmet(why) => write!(f, "unverified: {why}"),
            TurnEndReason::Aborted(why) => write!(f, "aborted: {why}"),
            TurnEndReason::Paused(why) => write!(f, "paused: {why}"),
            TurnEndReason::Parked(why) => f.write_str(why),
            TurnEndReason::Yielded(why) => write!(f, "yielded ({why:?})"),
            TurnEndReason::Rejected(why) => write!(f, "the prompt was refused: {why}"),
        }
    }
}

/// The result of one turn.
#[derive(Debug, Clone, PartialEq)]
pub struct TurnOutcome {
    /// How it ended.
    pub reason: TurnEndReason,
    /// Model requests made.
    pub requests: u32,
    /// Tokens summed over the turn's requests.
    pub usage: Usage,
}
