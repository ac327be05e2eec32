//! Verification in the stack: a layer around the Pod's other interceptors
//! that runs a round only when they would all let the turn end.
//!
//! Order matters: wrapped, the gate sees the stack's combined answer. Were
//! it one more layer, a `Stop` hook that blocks the end (the turn goes on)
//! and a passing round (the turn is verified) would both happen at the
//! same turn end, and the round would call a turn verified that then went
//! on changing files.

use super::round::final_answer;
use super::{Round, Verifier};
use async_trait::async_trait;
use pod_llm::{Item, SystemKind};
use pod_worker::{
    AbortReason, CompactionOutcome, Interceptor, InterceptorStack, PostToolAction,
    PreRequestAction, PreToolAction, PromptAction, RunStart, ToolCallInfo, ToolResultInfo,
    TurnEndAction,
};
use std::sync::Arc;
use tokio_util::sync::CancellationToken;

/// The Pod's interceptors, with verification at the end of each turn.
pub struct VerifyGate {
    inner: InterceptorStack,
    verifier: Arc<Verifier>,
    // The run's: a round is cancelled with the run.
    cancel: CancellationToken,
}

impl VerifyGate {
    /// `inner`, verified by `verifier`.
    pub(crate) fn new(inner: InterceptorStack, verifier: Arc<Verifier>) -> Self {
        Self {
            inner,
            verifier,
            cancel: CancellationToken::new(),
        }
    }
}

#[async_trait]
impl Interceptor for VerifyGate {
    async fn on_run_start(&mut self, run: &RunStart<'_>) {
        self.cancel = run.cancel.clone();
        self.verifier.run_started(run.prompt, run.history);
        self.inner.on_run_start(run).await;
    }

    async fn on_prompt_submit(&mut self, prompt: &mut Item) -> PromptAction {
        self.inner.on_prompt_submit(prompt).await
    }

    async fn pending_history_appends(&mut self, history: &[Item]) -> Vec<Item> {
        let mut items = self.inner.pending_history_appends(history).await;
        if let Some(reminder) = self.verifier.take_pending() {
            items.push(Item::system(SystemKind::Verification, reminder));
        }
        items
    }

    async fn pre_llm_request(&mut self, request: &mut Arc<Vec<Item>>) -> PreRequestAction {
        self.inner.pre_llm_request(request).await
    }

    async fn on_compaction(&mut self, outcome: &CompactionOutcome) {
        self.inner.on_compaction(outcome).await;
    }

    async fn pre_tool_call(&mut self, call: &mut ToolCallInfo) -> PreToolAction {
        self.inner.pre_tool_call(call).await
    }

    async fn post_tool_call(&mut self, result: &mut ToolResultInfo) -> PostToolAction {
        self.inner.post_tool_call(result).await
    }

    async fn on_turn_end(&mut self, turn: &[Item]) -> TurnEndAction {
        let action = self.inner.on_turn_end(turn).await;
        // The plan unfinished and nobody continuing: the run ends with work
        // left, not done, and there is nothing to verify.
        if action != TurnEndAction::Finish || !self.verifier.plan_complete() {
            return action;
        }
        let Some(answer) = final_answer(turn) else {
            return action;
        };
        verdict(self.verifier.round(answer, &self.cancel).await)
    }

    async fn on_abort(&mut self, reason: &AbortReason) {
        self.inner.on_abort(reason).await;
    }
}

/// What the turn does after a round.
pub(crate) fn verdict(round: Result<Round, crate::error::PodError>) -> TurnEndAction {
    match round {
        Ok(Round::Passed) => TurnEndAction::Finish,
        Ok(Round::Failed { reminder }) => TurnEndAction::ContinueWithMessages(vec![Item::system(
            SystemKind::Verification,
            reminder,
        )]),
        Ok(Round::GaveUp { why }) => TurnEndAction::GiveUp(why),
        // Cancelled mid-check, or the round could not be recorded: the turn
        // ends without a verdict, and a continuation runs the round again.
        Ok(Round::Cancelled) => TurnEndAction::Pause,
        Err(err) => {
            tracing::warn!(err = %pod_llm::error_chain(&err), "cannot record a verification round");
            TurnEndAction::Pause
        }
    }
}
