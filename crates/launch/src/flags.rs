//! What a front end asks for a session: the settings a person gave (flags,
//! an API request's fields, an editor's session), before they are laid over
//! the config file and a session's record. Parsing them is the front end's
//! job; these types know no command line.

use pod::{ApprovalFlags, SandboxMode};
use pod_providers::ProviderKind;
use std::path::PathBuf;

/// Which model answers (`--profile`, `--provider`, `--script`,
/// `--base-url`, `--model`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ModelFlags {
    /// A profile of the config file.
    pub profile: Option<String>,
    /// The provider kind, over the profile's.
    pub provider: Option<ProviderKind>,
    /// The scripted model's script.
    pub script: Option<PathBuf>,
    /// An HTTP provider's base URL, over the profile's.
    pub base_url: Option<String>,
    /// The model id, over the profile's.
    pub model: Option<String>,
}

/// The limits of a run and a session (`--max-requests`, `--max-turns`,
/// `--max-run-requests`, `--max-run-tokens`, `--max-run-cost`,
/// `--max-cost`, `--max-wall`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BudgetFlags {
    /// Model requests per turn.
    pub max_requests: Option<u32>,
    /// Continuations in until-done mode.
    pub max_turns: Option<u32>,
    /// Model requests in the run.
    pub max_run_requests: Option<u64>,
    /// Tokens in the run.
    pub max_run_tokens: Option<u64>,
    /// Money the session and its subagents may spend over its life, at
    /// the profile's prices (recorded in the session's log).
    pub max_cost: Option<pod_llm::Cost>,
    /// Money one run and its subagents may spend.
    pub max_run_cost: Option<pod_llm::Cost>,
    /// Seconds from the session's creation after which it sends no request
    /// (recorded in the session's log).
    pub max_wall_secs: Option<u64>,
}

/// Where commands may write and whether they have the network
/// (`--sandbox`, `--network`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SandboxFlags {
    /// The mode, over the record and the config file.
    pub mode: Option<SandboxMode>,
    /// The network switch.
    pub network: Option<bool>,
}

/// Everything a front end may say about how a session runs.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Flags {
    /// The model.
    pub model: ModelFlags,
    /// The run's limits.
    pub budget: BudgetFlags,
    /// `--yes`, `--allow TOOL`, `--deny TOOL`.
    pub approval: ApprovalFlags,
    /// The sandbox.
    pub sandbox: SandboxFlags,
    /// Keep going while todos are unfinished.
    pub until_done: bool,
    /// `--followups`: the `schedule_followup` tool (recorded, so a fleet
    /// worker that continues the session offers it too).
    pub followups: bool,
    /// `--mcp-config` files (Claude Code / Cursor `mcpServers` JSON).
    pub mcp_config: Vec<PathBuf>,
    /// `--hooks` files (Claude Code settings JSON with a `"hooks"` object).
    pub hooks: Vec<PathBuf>,
    /// `--workspace-hooks`: also the workspace's `.claude/settings.json`,
    /// `.claude/settings.local.json` and `.pod/settings.json`.
    pub workspace_hooks: bool,
    /// `--no-checkpoints`: no snapshots of the workspace around calls.
    pub no_checkpoints: bool,
    /// What "done" means (`--verify`, `--grader`, `--rubric`).
    pub goal: GoalFlags,
    /// `--agent NAME`: start as this agent definition (its prompt, tools
    /// and model).
    pub agent: Option<String>,
    /// `--instructions FILE`s: added after the project's instructions.
    pub instructions: Vec<PathBuf>,
    /// `--system-prompt FILE`: replaces the built-in system prompt.
    pub system_prompt: Option<PathBuf>,
    /// `--workspace-agents`: also the workspace's agent definitions
    /// (`.claude/agents/`, `.pod/agents/`) and skills (`.claude/skills/`,
    /// `.agents/skills/`).
    pub workspace_agents: bool,
}

/// The checks that decide whether a run is done (`--verify CMD`,
/// `--max-verify N`, `--grader PROFILE`, `--rubric TEXT`), and the named
/// checks an API request may ask for.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GoalFlags {
    /// Command lines, over the config's `[goal] verify`.
    pub verify: Vec<String>,
    /// Names of `[goal.checks]` (what an API client may give).
    pub checks: Vec<String>,
    /// Failed rounds before the run stops unverified.
    pub max_rounds: Option<u32>,
    /// A profile whose model grades the work.
    pub grader: Option<String>,
    /// The rubric's text.
    pub rubric: Option<String>,
}
