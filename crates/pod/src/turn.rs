//! One job of the Pod, run in its own task with the parts it needs: a prompt
//! (a turn, continued through any compactions it asks for) or a manual
//! compaction.

use crate::compact::{CompactionConfig, CompactionError, CompactionReport, Compactor};
use crate::error::PodError;
use crate::events::{EventBus, PodEvent};

use crate::log::{LogRecord, StoppedRecord};
use crate::observer::PodObserver;
use crate::store::LogWriter;
use crate::subagents::Subagents;
use pod_llm::{Item, Provider};
use pod_tools::{FileTracker, TodoStore};
use pod_worker::{
    BudgetMeter, Interceptor, InterceptorStack, Limit, RunStart, TurnEndReason, TurnOutcome,
    Worker, YieldReason,
};
use std::sync::Arc;
use tokio_util::sync::CancellationToken;

/// What a job is.
pub(crate) enum Job {
    /// Run a turn, with a new prompt or continuing.
    Prompt(Option<String>),
    /// Compact now.
    Compact,
}

/// How a job ended.
pub(crate) enum JobResult {
    Turn(Result<TurnOutcome, PodError>),
    Compact(Result<CompactionReport, PodError>),
}

/// Everything a job needs, moved into its task and back.
pub(crate) struct TurnParts {
    pub worker: Worker,
    pub interceptor: InterceptorStack,
    pub observer: PodObserver,
    pub compaction: CompactionSetup,
    /// The `task` tool's children, counted per run.
    pub subagents: Option<Subagents>,
}

/// What compaction needs besides the worker.
pub(crate) struct CompactionSetup {
    pub provider: Arc<dyn Provider>,
    pub config: CompactionConfig,
    pub todos: TodoStore,
    /// The workspace tools' tracker, when they are registered.
    pub files: Option<FileTracker>,
    pub log: LogWriter,
    pub events: EventBus,
}

impl TurnParts {
    pub async fn run(&mut self, job: Job, cancel: &CancellationToken) -> JobResult {
        match job {
            Job::Prompt(text) => JobResult::Turn(self.run_prompt(text, cancel).await),
            Job::Compact => JobResult::Compact(self.compact(cancel).await),
        }
    }

    async fn run_prompt(
        &mut self,
        text: Option<String>,
        cancel: &CancellationToken,
    ) -> Result<TurnOutcome, PodError> {
        let mut prompt = text.map(Item::user);
        if let Some(subagents) = &self.subagents {
            subagents.begin_run();
        }
        self.interceptor
            .on_run_start(&RunStart {
                history: self.worker.history(),
                prompt: prompt.as_ref(),
                cancel,
            })
            .await;
        let mut total = TurnOutcome {
            reason: TurnEndReason::EndTurn,
            requests: 0,
            usage: Default::default(),
        };
        // One budget for the whole run, however many compactions split it.
        let mut meter = BudgetMeter::new(self.worker.config().budget.clone());
        loop {
            let outcome = self
                .worker
                .run_turn_within(
                    prompt.take(),
                    &mut meter,
                    &mut self.interceptor,
                    &mut self.observer,
                    cancel,
                )
                .await?;
            total.requests += outcome.requests;
            total.usage += outcome.usage;
            total.reason = outcome.reason.clone();
            if let TurnEndReason::Limit(limit) = &outcome.reason {
                record_stop(&self.compaction.log, limit.clone(), &meter).await?;
            }
            if outcome.reason != TurnEndReason::Yielded(YieldReason::Compact) {
                return Ok(total);
            }
            // The turn yielded before a request because the context is full:
            // compact, then go on with the same turn. A failure is reported
            // and the turn goes on uncompacted.
            let _ = self.compact(cancel).await;
            if cancel.is_cancelled() {
                total.reason = TurnEndReason::Cancelled;
                return Ok(total);
            }
        }
    }

    async fn compact(&mut self, cancel: &CancellationToken) -> Result<CompactionReport, PodError> {
        let setup = &self.compaction;
        let compactor = Compactor {
            provider: setup.provider.clone(),
            config: &setup.config,
            todos: &setup.todos,
            files: setup.files.as_ref(),
            log: &setup.log,
            events: &setup.events,
        };
        match compactor.run(&mut self.worker, cancel).await {
            Ok(report) => {
                tracing::info!(
                    tokens_before = report.tokens_before,
                    tokens_after = report.tokens_after,
                    "compacted"
                );
                setup.events.send(PodEvent::Compacted {
                    tokens_before: report.tokens_before,
                    tokens_after: report.tokens_after,
                    summary_chars: report.summary_chars,
                });
                Ok(report)
            }
            Err(CompactionError::NothingToCompact) => {
                // Everything is in the kept tail (an unanswered prompt is
                // never summarised): the request goes out as it is.
                tracing::debug!("nothing to compact before this request");
                Err(PodError::Compaction(CompactionError::NothingToCompact))
            }
            Err(_) if cancel.is_cancelled() => {
                // Cancelled by the user: not a failure of the compact model.
                Err(PodError::Compaction(CompactionError::Cancelled))
            }
            Err(err) => {
                // The compaction interceptor learns of it from the next
                // request, whose context is still too large.
                let reason = pod_llm::error_chain(&err);
                tracing::warn!(%reason, "compaction failed");
                setup.events.send(PodEvent::CompactionFailed {
                    reason: reason.clone(),
                });
                Err(PodError::Compaction(err))
            }
        }
    }
}

/// Logs that a budget limit stopped the run, so `pod sessions` can say so
/// after the process is gone.
async fn record_stop(log: &LogWriter, limit: Limit, meter: &BudgetMeter) -> Result<(), PodError> {
    let record = LogRecord::Stopped(StoppedRecord {
        limit,
        requests: meter.requests(),
        tokens: meter.tokens(),
        at: chrono::Utc::now(),
    });
    log.append(&record, true).await
}
