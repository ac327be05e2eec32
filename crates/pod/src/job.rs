//! A Pod's job and its answer: the reply travels with the job into its task
//! and comes back with the result it belongs to, so finishing a job never
//! matches a reply against a result of another kind.

use crate::compact::{CompactionError, CompactionReport};
use crate::error::PodError;
use crate::turn::TurnParts;
use futures_util::FutureExt;
use pod_worker::{PersistKind, TurnOutcome, WorkerError};
use std::panic::AssertUnwindSafe;
use tokio::sync::oneshot;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;
use uuid::Uuid;

/// Where a job's answer goes.
pub(crate) type Reply<T> = oneshot::Sender<Result<T, PodError>>;

/// What a caller asked for, with where its answer goes.
pub(crate) enum Job {
    /// Run a turn, with a new prompt or continuing.
    Prompt {
        /// The prompt; `None` continues.
        text: Option<String>,
        /// The caller.
        reply: Reply<TurnOutcome>,
        /// The caller's span, the run's parent.
        caller: tracing::Span,
    },
    /// Compact now.
    Compact {
        /// The caller.
        reply: Reply<CompactionReport>,
    },
}

impl Job {
    /// Answers the caller with `error` without running.
    pub fn fail(self, error: PodError) {
        // A caller that went away needs no answer.
        match self {
            Job::Prompt { reply, .. } => drop(reply.send(Err(error))),
            Job::Compact { reply } => drop(reply.send(Err(error))),
        }
    }
}

/// Links a run's span to the session's trace, when traces are exported: a
/// run that continues the session (`continues`: no prompt, no caller) is
/// a child of the last run recorded, and the run's own context is
/// recorded for the next.
async fn trace(parts: &mut TurnParts, span: &tracing::Span, continues: bool) {
    let Some(context) = crate::trace::context() else {
        return;
    };
    if continues {
        if let Some(last) = &parts.trace {
            context.continue_from(span, last);
        }
    }
    let Some(traceparent) = context.traceparent(span) else {
        return;
    };
    // On the span itself too, so a JSON log line of the run names it.
    let mut ids = traceparent.split('-').skip(1);
    if let (Some(trace_id), Some(span_id)) = (ids.next(), ids.next()) {
        span.record("trace_id", trace_id);
        span.record("span_id", span_id);
    }
    let record = crate::log::TraceRecord {
        traceparent: traceparent.clone(),
        at: chrono::Utc::now(),
    };
    // Only a link for the reader of traces: a failure to record it loses
    // no work, so it is said and the run goes on.
    if let Err(err) = parts
        .compaction
        .log
        .append(&crate::log::LogRecord::Trace(record), false)
        .await
    {
        tracing::warn!(err = %pod_llm::error_chain(&err), "cannot record the run's trace context");
    }
    parts.trace = Some(traceparent);
}

/// What the log says of a turn that did not finish: failed, cancelled or
/// interrupted (by the person at the terminal), with what a cancel cut.
/// `None` for a turn that ended by its answer, a budget, a question or a
/// pause, and for a compaction.
pub(crate) fn ended(
    answer: &Answer,
    interrupted: bool,
    cut: Option<crate::observer::Cut>,
) -> Option<crate::log::EndedRecord> {
    use crate::log::EndedHow;
    use pod_worker::TurnEndReason;
    let Answer::Turn { result, .. } = answer else {
        return None;
    };
    let (how, reason) = match result {
        Ok(outcome) => match &outcome.reason {
            TurnEndReason::Cancelled if interrupted => (EndedHow::Interrupted, None),
            TurnEndReason::Cancelled => (EndedHow::Cancelled, None),
            // The person at the terminal left a question unanswered.
            TurnEndReason::Aborted(why) if interrupted => {
                (EndedHow::Interrupted, Some(why.clone()))
            }
            TurnEndReason::Aborted(why) => (EndedHow::Failed, Some(why.clone())),
            TurnEndReason::Refusal => (
                EndedHow::Failed,
                Some("the provider refused to answer".to_string()),
            ),
            TurnEndReason::MaxTokens => (
                EndedHow::Failed,
                Some("the answer was cut at the model's output token limit".to_string()),
            ),
            _ => return None,
        },
        Err(err) => (EndedHow::Failed, Some(pod_llm::error_chain(err))),
    };
    let cut = cut.unwrap_or_default();
    Some(crate::log::EndedRecord {
        how,
        reason,
        partial_answer: cut.partial_answer,
        calls_not_made: cut.calls_not_made,
        at: chrono::Utc::now(),
    })
}

/// A job's result with its reply.
pub(crate) enum Answer {
    /// A turn's.
    Turn {
        /// What the turn came to.
        result: Result<TurnOutcome, PodError>,
        /// The caller.
        reply: Reply<TurnOutcome>,
    },
    /// A compaction's.
    Compact {
        /// What the compaction came to.
        result: Result<CompactionReport, PodError>,
        /// The caller.
        reply: Reply<CompactionReport>,
    },
}

impl Answer {
    /// The job's error, if it failed.
    pub fn error(&self) -> Option<&PodError> {
        match self {
            Answer::Turn { result, .. } => result.as_ref().err(),
            Answer::Compact { result, .. } => result.as_ref().err(),
        }
    }

    /// Makes the job fail with `error` (its task crashed).
    pub fn fail_with(&mut self, error: PodError) {
        match self {
            Answer::Turn { result, .. } => *result = Err(error),
            Answer::Compact { result, .. } => *result = Err(error),
        }
    }
}

