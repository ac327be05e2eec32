//! Running one response's tool calls: hooks, batching, results in call order.

use crate::budget::BudgetMeter;
use crate::error::WorkerError;
use crate::interceptor::{
    Interceptor, PostToolAction, PreToolAction, ToolCallInfo, ToolResultInfo,
};
use crate::observer::{TurnObserver, WorkerEvent};
use crate::step::CallsStop;
use crate::tool::{ToolContext, ToolOutput, ToolRegistry};
use crate::worker::Worker;
use futures_util::future::join_all;
use futures_util::FutureExt;
use pod_llm::{Item, ItemKind, ToolCall};
use std::panic::AssertUnwindSafe;
use std::time::Duration;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

/// A call after `pre_tool_call`: it runs, its result is known, or it is
/// left open (parked: no result until the session is continued).
enum Planned {
    Run(ToolCallInfo),
    Done(ToolOutput),
    Open,
}

impl CallsStop {
    /// The call a stopped turn does not run: its result, or none when the
    /// turn is parked (the call stays open).
    fn not_run(&self) -> Planned {
        if let CallsStop::Parked(_) = self {
            return Planned::Open;
        }
        Planned::Done(ToolOutput::error(match self {
            CallsStop::Aborted(reason) => {
                format!("Not run: the turn was aborted before this call ({reason}).")
            }
            CallsStop::Paused(reason) => {
                format!("Not run: the turn was paused before this call ({reason}).")
            }
            CallsStop::Cancelled => {
                "Not run: the turn was cancelled before this call started.".to_string()
            }
            CallsStop::Limit(limit) => format!("Not run: the run was {}.", limit.stop_line()),
            CallsStop::Parked(_) => String::new(),
        }))
    }
}

/// Splits calls into batches that run together: a run of consecutive
/// concurrency-safe calls, or one call alone.
fn batches(calls: Vec<ToolCall>, tools: &ToolRegistry) -> Vec<Vec<ToolCall>> {
    let mut out: Vec<Vec<ToolCall>> = Vec::new();
    let mut last_safe = false;
    for call in calls {
        let safe = tools.get(&call.name).is_some_and(|t| t.concurrency_safe());
        match out.last_mut() {
            Some(batch) if safe && last_safe => batch.push(call),
            _ => out.push(vec![call]),
        }
        last_safe = safe;
    }
    out
}

impl Worker {
    /// Runs the calls of one response. Every call gets exactly one committed
    /// result, in call order. Returns why the turn must stop, if it must.
    pub(crate) async fn run_tool_calls(
        &mut self,
        calls: Vec<ToolCall>,
        hooks: &mut dyn Interceptor,
        observer: &mut dyn TurnObserver,
        meter: &mut BudgetMeter,
        cancel: &CancellationToken,
    ) -> Result<Option<CallsStop>, WorkerError> {
        let mut stop: Option<CallsStop> = None;
        for batch in batches(calls, self.tools()) {
            if stop.is_none() && cancel.is_cancelled() {
                stop = Some(CallsStop::Cancelled);
            }
            let mut planned = Vec::with_capacity(batch.len());
            for call in &batch {
                planned.push(match &stop {
                    Some(stop) => stop.not_run(),
                    None => plan_call(call, hooks, &mut stop).await,
                });
            }
            let outputs = self.execute_batch(&batch, &planned, observer, cancel).await;
            for ((call, plan), output) in batch.into_iter().zip(planned).zip(outputs) {
                if let Planned::Open = plan {
                    // Parked: no result until the session is continued.
                    continue;
                }
                let mut result = ToolResultInfo {
                    call_id: call.id.clone(),
                    name: call.name.clone(),
                    arguments: call.arguments.clone(),
                    content: output.content,
                    is_error: output.is_error,
                    meta: output.meta,
                };
                if let Planned::Run(info) = plan {
                    result.arguments = info.arguments;
                    if let PostToolAction::Abort(reason) = hooks.post_tool_call(&mut result).await {
                        stop.get_or_insert(CallsStop::Aborted(reason));
                    }
                }
                let item = Item::new(ItemKind::ToolResult {
                    call_id: call.id.clone(),
                    content: result.content.clone(),
                    is_error: result.is_error,
                    meta: result.meta.as_ref().map(pod_llm::Meta::from),
                });
                self.commit(item, observer).await?;
                tracing::debug!(
                    tool = %call.name,
                    call_id = %call.id,
                    is_error = result.is_error,
                    result_chars = result.content.len(),
                    "tool result committed"
                );
                if let Some(limit) = meter.tool_result(
                    &call.name,
                    &call.arguments,
                    &result.content,
                    result.is_error,
                ) {
                    stop.get_or_insert(CallsStop::Limit(limit));
                }
                // Announced after the commit, so a front end that sees it
                // knows the result is saved.
                observer.on_event(WorkerEvent::ToolCallFinished {
                    call,
                    content: result.content,
                    is_error: result.is_error,
                });
            }
            if stop.is_none() && cancel.is_cancelled() {
                stop = Some(CallsStop::Cancelled);
            }
        }
        Ok(stop)
    }

