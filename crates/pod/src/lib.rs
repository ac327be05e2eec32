//! The Pod: the unit of pod a user runs for hours, kills and resumes.
//!
//! A Pod is an actor (a tokio task behind a cloneable [`PodHandle`]) that
//! owns a [`Worker`](pod_worker::Worker) and its history, the session log on
//! disk, the [`TodoStore`](pod_tools::TodoStore), the workspace tools'
//! [`FileTracker`](pod_tools::FileTracker) and the interceptor that reminds
//! the model of its plan, delivers notifications and applies the
//! [`ApprovalPolicy`]. Every committed item is appended to the log before the
//! turn moves on; [`Pod::resume`] rebuilds history, todos and the file
//! tracker by replaying that log.
//!
//! A prompt runs as one job in its own task: the worker's step machine
//! drives the turn, and when the context is full the run compacts within
//! itself. A job carries its caller's reply into its task and back.
//!
//! This crate must not know about front ends (CLI, ACP, HTTP) or how a
//! session is configured from flags (`pod-launch`): they read [`PodEvent`]s
//! and call the handle.
//!
//! ```
//! # async fn demo() -> Result<(), pod::PodError> {
//! use pod::{Pod, PodConfig, PodHome};
//! use pod_llm::{ScriptStep, ScriptedProvider};
//! use std::sync::Arc;
//! let home = PodHome::new(std::env::temp_dir().join("pod-doc-example"));
//! let model = ScriptedProvider::from_steps(vec![ScriptStep::text("Hello!")]);
//! let pod = Pod::spawn(PodConfig::new(home.clone(), ".", Arc::new(model))).await?;
//! pod.prompt("Say hello").await?;
//! let id = pod.session_id();
//! pod.shutdown().await?;
//! // Later, or after a crash:
//! let model = ScriptedProvider::from_steps(vec![]);
//! let pod = Pod::resume(id, PodConfig::new(home, ".", Arc::new(model))).await?;
//! assert_eq!(pod.get_history().await?.len(), 2);
//! # Ok(()) }
//! # tokio::runtime::Runtime::new().unwrap().block_on(demo()).unwrap();
//! ```
#![deny(missing_docs)]

pub mod approval;
pub mod checkpoints;
mod client_tools;
pub mod compact;
mod config;
mod decision;
mod durability;
mod error;
mod events;
mod fork;
mod gate;
mod handle;
mod home;
mod hooks;
pub mod interceptors;
mod job;
pub mod ledger;
pub mod limits;
pub mod log;
mod observer;
mod pod;
pub mod questions;
pub mod reminder;
pub mod replay;
mod session;
pub mod shared_limits;
mod stack;
pub mod stats;
pub mod store;
pub mod subagents;
mod tools;
pub mod trace;
mod turn;
pub mod verify;

pub use approval::{
    ApprovalDecision, ApprovalFlags, ApprovalPolicy, ApprovalRequest, Approver, SubagentLabel,
    ToolPolicy,
};
pub use client_tools::{ClientResult, ClientToolSpec, RESERVED_TOOL_NAMES};
pub use compact::{CompactionConfig, CompactionReport};
pub use config::{
    Durability, FollowupConfig, InterceptorFactory, PodConfig, StartHook, DEFAULT_SYSTEM_PROMPT,
};
pub use error::PodError;
pub use events::{NotRunBy, PodEvent};
pub use fork::{fork_item_count, fork_session, fork_session_in};
pub use gate::ApprovalGate;
pub use handle::PodHandle;
pub use home::{HomeAccess, PodHome, LOG_FILE};
pub use interceptors::{
    context_estimate, CostBudget, LoopGuardConfig, SessionBudget, MAX_COMPACTION_FAILURES,
};
pub use pod::Pod;
pub use store::{FileStore, LogWriter, SessionStat, SessionStore, Store, Waits};
pub use subagents::{child_session_id, SubagentConfig, SubagentType, TASK};

// The types this crate's API takes and returns, so that an embedder can
// depend on `pod` alone.
/// The attribute a [`Tool`] or [`Interceptor`] implementation needs.
pub use async_trait::async_trait;
pub use pod_hooks::Hooks;
pub use pod_llm::{
    Cost, Item, ItemKind, Prices, Provider, ScriptStep, ScriptedProvider, SystemKind, Usage,
};
pub use pod_tools::{SandboxMode, SandboxPolicy, TodoItem, TodoStatus};
pub use pod_worker::{
    AbortReason, Budget, CommittedCall, Interceptor, InterceptorStack, Limit, PostToolAction,
    PreRequestAction, PreToolAction, PromptAction, RunStart, Tool, ToolCallInfo, ToolContext,
    ToolOutput, ToolRegistry, ToolResultInfo, ToolState, ToolStates, TurnEndAction, TurnEndReason,
    TurnOutcome, YieldReason,
};
pub use tokio_util::sync::CancellationToken;
