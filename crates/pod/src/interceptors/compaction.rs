//! Automatic compaction: before a request whose context would pass the
//! threshold, yield with [`YieldReason::Compact`]; the run compacts and
//! prepares the request again. The failure count and back-off live here,
//! fed by how each compaction went (`on_compaction`): a failure, or nothing
//! to summarise, lets the request go out as it is; after
//! [`MAX_COMPACTION_FAILURES`] in a row, automatic compaction waits for the
//! next prompt, so a broken compact model cannot cause a retry storm. A
//! prompt that cannot fit the context window at all is refused before
//! anything is committed.

use async_trait::async_trait;
use pod_llm::tokens::estimate_item_tokens;
use pod_llm::{Item, ItemKind};
use pod_worker::{
    CompactionOutcome, Interceptor, PreRequestAction, PromptAction, RunStart, YieldReason,
};

/// Automatic compaction stops after this many failures in a row, until the
/// next prompt.
pub const MAX_COMPACTION_FAILURES: u32 = 3;

/// When to ask for a compaction.
#[derive(Debug, Clone, Copy)]
pub struct CompactionTrigger {
    /// The model's context window in tokens: a prompt larger than it (with
    /// the overhead) is refused, since no compaction can make it fit.
    pub window: u64,
    /// Compact when the estimated context exceeds this many tokens.
    pub limit: u64,
    /// Tokens of the system prompt and tool specs, sent with every request.
    pub overhead: u64,
}

/// Asks for compactions.
pub struct AutoCompact {
    trigger: CompactionTrigger,
    failures: u32,
    // The compaction just done did not help (it failed, or had nothing to
    // summarise): the request goes out as it is instead of yielding again.
    let_through: bool,
}

impl AutoCompact {
    /// Compaction on `trigger`.
    pub fn new(trigger: CompactionTrigger) -> Self {
        Self {
            trigger,
            failures: 0,
            let_through: false,
        }
    }
}

#[async_trait]
impl Interceptor for AutoCompact {
    async fn on_run_start(&mut self, run: &RunStart<'_>) {
        self.let_through = false;
        if run.prompt.is_some() {
            self.failures = 0;
        }
    }

    async fn on_prompt_submit(&mut self, prompt: &mut Item) -> PromptAction {
        let tokens = self.trigger.overhead + estimate_item_tokens(prompt);
        if tokens > self.trigger.window {
            return PromptAction::Cancel(format!(
                "the prompt is about {tokens} tokens with the system prompt and tool \
                 descriptions, more than the model's context window of {} tokens",
                self.trigger.window
            ));
        }
        PromptAction::Continue
    }

    async fn pre_llm_request(
        &mut self,
        request: &mut std::sync::Arc<Vec<Item>>,
    ) -> PreRequestAction {
        if std::mem::take(&mut self.let_through) {
            return PreRequestAction::Continue;
        }
        let over = context_estimate(request, self.trigger.overhead) > self.trigger.limit;
        if over && self.failures < MAX_COMPACTION_FAILURES {
            return PreRequestAction::Yield(YieldReason::Compact);
        }
        PreRequestAction::Continue
    }

    async fn on_compaction(&mut self, outcome: &CompactionOutcome) {
        match outcome {
            // Compacted below the threshold: it worked.
            CompactionOutcome::Compacted { tokens_after, .. }
                if *tokens_after <= self.trigger.limit =>
            {
                self.failures = 0
            }
            // Compacted and still over (a long kept tail, a long summary),
            // failed, or nothing to summarise: the request goes out as it
            // is, and it counts against the back-off, so compactions that
            // do not help cannot repeat without end.
            CompactionOutcome::Compacted { .. }
            | CompactionOutcome::NothingToCompact
            | CompactionOutcome::Failed(_) => {
                self.let_through = true;
                self.failures += 1;
                if self.failures == MAX_COMPACTION_FAILURES {
                    tracing::warn!(
                        "automatic compaction is paused until the next prompt after \
                         {MAX_COMPACTION_FAILURES} failures in a row"
                    );
                }
            }
            CompactionOutcome::Cancelled => {}
        }
    }
}

