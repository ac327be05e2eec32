//! Subagents: a `task` call starts a child Pod, a full session of its own
//! (log, plan, reminders, compaction, budget), and its final answer becomes
//! the call's result.
//!
//! A child's session id is derived from its parent's id and the call id
//! ([`child_session_id`]), and the `task` tool is
//! [`resumable`](pod_worker::Tool::resumable): after a crash, resuming the
//! parent runs the unfinished call again, which finds the child's log and
//! resumes it (or, when the child had already finished, returns its
//! recorded answer without running it). Nothing of the child's work is
//! redone from scratch.
//!
//! What a child may do is never more than its parent may: it has the
//! parent's approval policy (its questions go to the parent's approver,
//! labelled with the child), the same sandbox, and with `read_only` fewer
//! tools. Depth, parallel children and children per run are capped
//! ([`SubagentConfig`]).

mod approver;
mod child;
mod parent;
mod tool;

pub use child::child_session_id;
pub use tool::TASK;
pub(crate) use tool::{Subagents, TaskTool};

use pod_llm::Provider;
use std::sync::Arc;

/// Limits and settings of subagents.
#[derive(Clone)]
pub struct SubagentConfig {
    /// Offer the `task` tool at all.
    pub enabled: bool,
    /// How deep children may nest: a session at this depth has no `task`
    /// tool (a top-level session is depth 0, so the default 2 allows
    /// children and grandchildren).
    pub max_depth: u32,
    /// Children of one session running at once; more calls wait for a slot.
    pub max_parallel: usize,
    /// Children one run (a prompt and its continuations) may start; further
    /// calls get an error result, so a looping model cannot fork-bomb.
    pub max_per_run: u32,
    /// The model children use; the parent's when `None`.
    pub provider: Option<Arc<dyn Provider>>,
    /// The agent types a `task` call may name (`subagent_type`): agent
    /// definitions the operator (or, opted in, the workspace) gave.
    pub types: Vec<SubagentType>,
}

/// An agent a `task` call may start by name: its prompt, the tools it
/// may use and its model.
#[derive(Clone)]
pub struct SubagentType {
    /// Its name (`subagent_type`).
    pub name: String,
    /// When to use it, for the model.
    pub description: String,
    /// Its instructions, added to the child's system prompt.
    pub prompt: String,
    /// The tools it may call, by pod's names; its parent's when `None`.
    pub tools: Option<Vec<String>>,
    /// The model it runs on; the subagents' when `None`.
    pub provider: Option<Arc<dyn Provider>>,
}

impl std::fmt::Debug for SubagentType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SubagentType")
            .field("name", &self.name)
            .field("tools", &self.tools)
            .field("provider", &self.provider.as_ref().map(|p| p.model_name()))
            .finish_non_exhaustive()
    }
}

/// Default of [`SubagentConfig::max_depth`]: a child may delegate once more;
/// deeper trees are hard to follow and rarely help.
pub const DEFAULT_MAX_DEPTH: u32 = 2;

/// Default of [`SubagentConfig::max_parallel`]: enough to explore a few
/// areas at once, few enough that a provider's rate limit is not the first
/// thing they meet.
pub const DEFAULT_MAX_PARALLEL: usize = 4;

/// Default of [`SubagentConfig::max_per_run`]: four full rounds of parallel
/// children in one run.
pub const DEFAULT_MAX_PER_RUN: u32 = 16;

impl Default for SubagentConfig {
    fn default() -> Self {
        Self {
            enabled: true,
            max_depth: DEFAULT_MAX_DEPTH,
            max_parallel: DEFAULT_MAX_PARALLEL,
            max_per_run: DEFAULT_MAX_PER_RUN,
            provider: None,
            types: Vec::new(),
        }
    }
}

impl std::fmt::Debug for SubagentConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SubagentConfig")
            .field("enabled", &self.enabled)
            .field("max_depth", &self.max_depth)
            .field("max_parallel", &self.max_parallel)
            .field("max_per_run", &self.max_per_run)
            .field("provider", &self.provider.as_ref().map(|p| p.model_name()))
            .field(
                "types",
                &self
                    .types
                    .iter()
                    .map(|t| t.name.as_str())
                    .collect::<Vec<_>>(),
            )
            .finish()
    }
}

/// Where a session sits in a tree of subagents, from its log header.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Lineage {
    /// 0 for a top-level session.
    pub depth: u32,
    /// A child started with `read_only`: no tools that write.
    pub read_only: bool,
}

impl Lineage {
    /// The lineage a header records.
    pub fn of(header: Option<&crate::log::SessionHeader>) -> Self {
        match header.and_then(|h| h.parent.as_ref()) {
            Some(link) => Self {
                depth: link.depth,
                read_only: link.read_only,
            },
            None => Self::default(),
        }
    }
}
