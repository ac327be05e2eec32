//! Keeping a session's trace across processes: when a front end exports
//! traces (OpenTelemetry), each run's span context is a `LogRecord::Trace`
//! in the log, and a run that continues the session (no new prompt: after
//! a crash, on another fleet worker) is made a child of the last one, so
//! the session's work stays one trace.
//!
//! The Pod knows no tracing backend: the front end that installed one
//! sets a [`TraceContext`] that reads and adopts span contexts as W3C
//! `traceparent` strings.

use std::sync::{Arc, OnceLock};

/// Reads and sets span contexts, for the backend the front end installed.
pub trait TraceContext: Send + Sync {
    /// `span`'s context as a W3C `traceparent` (`00-TRACE-SPAN-FLAGS`),
    /// when it is exported.
    fn traceparent(&self, span: &tracing::Span) -> Option<String>;
    /// Makes `span` (not entered yet) a child of the span `traceparent`
    /// names, recorded by another process.
    fn continue_from(&self, span: &tracing::Span, traceparent: &str);
}

static CONTEXT: OnceLock<Arc<dyn TraceContext>> = OnceLock::new();

/// Sets the process's trace context (once; later calls are ignored).
pub fn set_trace_context(context: Arc<dyn TraceContext>) {
    let _ = CONTEXT.set(context);
}

pub(crate) fn context() -> Option<&'static Arc<dyn TraceContext>> {
    CONTEXT.get()
}