    async fn execute_batch(
        &self,
        batch: &[ToolCall],
        planned: &[Planned],
        observer: &mut dyn TurnObserver,
        cancel: &CancellationToken,
    ) -> Vec<ToolOutput> {
        for (call, plan) in batch.iter().zip(planned) {
            if let Planned::Run(info) = plan {
                observer.on_event(WorkerEvent::ToolCallStarted(ToolCall {
                    id: call.id.clone(),
                    name: info.name.clone(),
                    arguments: info.arguments.clone(),
                }));
            }
        }
        let grace = self.config().cancel_grace;
        join_all(planned.iter().map(|plan| async move {
            match plan {
                Planned::Run(info) => execute_one(self.tools(), info, cancel, grace).await,
                Planned::Done(output) => output.clone(),
                // Not committed (see `run_tool_calls`).
                Planned::Open => ToolOutput::error(String::new()),
            }
        }))
        .await
    }
}

async fn plan_call(
    call: &ToolCall,
    hooks: &mut dyn Interceptor,
    stop: &mut Option<CallsStop>,
) -> Planned {
    let mut info = ToolCallInfo {
        call_id: call.id.clone(),
        name: call.name.clone(),
        arguments: call.arguments.clone(),
    };
    match hooks.pre_tool_call(&mut info).await {
        PreToolAction::Continue => Planned::Run(info),
        PreToolAction::Skip(text) => Planned::Done(ToolOutput::error(text)),
        PreToolAction::Respond(output) => Planned::Done(output),
        PreToolAction::Abort(reason) => {
            let planned = CallsStop::Aborted(reason.clone()).not_run();
            *stop = Some(CallsStop::Aborted(reason));
            planned
        }
        PreToolAction::Pause(reason) => {
            let planned = CallsStop::Paused(reason.clone()).not_run();
            *stop = Some(CallsStop::Paused(reason));
            planned
        }
        PreToolAction::Park(reason) => {
            *stop = Some(CallsStop::Parked(reason));
            Planned::Open
        }
    }
}

async fn execute_one(
    tools: &ToolRegistry,
    info: &ToolCallInfo,
    cancel: &CancellationToken,
    grace: Duration,
) -> ToolOutput {
    let Some(tool) = tools.get(&info.name) else {
        return ToolOutput::error(format!(
            "Unknown tool `{}`. Available tools: {}.",
            info.name,
            tools.names().join(", ")
        ));
    };
    let ctx = ToolContext {
        call_id: info.call_id.clone(),
        cancel: cancel.child_token(),
    };
    let span = tracing::info_span!(
        "execute_tool",
        otel.name = %format!("execute_tool {}", info.name),
        gen_ai.operation.name = "execute_tool",
        gen_ai.tool.name = %info.name,
        gen_ai.tool.call.id = %info.call_id,
        otel.status_code = tracing::field::Empty,
    );
    let call = AssertUnwindSafe(tool.call_json(&info.arguments, ctx))
        .catch_unwind()
        .instrument(span.clone());
    tokio::pin!(call);
    let finished = tokio::select! {
        biased;
        result = &mut call => result,
        _ = cancel.cancelled() => match tokio::time::timeout(grace, &mut call).await {
            Ok(result) => result,
            Err(_) => return ToolOutput::error(
                "Cancelled: the turn was cancelled while this tool was running, and it was stopped.",
            ),
        },
    };
    let output = finished.unwrap_or_else(|panic| {
        let message = panic
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| panic.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "unknown panic".into());
        tracing::error!(tool = %info.name, %message, "tool panicked");
        ToolOutput::error(format!(
            "The tool `{}` crashed ({message}). Its effects are unknown; check before retrying.",
            info.name
        ))
    });
    if output.is_error {
        // A failed call is an error on its span (OpenTelemetry's status).
        span.record("otel.status_code", "ERROR");
    }
    output
}
