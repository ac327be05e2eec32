//! The arguments of the commands on sessions already made: `pod
//! sessions`, `show`, `resume`, `replay`, `fork`, `diff`, `rewind`,
//! `approve`, `budget`, `rm`, `prune`.

use super::*;

/// `pod approve`.
#[derive(Debug, Args)]
pub struct ApproveArgs {
    /// Session id (a unique prefix is enough).
    #[arg(value_name = "ID")]
    pub id: String,
    /// `[CALL] DECISION`: the call (or question id prefix) when the
    /// session has several open questions, then allow, deny, always or
    /// never (or allow_once, reject_once, allow_always, reject_always).
    #[arg(value_name = "[CALL] DECISION", num_args = 1..=2, required = true)]
    pub answer: Vec<String>,
    /// Print the answer recorded as JSON.
    #[arg(long)]
    pub json: bool,
}

/// `pod budget`.
#[derive(Debug, Args)]
pub struct BudgetCmdArgs {
    /// Session id (a unique prefix is enough).
    #[arg(value_name = "ID")]
    pub id: String,
    /// Money the session may spend over its life.
    #[arg(long, value_name = "AMOUNT", value_parser = parse_cost)]
    pub max_cost: Option<pod_llm::Cost>,
    /// Wall time from the session's creation (90m, 2h, 1d).
    #[arg(long, value_name = "DURATION", value_parser = parse_wall)]
    pub max_wall: Option<u64>,
    /// Model requests over the session's life.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pub max_session_requests: Option<u64>,
    /// Tokens over the session's life.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pub max_session_tokens: Option<u64>,
    /// Print the limits as JSON.
    #[arg(long)]
    pub json: bool,
}

/// `pod rm`.
#[derive(Debug, Args)]
pub struct RmArgs {
    /// Session ids (a unique prefix is enough).
    #[arg(value_name = "ID", required = true)]
    pub ids: Vec<String>,
    /// Do not ask.
    #[arg(long, short = 'y')]
    pub yes: bool,
}

/// `pod prune`.
#[derive(Debug, Args)]
pub struct PruneArgs {
    /// Age since the last update: a number and a unit (s, m, h, d, w), e.g. 30d.
    #[arg(long, value_name = "AGE", value_parser = parse_age)]
    pub older_than: std::time::Duration,
    /// Only list the sessions that would be deleted.
    #[arg(long)]
    pub dry_run: bool,
    /// Do not ask.
    #[arg(long, short = 'y')]
    pub yes: bool,
}

/// `pod resume`.
#[derive(Debug, Args)]
pub struct ResumeArgs {
    /// Session id (a unique prefix is enough).
    #[arg(value_name = "ID")]
    pub id: String,
    /// New instructions; without them the model continues its plan.
    #[arg(value_name = "TEXT")]
    pub text: Option<String>,
    /// The directory the agent works in (default: the session's).
    #[arg(long, value_name = "DIR")]
    pub workspace: Option<PathBuf>,
    /// How the session runs (over what it recorded).
    #[command(flatten)]
    pub session: SessionArgs,
    /// How to drive it.
    #[command(flatten)]
    pub drive: DriveArgs,
}

/// `pod sessions`.
#[derive(Debug, Args)]
pub struct SessionsArgs {
    /// One JSON array on stdout.
    #[arg(long)]
    pub json: bool,
    /// Only the N most recently updated sessions (with their subagents).
    #[arg(long, value_name = "N")]
    pub limit: Option<usize>,
    /// Only sessions in these states (repeat, or separate with commas; the
    /// states are below).
    #[arg(long, value_name = "STATUS", value_delimiter = ',')]
    pub status: Vec<String>,
}

/// `pod show`.
#[derive(Debug, Args)]
pub struct ShowArgs {
    /// Session id (a unique prefix is enough).
    #[arg(value_name = "ID")]
    pub id: String,
    /// One JSON document on stdout: the session, its todos and full history.
    /// With --follow: one JSON line per new record.
    #[arg(long)]
    pub json: bool,
    /// Keep printing the history as it grows, until nobody runs the
    /// session any more (it may run in another process or on another fleet
    /// worker: new records are read from the store as they commit).
    #[arg(long, short = 'f')]
    pub follow: bool,
}

/// `pod replay`.
#[derive(Debug, Args)]
#[command(group = clap::ArgGroup::new("which").required(true).args(["id", "dir"]))]
pub struct ReplayArgs {
    /// Session id (a unique prefix is enough).
    #[arg(value_name = "ID")]
    pub id: Option<String>,
    /// Replay every session of this directory instead: a POD_HOME, or
    /// what `pod store export --to DIR` wrote (subagents' sessions are
    /// replayed under their parents').
    #[arg(long, value_name = "DIR", conflicts_with = "id")]
    pub dir: Option<PathBuf>,
    /// One JSON object per session on stdout: the counts and the first
    /// divergence, with both records.
    #[arg(long)]
    pub json: bool,
    /// Start from a copy of this directory instead of the files the
    /// session's first checkpoint holds.
    #[arg(long, value_name = "DIR")]
    pub workspace: Option<PathBuf>,
    /// Read this config file (approval rules, budgets, sandbox) instead of
    /// the default one.
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Run the hooks of this Claude Code settings file instead of the ones
    /// the session recorded (repeatable).
    #[arg(long, value_name = "FILE")]
    pub hooks: Vec<PathBuf>,
    /// An `{"mcpServers": {...}}` JSON file (repeatable): a server named
    /// like one the session recorded replaces it (another command, the env
    /// values a log never holds). Only stdio servers are started.
    #[arg(long, value_name = "FILE")]
    pub mcp_config: Vec<PathBuf>,
}

/// `pod fork`.
#[derive(Debug, Args)]
pub struct ForkArgs {
    /// Session id (a unique prefix is enough).
    #[arg(value_name = "ID")]
    pub id: String,
    /// Keep the first N history items (default: all); `pod show` numbers them.
    #[arg(long, value_name = "N")]
    pub at: Option<usize>,
    /// Also copy the workspace's files as they were after those items into
    /// DIR (new or empty), from the session's checkpoints; the fork works
    /// there.
    #[arg(long, value_name = "DIR")]
    pub files: Option<PathBuf>,
    /// Print the new session as JSON.
    #[arg(long)]
    pub json: bool,
}

/// `pod diff`.
#[derive(Debug, Args)]
pub struct DiffArgs {
    /// Session id (a unique prefix is enough).
    #[arg(value_name = "ID")]
    pub id: String,
    /// From the files as they were after this many items (default: 0,
    /// before the first change).
    #[arg(long, value_name = "N")]
    pub from: Option<usize>,
    /// To the files as they were after this many items (default: as the
    /// session's last call left them).
    #[arg(long, value_name = "M")]
    pub to: Option<usize>,
    /// The changed files and the patch as JSON.
    #[arg(long)]
    pub json: bool,
}

/// `pod rewind`.
#[derive(Debug, Args)]
pub struct RewindArgs {
    /// Session id (a unique prefix is enough).
    #[arg(value_name = "ID")]
    pub id: String,
    /// The item after which to go back (`pod show` numbers them).
    #[arg(long, value_name = "N")]
    pub to: usize,
    /// Overwrite files changed outside the session since then.
    #[arg(long)]
    pub force: bool,
    /// Print the new session and the restored files as JSON.
    #[arg(long)]
    pub json: bool,
}
