//! What a Pod is started with.

use crate::approval::{ApprovalPolicy, Approver};
use crate::compact::CompactionConfig;
use crate::home::PodHome;
use crate::interceptors::{CostBudget, LoopGuardConfig, SessionBudget};
use crate::store::{FileStore, Store};
use crate::subagents::SubagentConfig;
use pod_llm::Provider;
use pod_tools::SandboxPolicy;
use pod_worker::{Budget, Interceptor, ToolRegistry};
use std::path::PathBuf;
use std::sync::Arc;

pub use crate::durability::Durability;

/// Makes one of an embedder's interceptors. A Pod makes its stack again
/// when it rebuilds itself from the log after a crashed turn, so it takes a
/// maker, not an instance; state an interceptor must keep across crashes
/// belongs in the log.
pub type InterceptorFactory = Arc<dyn Fn() -> Box<dyn Interceptor> + Send + Sync>;

/// Called once a session's Pod runs (started or resumed), before its first
/// job, with its handle and settings: where a front end subscribes to its
/// events for good (notifications do). Not called for its subagents.
pub type StartHook = Arc<dyn Fn(&crate::PodHandle, &PodConfig) + Send + Sync>;

/// Settings of a Pod.
#[derive(Clone)]
pub struct PodConfig {
    /// pod's local data directory: session logs live here unless `store`
    /// names another store, and every session's scratch directory (its
    /// commands' `tmp/`) is here whatever the store.
    pub home: PodHome,
    /// Where session logs live; `None` keeps them as files under `home`
    /// ([`FileStore`]).
    pub store: Option<Store>,
    /// The workspace the agent works in.
    pub workspace: PathBuf,
    /// The model.
    pub provider: Arc<dyn Provider>,
    /// The system prompt.
    pub system_prompt: String,
    /// Tools besides the builtin `todo_write` and the workspace tools.
    pub tools: ToolRegistry,
    /// Register the workspace tools (`read_file`, `write_file`, `edit_file`,
    /// `list_dir`, `glob`, `grep`, `bash`), confined to `workspace`, with the
    /// session's file tracker.
    pub workspace_tools: bool,
    /// Which tools run, ask or are refused.
    pub approval: ApprovalPolicy,
    /// Who answers `ask`; without one, `ask` tools are refused with a message
    /// saying the user must allow them.
    pub approver: Option<Arc<dyn Approver>>,
    /// When the log is fsynced.
    pub durability: Durability,
    /// Remind again after this many requests without `todo_write`.
    pub remind_every: u32,
    /// The limits of one run: a prompt (or a continue) and every until-done
    /// continuation of it. Each run starts with nothing spent, so a session
    /// stopped by a budget is continued with a fresh one.
    pub budget: Budget,
    /// Events buffered per subscriber before a slow one starts to lag.
    pub event_capacity: usize,
    /// Until-done mode: continue a turn that ends with unfinished todos
    /// (bounded by `budget.continuations`), until the plan is done or a
    /// continuation makes no progress.
    pub until_done: bool,
    /// When and how to compact.
    pub compaction: CompactionConfig,
    /// The model that writes compaction summaries; the main one when `None`.
    pub compact_provider: Option<Arc<dyn Provider>>,
    /// Embedders' interceptors, first in the Pod's stack (before its own
    /// approval, reminders, compaction and until-done: see
    /// [`interceptors`](crate::interceptors) for the order and why).
    pub interceptors: Vec<InterceptorFactory>,
    /// Caps on the whole session's requests and tokens, across runs and
    /// resumes (none by default).
    pub session_budget: SessionBudget,
    /// The money limits of the session and of a run, and the meters they
    /// are counted on (none by default); subagents share them.
    pub cost_budget: Option<CostBudget>,
    /// The limits the session's profile shares with every session of the
    /// store (`[limits]`, [`crate::shared_limits`]); none by default.
    /// Subagents count in them too.
    pub shared_limits: Option<crate::shared_limits::SharedLimitsConfig>,
    /// What the loop guard looks for (on by default: five repeats).
    pub loop_guard: LoopGuardConfig,
    /// Called once the Pod runs ([`StartHook`]); none by default.
    pub on_start: Vec<StartHook>,
    /// How the front end started the session, stored in a new session's log
    /// header ([`SessionHeader::launch`](crate::log::SessionHeader::launch))
    /// for it to read back on resume. Never put secrets here. Kept as its
    /// JSON text: a Pod keeps its config for its life, and as a JSON value
    /// the record was about 5 KB of every waiting session.
    pub launch: Option<crate::log::LaunchJson>,
    /// The sandbox `bash` runs commands in (`workspace-write`, network off,
    /// by default; see [`pod_tools::sandbox`]). Its temp dir is the
    /// session's `tmp/`. With a sandbox the kernel enforces, a front end may
    /// let `bash` run without asking.
    pub sandbox: SandboxPolicy,
    /// Paths no command under an enforced sandbox, and no workspace tool,
    /// may read or write, besides `home` (every session's log, the HTTP
    /// API's token), which is always private: a front end adds its config
    /// directory and any secret file it was given. The session's own
    /// workspace and temp dir stay reachable even inside one.
    pub private_paths: Vec<PathBuf>,
    /// Subagents: whether the session has the `task` tool, its limits and
    /// the agent types it offers.
    pub subagents: SubagentConfig,
    /// The tools the session may call (an agent definition's `tools`), by
    /// pod's names; every tool when `None`. `todo_write` is always kept:
    /// the runtime's reminders ask for it. A tool left out is not offered
    /// and a call to it is refused as unknown.
    pub tool_allow: Option<Vec<String>>,
    /// Tools the session's client runs itself (the Managed Agents API's
    /// custom tools): offered to the model; a call parks the session until
    /// the client answers with its result. Root sessions only; none by
    /// default.
    pub client_tools: Vec<crate::client_tools::ClientToolSpec>,
    /// The Agent Skills the `skill` tool loads (the prompt lists them);
    /// none by default, and then no `skill` tool.
    pub skills: Vec<pod_tools::Skill>,
    /// The operator's hooks (Claude Code's settings format), run at their
    /// events for this session and its subagents; none by default.
    pub hooks: Option<Arc<pod_hooks::Hooks>>,
    /// Snapshot the workspace before and after each call that may change
    /// it (`pod diff`, `pod rewind`); off by default (front ends turn it
    /// on).
    pub checkpoints: bool,
    /// The operator's checks (and grader) that decide whether a run is
    /// done ([`crate::verify`]); none by default. Only a root session
    /// verifies: a subagent's work is its parent's to check.
    pub verify: Option<crate::verify::VerifyConfig>,
    /// The `schedule_followup` tool (opt-in; root sessions only): the
    /// agent parks its session until a time it names. `None` by default.
    pub followups: Option<FollowupConfig>,
    /// What started a new session when no person did (a webhook trigger),
    /// written in its header; `None` by default.
    pub origin: Option<crate::log::Origin>,
}