/// Estimated prompt tokens of a request: the provider's count for the last
/// response that reported one, plus an estimate of everything after it.
pub fn context_estimate(request: &[Item], overhead: u64) -> u64 {
    for (index, item) in request.iter().enumerate().rev() {
        if let ItemKind::Assistant {
            usage: Some(usage), ..
        } = &item.kind
        {
            return usage.prompt_tokens
                + usage.completion_tokens
                + request[index + 1..]
                    .iter()
                    .map(estimate_item_tokens)
                    .sum::<u64>();
        }
    }
    overhead + request.iter().map(estimate_item_tokens).sum::<u64>()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn trigger() -> CompactionTrigger {
        CompactionTrigger {
            window: 1_000,
            limit: 100,
            overhead: 0,
        }
    }

    fn big() -> Vec<Item> {
        vec![Item::user("x".repeat(800))]
    }

    fn small() -> Vec<Item> {
        vec![Item::user("short")]
    }

    async fn start(compact: &mut AutoCompact, prompt: bool) {
        let cancel = tokio_util::sync::CancellationToken::new();
        let item = Item::user("p");
        compact
            .on_run_start(&RunStart {
                history: &[],
                prompt: prompt.then_some(&item),
                cancel: &cancel,
            })
            .await;
    }

    async fn ask(compact: &mut AutoCompact, items: Vec<Item>) -> PreRequestAction {
        compact
            .pre_llm_request(&mut std::sync::Arc::new(items))
            .await
    }

    fn failed() -> CompactionOutcome {
        CompactionOutcome::Failed("the compact model is down".into())
    }

    #[tokio::test]
    async fn yields_past_the_threshold_and_hears_how_the_compaction_went() {
        let mut compact = AutoCompact::new(trigger());
        start(&mut compact, true).await;
        assert_eq!(ask(&mut compact, small()).await, PreRequestAction::Continue);
        assert_eq!(
            ask(&mut compact, big()).await,
            PreRequestAction::Yield(YieldReason::Compact)
        );
        compact
            .on_compaction(&CompactionOutcome::Compacted {
                tokens_before: 900,
                tokens_after: 50,
            })
            .await;
        assert_eq!(compact.failures, 0);
        // Compacted but still over the threshold: it did not help.
        assert_eq!(
            ask(&mut compact, big()).await,
            PreRequestAction::Yield(YieldReason::Compact)
        );
        compact
            .on_compaction(&CompactionOutcome::Compacted {
                tokens_before: 900,
                tokens_after: 400,
            })
            .await;
        assert_eq!(compact.failures, 1);
        assert_eq!(ask(&mut compact, big()).await, PreRequestAction::Continue);
        compact
            .on_compaction(&CompactionOutcome::Compacted {
                tokens_before: 900,
                tokens_after: 50,
            })
            .await;
        assert_eq!(compact.failures, 0);
        assert_eq!(ask(&mut compact, small()).await, PreRequestAction::Continue);
        // A failure lets the request go out as it is, once.
        assert_eq!(
            ask(&mut compact, big()).await,
            PreRequestAction::Yield(YieldReason::Compact)
        );
        compact.on_compaction(&failed()).await;
        assert_eq!(compact.failures, 1);
        assert_eq!(ask(&mut compact, big()).await, PreRequestAction::Continue);
        assert_eq!(
            ask(&mut compact, big()).await,
            PreRequestAction::Yield(YieldReason::Compact)
        );
    }

    #[tokio::test]
    async fn backs_off_after_repeated_failures_until_the_next_prompt() {
        let mut compact = AutoCompact::new(trigger());
        start(&mut compact, true).await;
        for outcome in [failed(), CompactionOutcome::NothingToCompact, failed()] {
            assert_eq!(
                ask(&mut compact, big()).await,
                PreRequestAction::Yield(YieldReason::Compact)
            );
            compact.on_compaction(&outcome).await;
            assert_eq!(ask(&mut compact, big()).await, PreRequestAction::Continue);
        }
        assert_eq!(compact.failures, MAX_COMPACTION_FAILURES);
        assert_eq!(
            ask(&mut compact, big()).await,
            PreRequestAction::Continue,
            "paused"
        );
        // A continue does not re-enable it; a prompt does.
        start(&mut compact, false).await;
        assert_eq!(ask(&mut compact, big()).await, PreRequestAction::Continue);
        start(&mut compact, true).await;
        assert_eq!(
            ask(&mut compact, big()).await,
            PreRequestAction::Yield(YieldReason::Compact)
        );
    }

    #[tokio::test]
    async fn a_prompt_past_the_window_is_refused() {
        let mut compact = AutoCompact::new(trigger());
        let mut huge = Item::user("x".repeat(8_000));
        assert!(matches!(
            compact.on_prompt_submit(&mut huge).await,
            PromptAction::Cancel(why) if why.contains("context window of 1000 tokens")
        ));
        let mut fits = Item::user("x".repeat(800));
        assert_eq!(
            compact.on_prompt_submit(&mut fits).await,
            PromptAction::Continue
        );
    }
}
