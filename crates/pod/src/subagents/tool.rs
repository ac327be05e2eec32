//! The `task` tool: delegates a self-contained task to a child Pod.

use super::child::{self, Task};
use super::parent::Parent;
use super::Lineage;
use crate::config::PodConfig;
use crate::events::EventBus;
use pod_worker::{Tool, ToolContext, ToolOutput};
use serde::Deserialize;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use tokio::sync::Semaphore;
use uuid::Uuid;

/// The tool's name. `task` (as in Claude Code) says what the model hands
/// over, a task, rather than how it runs (an agent, a Pod).
pub const TASK: &str = "task";

/// A session's children: what they are started with and the limits they
/// share. The Pod opens a new run with [`Subagents::begin_run`]; the tool
/// starts children.
#[derive(Clone)]
pub(crate) struct Subagents {
    inner: Arc<Inner>,
}

pub(crate) struct Inner {
    /// What a child is derived from.
    pub parent: Parent,
    // One permit per child that may run at once.
    slots: Semaphore,
    // Children started in the current run.
    started: AtomicU32,
}

impl std::ops::Deref for Inner {
    type Target = Parent;
    fn deref(&self) -> &Parent {
        &self.parent
    }
}

impl Subagents {
    pub fn new(
        config: &Arc<PodConfig>,
        session_id: Uuid,
        lineage: Lineage,
        events: &EventBus,
    ) -> Self {
        Self {
            inner: Arc::new(Inner {
                parent: Parent {
                    config: Arc::clone(config),
                    session_id,
                    lineage,
                    events: events.clone(),
                },
                slots: Semaphore::new(config.subagents.max_parallel.max(1)),
                started: AtomicU32::new(0),
            }),
        }
    }

    /// A new run starts: its children are counted from zero.
    pub fn begin_run(&self) {
        self.inner.started.store(0, Ordering::Relaxed);
    }

    /// Counts one more child of this run; `false` when the run's cap is
    /// reached.
    fn admit(&self) -> bool {
        let cap = self.inner.config.subagents.max_per_run;
        self.inner.started.fetch_add(1, Ordering::Relaxed) < cap
    }
}

/// Starts a child Pod on a task and returns its final answer.
pub(crate) struct TaskTool {
    subagents: Subagents,
}

impl TaskTool {
    pub fn new(subagents: Subagents) -> Self {
        Self { subagents }
    }
}

/// The arguments of a `task` call.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct TaskArgs {
    /// A few words saying what the task is, shown to the user.
    #[serde(default)]
    description: String,
    /// The task, complete: the child sees nothing else of this session.
    prompt: String,
    /// Give the child only the tools that read.
    #[serde(default)]
    read_only: bool,
    /// Run the child in its own git worktree of the workspace's
    /// repository, on its own branch.
    #[serde(default)]
    worktree: bool,
    /// The agent type the child runs as (one of the session's agent
    /// definitions).
    #[serde(default)]
    subagent_type: Option<String>,
}

#[async_trait::async_trait]
impl Tool for TaskTool {
    type Args = TaskArgs;

    fn name(&self) -> &str {
        TASK
    }

    fn description(&self) -> String {
        let config = &self.subagents.inner.config.subagents;
        let types = agent_types(&config.types);
        format!(
            "Delegate a self-contained task to a subagent: a fresh agent with its own context \
             and plan, working in the same workspace. It sees only `prompt`, so say everything \
             it needs (goal, files, constraints, what to report). Its final message (and its \
             plan) is this call's result. Use it for independent work such as exploring one \
             area of a codebase or reviewing a change, to keep your own context small; several \
             calls in one response run in parallel (at most {} at once, {} per run). With \
             read_only the subagent cannot write files or run commands. With worktree it works \
             in its own git worktree and branch of the workspace's repository (from HEAD), so \
             parallel subagents that write never touch each other's files; the result names \
             the branch to merge.{types}",
            config.max_parallel, config.max_per_run
        )
    }

    fn parameters(&self) -> Arc<serde_json::Value> {
        let types = &self.subagents.inner.config.subagents.types;
        if !types.is_empty() {
            let names: Vec<&str> = types.iter().map(|t| t.name.as_str()).collect();
            let mut schema = serde_json::Value::clone(&self.base_parameters());
            schema["properties"]["subagent_type"] = serde_json::json!({
                "type": "string",
                "enum": names,
                "description": "Run the subagent as this agent (its instructions and tools)"
            });
            return Arc::new(schema);
        }
        self.base_parameters()
    }

