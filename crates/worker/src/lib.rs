//! The turn loop of pod.
//!
//! A [`Worker`] owns a conversation's history and runs turns: it asks a
//! [`Provider`](pod_llm::Provider) for the next step, runs the tool calls the
//! model makes through a [`ToolRegistry`], and repeats until the model answers
//! without calling tools. What to do next is decided by [`Turn`], a step
//! machine without IO; the worker performs each [`Step`]. Upper layers steer
//! it only through an [`Interceptor`] and watch it through a
//! [`TurnObserver`], which is told of every committed item before the turn
//! moves on; a [`Compaction`] lets a run compact its history when an
//! interceptor asks.
//!
//! Whatever happens during a turn (a skipped, aborted, cancelled, unknown or
//! panicking tool, malformed arguments, a provider error) every tool call in
//! history gets exactly one result.
//!
//! This crate must not know about sessions, logs, todos or front ends.
#![deny(missing_docs)]

mod budget;
mod error;
mod execute;
mod interceptor;
mod observer;
mod outcome;
mod stack;
mod step;
mod tool;
mod tool_state;
mod worker;

pub use budget::{
    Budget, BudgetMeter, Limit, Measure, Window, DEFAULT_REPEATED_FAILURES,
    DEFAULT_REQUESTS_PER_TURN,
};
pub use error::WorkerError;
pub use interceptor::{
    AbortReason, CompactionOutcome, Interceptor, NoopInterceptor, PostToolAction, PreRequestAction,
    PreToolAction, PromptAction, RunStart, ToolCallInfo, ToolResultInfo, TurnEndAction,
    YieldReason,
};
pub use observer::{NullObserver, PersistError, PersistKind, TurnObserver, WorkerEvent};
pub use stack::InterceptorStack;
pub use step::{Answer, CallsStop, Ending, Step, Turn};
/// What the exported macros use.
#[doc(hidden)]
pub mod __private {
    pub use crate::tool::shared_schema;
    pub use serde_json;
}

pub use outcome::{TurnEndReason, TurnOutcome};
pub use tool::{DynTool, Tool, ToolContext, ToolOutput, ToolRegistry, ToolSource};
pub use tool_state::{CommittedCall, ToolState, ToolStates};
pub use worker::{Compaction, Worker, WorkerConfig};