/// A job done: its answer, and the parts back unless it crashed (then the
/// Pod rebuilds them from its log).
pub(crate) struct Done {
    /// The parts, when the job did not panic.
    pub parts: Option<Box<TurnParts>>,
    /// The answer.
    pub answer: Answer,
}

/// Runs `job` on `parts` until it ends or `cancel` fires. A panic in the job
/// is caught: the answer is then a crash, and the parts (which the job left
/// in an unknown state) are dropped.
pub(crate) async fn run(mut parts: Box<TurnParts>, job: Job, cancel: CancellationToken) -> Done {
    fn crash(panic: Box<dyn std::any::Any + Send>) -> PodError {
        let message = panic
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| panic.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "a panic".into());
        PodError::Crashed(message)
    }
    let (answer, crashed) = match job {
        Job::Prompt {
            text,
            reply,
            caller,
        } => {
            // One span per run (a prompt, or a continue, and every request
            // and call of it), as the GenAI conventions name an agent's.
            let session = parts.compaction.log.session_id();
            let span = tracing::info_span!(
                parent: &caller,
                "invoke_agent",
                otel.name = "invoke_agent pod",
                gen_ai.operation.name = "invoke_agent",
                gen_ai.agent.name = "pod",
                gen_ai.conversation.id = %session,
                pod.session.id = %session,
                trace_id = tracing::field::Empty,
                span_id = tracing::field::Empty,
                pod.plan.completed = tracing::field::Empty,
                pod.plan.total = tracing::field::Empty,
                pod.run.end = tracing::field::Empty,
                pod.stop.reason = tracing::field::Empty,
                pod.stop.detail = tracing::field::Empty,
                pod.cost.run = tracing::field::Empty,
                pod.cost.session = tracing::field::Empty,
                pod.cost.session_max = tracing::field::Empty,
            );
            trace(&mut parts, &span, text.is_none() && caller.is_none()).await;
            let run = AssertUnwindSafe(parts.run_prompt(text, &cancel).instrument(span.clone()));
            let (result, crashed) = match run.catch_unwind().await {
                Ok(result) => (result, false),
                Err(panic) => (Err(crash(panic)), true),
            };
            // Where the plan stands when the run ends.
            let todos = parts.compaction.todos.snapshot();
            let done = todos
                .iter()
                .filter(|t| t.status == pod_tools::TodoStatus::Completed)
                .count();
            span.record("pod.plan.completed", done as i64);
            span.record("pod.plan.total", todos.len() as i64);
            record_governor(&span, &result, parts.compaction.cost.as_ref());
            (Answer::Turn { result, reply }, crashed)
        }
        Job::Compact { reply } => {
            // Boxed: a compaction's future is large and rare; inline, every
            // turn's task would reserve its size.
            let run = AssertUnwindSafe(Box::pin(parts.compact(&cancel)));
            let (result, crashed) = match run.catch_unwind().await {
                Ok(result) => (result, false),
                Err(panic) => (Err(crash(panic)), true),
            };
            (Answer::Compact { result, reply }, crashed)
        }
    };
    Done {
        parts: (!crashed).then_some(parts),
        answer,
    }
}

/// What the governor says of a run, on its span: how it ended, which limit
/// stopped it (`pod.stop.reason`: [`pod_worker::Limit::kind`], and its
/// stop line), and the money the run and the session have spent (with the
/// session's limit), when the session is priced.
fn record_governor(
    span: &tracing::Span,
    result: &Result<pod_worker::TurnOutcome, PodError>,
    cost: Option<&crate::interceptors::CostBudget>,
) {
    if let Ok(outcome) = result {
        use pod_worker::TurnEndReason as End;
        let end = match &outcome.reason {
            End::EndTurn => "end_turn",
            End::MaxTokens => "max_tokens",
            End::Refusal => "refusal",
            End::Limit(_) => "limit",
            End::Cancelled => "cancelled",
            End::Stalled => "stalled",
            End::GoalUnmet(_) => "unverified",
            End::Aborted(_) => "aborted",
            End::Paused(_) => "paused",
            End::Parked(_) => "parked",
            End::Yielded(_) => "yielded",
            End::Rejected(_) => "rejected",
        };
        span.record("pod.run.end", end);
        if let pod_worker::TurnEndReason::Limit(limit) = &outcome.reason {
            span.record("pod.stop.reason", limit.kind());
            span.record("pod.stop.detail", limit.stop_line().as_str());
        }
    }
    if let Some(cost) = cost {
        span.record("pod.cost.run", cost.meter.spent().amount());
        span.record("pod.cost.session", cost.session.spent().amount());
        if let Some(max) = cost.session_max {
            span.record("pod.cost.session_max", max.amount());
        }
    }
}

/// The lease a failed job found taken over, if that is why it failed: the
/// store fenced this Pod off, directly (a compaction's boundary, a stop
/// record) or through the observer (`fenced`: what it recorded when an
/// append of the turn was refused).
pub(crate) fn lease_lost(error: &PodError, fenced: Option<(Uuid, i64)>) -> Option<(Uuid, i64)> {
    match error {
        PodError::LeaseLost { id, epoch } => Some((*id, *epoch)),
        PodError::Compaction(CompactionError::Log(inner)) => lease_lost(inner, fenced),
        PodError::Turn(WorkerError::Persist(persist)) if persist.kind() == PersistKind::Fenced => {
            fenced
        }
        _ => None,
    }
}

/// Whether the log refused an item of the turn that the worker may hold in
/// memory, so memory must be made to match the log again.
pub(crate) fn persist_failed(error: &PodError) -> bool {
    matches!(
        error,
        PodError::Turn(WorkerError::Persist(persist)) if persist.kind() == PersistKind::Failed
    )
}