    fn concurrency_safe(&self) -> bool {
        true
    }

    fn resumable(&self) -> bool {
        true
    }

    async fn call(&self, args: TaskArgs, ctx: ToolContext) -> ToolOutput {
        self.run(args, ctx).await
    }
}

impl TaskTool {
    /// The schema without agent types.
    fn base_parameters(&self) -> Arc<serde_json::Value> {
        pod_worker::schema!({
            "type": "object",
            "properties": {
                "description": {
                    "type": "string",
                    "description": "3 to 8 words saying what the task is, for the user"
                },
                "prompt": {
                    "type": "string",
                    "description": "The whole task: the subagent sees nothing else"
                },
                "read_only": {
                    "type": "boolean",
                    "description": "Only tools that read: no writes, edits or commands"
                },
                "worktree": {
                    "type": "boolean",
                    "description": "Work in its own git worktree and branch (the workspace must be in a git repository)"
                }
            },
            "required": ["description", "prompt"],
            "additionalProperties": false
        })
    }

    async fn run(&self, args: TaskArgs, ctx: ToolContext) -> ToolOutput {
        if args.prompt.trim().is_empty() {
            return ToolOutput::error(
                "The task's `prompt` is empty. Call `task` again with the whole task in `prompt`.",
            );
        }
        let inner = &self.subagents.inner;
        let agent = match agent_type(&inner.config.subagents.types, &args.subagent_type) {
            Ok(agent) => agent,
            Err(refused) => return refused,
        };
        let id = child::child_session_id(inner.session_id, &ctx.call_id);
        // A resumed call finds its child's log: it is not a new child.
        let resumed = child::exists(&inner.config, id).await;
        if !resumed && !self.subagents.admit() {
            return ToolOutput::error(format!(
                "Not run: this run already started {} subagents, its limit. Do the rest of the \
                 work yourself, or finish this run and continue in the next one.",
                inner.config.subagents.max_per_run
            ));
        }
        // Waiting for a slot follows the turn's cancellation.
        let _slot = tokio::select! {
            permit = inner.slots.acquire() => match permit {
                Ok(permit) => permit,
                Err(_) => return ToolOutput::error("Not run: the session is shutting down."),
            },
            _ = ctx.cancel.cancelled() => {
                return ToolOutput::error("Not run: the turn was cancelled before the subagent started.");
            }
        };
        let task = Task {
            id,
            call_id: ctx.call_id.clone(),
            description: label(&args.description, &args.prompt),
            prompt: args.prompt,
            read_only: args.read_only,
            worktree: args.worktree,
            agent,
        };
        child::run(inner, task, &ctx.cancel).await
    }
}

/// The agent type a call names, if it names one; an error result the
/// model can act on when the session has no such type.
fn agent_type(
    types: &[super::SubagentType],
    name: &Option<String>,
) -> Result<Option<super::SubagentType>, ToolOutput> {
    let Some(name) = name else { return Ok(None) };
    if let Some(agent) = types.iter().find(|t| &t.name == name) {
        return Ok(Some(agent.clone()));
    }
    let known: Vec<&str> = types.iter().map(|t| t.name.as_str()).collect();
    let known = match known.is_empty() {
        true => "none".to_string(),
        false => known.join(", "),
    };
    Err(ToolOutput::error(format!(
        "Not run: there is no agent type `{name}`. The agent types are: {known}. Call `task` \
         with one of them, or without `subagent_type`."
    )))
}

/// The agent types, as the tool's description lists them.
fn agent_types(types: &[super::SubagentType]) -> String {
    if types.is_empty() {
        return String::new();
    }
    let mut out = String::from(
        " With subagent_type the subagent runs as one of these agents, with its instructions \
         and only its tools:",
    );
    for agent in types {
        out.push_str(&format!("\n- {}: {}", agent.name, agent.description));
    }
    out
}

/// The description, or the prompt's first words when there is none.
fn label(description: &str, prompt: &str) -> String {
    // Long enough for a short phrase, short enough for one line beside a
    // tool call.
    const MAX_CHARS: usize = 60;
    let text = match description.trim() {
        "" => prompt.trim(),
        description => description,
    };
    let line = text.lines().next().unwrap_or_default();
    match line.char_indices().nth(MAX_CHARS) {
        Some((at, _)) => format!("{}…", &line[..at]),
        None => line.to_string(),
    }
}