/// How a session's `schedule_followup` calls go.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FollowupConfig {
    /// Whether a worker wakes the session once it parks (a fleet worker
    /// runs it); without one a call is refused with a result saying so.
    pub wakes: bool,
}

/// The system prompt used when none is given.
pub const DEFAULT_SYSTEM_PROMPT: &str = "You are an autonomous agent working on a task in a \
workspace. Plan multi-step work with the todo_write tool, keep the plan current as you work, \
and finish every item. Messages in <system-reminder> blocks come from the runtime, not the user.";

impl PodConfig {
    /// Defaults for everything but where, in which workspace and with which model.
    pub fn new(home: PodHome, workspace: impl Into<PathBuf>, provider: Arc<dyn Provider>) -> Self {
        Self {
            home,
            store: None,
            workspace: workspace.into(),
            provider,
            system_prompt: DEFAULT_SYSTEM_PROMPT.to_string(),
            tools: ToolRegistry::new(),
            workspace_tools: true,
            approval: ApprovalPolicy::default(),
            approver: None,
            durability: Durability::default(),
            remind_every: 5,
            budget: Budget::default(),
            // Enough for a burst of text deltas between two polls of a front
            // end. Every slot (~100 bytes) is allocated up front per Pod and
            // dominates an idle Pod's memory (pod-bench idle: 28.6 KB per Pod
            // at 128 slots, 41.9 KB at 256), so keep it modest.
            event_capacity: 128,
            until_done: false,
            compaction: CompactionConfig::default(),
            compact_provider: None,
            interceptors: Vec::new(),
            session_budget: SessionBudget::default(),
            cost_budget: None,
            shared_limits: None,
            loop_guard: LoopGuardConfig::default(),
            on_start: Vec::new(),
            launch: None,
            sandbox: SandboxPolicy::default(),
            private_paths: Vec::new(),
            subagents: SubagentConfig::default(),
            tool_allow: None,
            client_tools: Vec::new(),
            skills: Vec::new(),
            hooks: None,
            checkpoints: false,
            verify: None,
            followups: None,
            origin: None,
        }
    }

    /// The store session logs live in.
    pub fn store(&self) -> Store {
        match &self.store {
            Some(store) => Arc::clone(store),
            None => Arc::new(FileStore::new(self.home.clone())),
        }
    }
}
