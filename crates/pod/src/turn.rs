//! What a Pod's job runs with, moved into its task and back ([`TurnParts`]):
//! a prompt's turn (which compacts within the run when its context is full)
//! or a compaction a caller asked for.

use crate::compact::{CompactionConfig, CompactionError, CompactionReport, Compactor};
use crate::error::PodError;
use crate::events::{EventBus, PodEvent};
use crate::hooks::HookRunner;
use tracing::Instrument;

use crate::log::{LogRecord, StoppedRecord};
use crate::observer::PodObserver;
use crate::store::LogWriter;
use crate::subagents::Subagents;
use pod_llm::{Item, Provider};
use pod_tools::{FileTracker, TodoStore};
use pod_worker::{
    Compaction, CompactionOutcome, InterceptorStack, Limit, TurnEndAction, TurnEndReason,
    TurnOutcome, Worker,
};
use std::sync::Arc;
use tokio_util::sync::CancellationToken;

/// Everything a job needs, moved into its task and back.
pub(crate) struct TurnParts {
    pub worker: Worker,
    pub interceptor: InterceptorStack,
    pub observer: PodObserver,
    pub compaction: CompactionSetup,
    /// The `task` tool's children, counted per run.
    pub subagents: Option<Subagents>,
    /// The last run's span context (W3C `traceparent`), when traces are
    /// exported: a run that continues the session carries on its trace.
    pub trace: Option<String>,
    /// What verifies the session's runs, when the operator named checks.
    pub verifier: Option<Arc<crate::verify::Verifier>>,
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
    /// The operator's hooks (`PreCompact`), if any.
    pub hooks: Option<HookRunner>,
    /// The session's money meters: a summary costs too.
    pub cost: Option<crate::interceptors::CostBudget>,
}

impl TurnParts {
    /// Runs a prompt's turn (or a continue).
    pub(crate) async fn run_prompt(
        &mut self,
        text: Option<String>,
        cancel: &CancellationToken,
    ) -> Result<TurnOutcome, PodError> {
        if let Some(subagents) = &self.subagents {
            subagents.begin_run();
        }
        // A continuation first finishes what a crash cut: the round of an
        // answer never verified, or the reminder of one never told.
        if text.is_none() {
            // Boxed: a grader's round is a large future that few runs
            // await; inline, every turn waiting on its model would carry
            // its space (about 3 KB of a 3.4 KB task).
            if let Some(done) = Box::pin(self.resume_verification(cancel)).await? {
                return Ok(done);
            }
        }
        // A yield to compact is done within the run: the compaction's
        // outcome goes back to the turn and to the interceptors, and the run
        // keeps its one budget.
        let mut compaction = RunCompaction {
            setup: &self.compaction,
        };
        let outcome = self
            .worker
            .run(
                text.map(Item::user),
                &mut self.interceptor,
                &mut self.observer,
                Some(&mut compaction),
                cancel,
            )
            .await?;
        if let TurnEndReason::Limit(limit) = &outcome.reason {
            record_stop(&self.compaction.log, limit.clone(), &outcome).await?;
        }
        Ok(outcome)
    }

    /// What a continuation of a session whose last answer waits for its
    /// verification does first; `Some` when that ended the run.
    async fn resume_verification(
        &mut self,
        cancel: &CancellationToken,
    ) -> Result<Option<TurnOutcome>, PodError> {
        let Some(verifier) = self.verifier.clone() else {
            return Ok(None);
        };
        match verifier.take_resume() {
            crate::verify::Resume::Nothing => Ok(None),
            crate::verify::Resume::Remind(reminder) => {
                verifier.remind(reminder);
                Ok(None)
            }
            crate::verify::Resume::Check { answer } => {
                verifier.run_started(None, self.worker.history());
                let ended = |reason| TurnOutcome {
                    reason,
                    requests: 0,
                    usage: Default::default(),
                };
                match crate::verify::gate::verdict(verifier.round(answer, cancel).await) {
                    TurnEndAction::Finish => Ok(Some(ended(TurnEndReason::EndTurn))),
                    TurnEndAction::GiveUp(why) => Ok(Some(ended(TurnEndReason::GoalUnmet(why)))),
                    TurnEndAction::ContinueWithMessages(items) => {
                        for item in items {
                            if let pod_llm::ItemKind::System { text, .. } = item.kind {
                                verifier.remind(text);
                            }
                        }
                        Ok(None)
                    }
                    TurnEndAction::Pause | TurnEndAction::Stall => Ok(Some(ended(
                        TurnEndReason::Paused("verification did not finish".into()),
                    ))),
                }
            }
        }
    }

    /// Compacts now (a compaction a caller asked for).
    pub(crate) async fn compact(
        &mut self,
        cancel: &CancellationToken,
    ) -> Result<CompactionReport, PodError> {
        compact(&self.compaction, &mut self.worker, cancel, "manual").await
    }
}

/// The Pod's compaction, for a run to call when its context is full.
struct RunCompaction<'a> {
    setup: &'a CompactionSetup,
}

#[async_trait::async_trait]
impl Compaction for RunCompaction<'_> {
    async fn compact(
        &mut self,
        worker: &mut Worker,
        cancel: &CancellationToken,
    ) -> CompactionOutcome {
        match compact(self.setup, worker, cancel, "auto").await {
            Ok(report) => CompactionOutcome::Compacted {
                tokens_before: report.tokens_before,
                tokens_after: report.tokens_after,
            },
            Err(PodError::Compaction(CompactionError::NothingToCompact)) => {
                CompactionOutcome::NothingToCompact
            }
            Err(PodError::Compaction(CompactionError::Cancelled)) => CompactionOutcome::Cancelled,
            Err(err) => CompactionOutcome::Failed(pod_llm::error_chain(&err)),
        }
    }
}

/// Compacts `worker`'s history now: the summary and carried-over state
/// are logged and the worker continues from them.
async fn compact(
    setup: &CompactionSetup,
    worker: &mut Worker,
    cancel: &CancellationToken,
    trigger: &str,
) -> Result<CompactionReport, PodError> {
    if let Some(hooks) = &setup.hooks {
        hooks.pre_compact(trigger).await;
    }
    let compactor = Compactor {
        provider: setup.provider.clone(),
        config: &setup.config,
        todos: &setup.todos,
        files: setup.files.as_ref(),
        log: &setup.log,
        events: &setup.events,
        cost: setup.cost.as_ref(),
    };
    let span = tracing::info_span!("compact", pod.compaction.trigger = %trigger);
    match compactor.run(worker, cancel).instrument(span).await {
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
            // The run's interceptors are told (`on_compaction`).
            let reason = pod_llm::error_chain(&err);
            tracing::warn!(%reason, "compaction failed");
            setup.events.send(PodEvent::CompactionFailed {
                reason: reason.clone(),
            });
            Err(PodError::Compaction(err))
        }
    }
}

/// Logs that a budget limit stopped the run, so `pod sessions` can say so
/// after the process is gone.
async fn record_stop(log: &LogWriter, limit: Limit, run: &TurnOutcome) -> Result<(), PodError> {
    let record = LogRecord::Stopped(StoppedRecord {
        limit,
        requests: u64::from(run.requests),
        tokens: run.usage.prompt_tokens + run.usage.completion_tokens,
        at: chrono::Utc::now(),
    });
    log.append(&record, true).await
}
