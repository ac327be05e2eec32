//! The command line: every flag and subcommand, with the help text users read.

mod agent;
mod goal;
mod schedule;
mod serve;
mod sessions;
use clap::{Args, Parser, Subcommand, ValueEnum};
pub use goal::GoalArgs;
pub use schedule::{OverlapArg, ScheduleAddArgs, ScheduleCommand};
pub use serve::{AcpArgs, DemoArgs, ServeArgs, StoreCommand, SubmitArgs};
pub use sessions::{
    ApproveArgs, BudgetCmdArgs, DiffArgs, ForkArgs, PruneArgs, ReplayArgs, ResumeArgs, RewindArgs,
    RmArgs, SessionsArgs, ShowArgs,
};
use std::path::PathBuf;

const AFTER_HELP: &str = "\
Examples:
  pod demo                                   # see a Pod plan, crash, resume and finish (no key needed)
  pod run --provider scripted --script s.json \"Tidy the tests\"
  pod run --profile claude --until-done \"Port the parser to nom\"
  pod sessions                               # what ran here, and how it ended
  pod show 3f2a                              # history and todos (an id prefix is enough)
  pod resume 3f2a                            # continue the unfinished plan after a crash
  pod fork 3f2a --at 12                      # branch off before item 12
  pod prune --older-than 30d                 # delete sessions untouched for 30 days
  pod replay 3f2a --hooks new-hooks.json     # would it have gone the same?
  pod submit --store postgres://db/pod --yes \"Fix the build\"   # queue it for a fleet
  pod serve --store postgres://db/pod --workers 4           # a fleet worker

Sessions live in $POD_HOME/sessions/<id>/ (POD_HOME defaults to
$XDG_DATA_HOME/pod, then ~/.local/share/pod), or in the PostgreSQL
database --store or POD_STORE names.
Exit codes: 0 done, 1 error, 2 usage, 3 stopped with work left (a budget,
--max-turns or the loop guard; `pod resume ID` continues), 4 `pod replay`
found a divergence, 130 interrupted
(Ctrl-C, end of input at a prompt), 141 stdout closed.";

/// Every state `pod sessions` shows and `--status` takes, in a line each.
const SESSION_STATES: &str = "\
States:
  running            a process or a fleet worker has it open
  awaiting_approval  a tool call waits for a person's answer (`pod approve`)
  answered           its question was answered while it was parked; the call
                     runs when the session continues
  queued             submitted to a fleet, waiting for a worker
  waiting            parked on a follow-up the agent scheduled
                     (schedule_followup); a fleet worker continues it then
  idle               nothing happened yet, or the model answered with todos left
  done               the model answered and its plan, if any, is complete (and
                     its --verify checks passed)
  stopped            a budget, --max-turns or the loop guard ended its last run
  failed             its last run failed: the provider's error, an abort
  cancelled          someone cancelled its last run (the API, the dashboard, an
                     editor)
  interrupted        its last run was cut short: Ctrl-C, or its process died
                     mid-turn (a crash, a kill)
  unverified         the model answered, but its --verify checks kept failing
  forked             made by `pod fork` and not run since
  rewound            made by `pod rewind` and not run since
  damaged            its log cannot be read (a damaged line); `pod fork ID --at N`
                     saves the items before it

`pod resume ID` continues a session nobody runs; a done one takes a new prompt
(`pod resume ID \"...\"`).";

/// Run long-lived LLM agents whose sessions survive crashes.
///
/// Every session is an append-only log; its todo plan is rebuilt from that
/// log, so a killed run resumes where it stopped.
#[derive(Debug, Parser)]
#[command(name = "pod", version, after_help = AFTER_HELP, propagate_version = true)]
pub struct Cli {
    /// The command to run.
    #[command(subcommand)]
    pub command: Command,
    /// Logging and output options shared by every command.
    #[command(flatten)]
    pub global: GlobalArgs,
}

/// Options every command takes.
#[derive(Debug, Args)]
pub struct GlobalArgs {
    /// More diagnostics on stderr (-v info, -vv debug, -vvv trace); RUST_LOG overrides.
    #[arg(short, long, action = clap::ArgAction::Count, global = true)]
    pub verbose: u8,
    /// Write diagnostics to this file instead of stderr.
    #[arg(long, value_name = "FILE", global = true)]
    pub log_file: Option<PathBuf>,
    /// Diagnostics as text, or as JSON: one object per line (time, level,
    /// target, fields, the spans it happened in), for a log collector.
    #[arg(long, value_name = "FORMAT", global = true, default_value = "text")]
    pub log_format: LogFormat,
    /// Where sessions live: a PostgreSQL URL (postgres://…) shared by a
    /// fleet, or a directory; default: the files under POD_HOME.
    #[arg(long, value_name = "URL", global = true, env = "POD_STORE")]
    pub store: Option<String>,
}

/// How diagnostics are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    /// Lines for people.
    Text,
    /// One JSON object per line.
    Json,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Watch a scripted agent plan, get killed, resume from its log and finish.
    ///
    /// Needs no key and no network: the model is the embedded scripted one.
    /// It runs in its own temporary POD_HOME and workspace and removes both
    /// at the end, so it leaves nothing among your sessions.
    Demo(DemoArgs),
    /// Start a new session on a task.
    #[command(after_help = "Examples:
  pod run --provider scripted --script plan.json \"Add a --json flag\"
  pod run --profile ollama --workspace ~/src/app \"Fix the failing test\"
  pod run --until-done --max-turns 20 --json \"Migrate the config\" | jq .event
  pod run --yes --deny bash --until-done \"Fix the typos in docs/\"
  pod run --task-file task.md --until-done --max-run-tokens 5000000
  cat task.md | pod run --until-done -

write_file, edit_file and bash ask first: on a terminal pod prompts on stderr
(y once, a always, n no, N never); elsewhere (a pipe, --json) they are refused
unless allowed with --yes, --allow TOOL or [approval] in the config file.")]
    Run(RunArgs),
    /// Continue a session, after a crash too.
    ///
    /// Without TEXT the model continues its unfinished plan; with TEXT it
    /// gets new instructions. The session starts the way it was started
    /// (model, approval flags, --until-done, budgets), each run with a fresh
    /// budget; flags given here override: --profile, --provider or --script
    /// replace the recorded model, --model/--base-url change one setting of
    /// it, approval flags replace the recorded ones.
    #[command(after_help = "Examples:
  pod resume 3f2a
  pod resume 3f2a \"Also update the changelog\"
  pod resume 3f2a --profile claude --max-run-tokens 2000000")]
    Resume(ResumeArgs),
    /// List sessions with their status and todo progress.
    ///
    /// Most recently updated first, each subagent's session under the one
    /// that started it. A failed, cancelled, interrupted or damaged
    /// session has a reason (`--json` gives it whole).
    #[command(after_help = SESSION_STATES)]
    Sessions(SessionsArgs),
    /// Print a session's history and its current todos.
    ///
    /// Reminders, notifications and compaction boundaries are marked. Read
    /// only: works on running sessions too.
    Show(ShowArgs),
    /// Start a new session from the first N items of another.
    ///
    /// Its todos are what replaying those items gives, so forking from
    /// before a plan change brings the older plan back. The source is
    /// untouched.
    Fork(ForkArgs),
    /// Show what a session changed in its workspace, as a unified diff.
    ///
    /// From the checkpoints taken before and after each call that may
    /// change files; --from N and --to M take item numbers as `pod show`
    /// prints them (the files as they were after that many items).
    Diff(DiffArgs),
    /// Put the workspace's files back as they were after item N, and fork
    /// the session there (`pod fork --at N`).
    ///
    /// Refuses when files were changed outside the session since item N
    /// (it lists them), unless --force. Files neither snapshot holds
    /// (ignored ones, ones made outside the session) are left alone.
    Rewind(RewindArgs),
    /// Serve the Agent Client Protocol on stdio, for editors such as Zed.
    ///
    /// Each editor session is a Pod in the editor's project directory; its
    /// todo list shows as the editor's plan. Takes the model flags of `run`.
    Acp(AcpArgs),
    /// Delete sessions.
    ///
    /// Asks first on a terminal; --yes skips the question (and is needed
    /// when stdin is not a terminal). A running session is never deleted.
    Rm(RmArgs),
    /// Answer a question a session waits on: allow or deny the tool call
    /// it asked about, once (allow, deny) or for the rest of the session
    /// (always, never).
    ///
    /// Works from any machine that reaches the store, for a session parked
    /// on its question (by `pod serve`, a fleet worker, or a resume that
    /// nobody could answer). The answer is recorded in the session's log;
    /// on a fleet the session goes back to the queue and a worker runs the
    /// call, on the file store `pod resume ID` does. Two answers race: one
    /// wins, the other is told.
    #[command(after_help = "Examples:
  pod approve 3f2a allow                 # the session's one open question
  pod approve 3f2a call_7 never          # a question about call call_7
  pod sessions                           # status awaiting_approval lists them")]
    Approve(ApproveArgs),
    /// Show or raise a session's limits: money, wall time, requests and
    /// tokens over its whole life.
    ///
    /// The limits are recorded in the session's log, so every later start
    /// (a resume, a crash's, another fleet worker's) holds them. Raising
    /// one a session was stopped by lets it go on: on a fleet it goes
    /// back to the queue and a worker continues it; on the file store
    /// `pod resume ID` does. Works while no process runs the session.
    #[command(after_help = "Examples:
  pod budget 3f2a                        # its limits
  pod budget 3f2a --max-cost 5           # raise its money limit to 5
  pod budget 3f2a --max-wall 8h --max-session-requests 2000")]
    Budget(BudgetCmdArgs),
    /// Replay a session's recorded model answers through today's runtime,
    /// tools, hooks and config, and report where it first goes otherwise.
    ///
    /// No model and no network: the answers in the log are played by the
    /// scripted model, in a scratch copy of the workspace as the session's
    /// first checkpoint holds it (or of --workspace DIR), with a scratch
    /// POD_HOME, so nothing is added to your sessions. Every record is
    /// compared (tool calls approved or refused, results, reminders,
    /// compactions, the plan after each todo_write, budget stops); ids,
    /// times and paths that differ by nature are normalised
    /// (docs/replay.md). A subagent's session is checked under its
    /// parent's. Exit code 0 when every session replays identically, 4 when
    /// one diverges, 1 when one cannot be replayed.
    #[command(after_help = "Examples:
  pod replay 3f2a                        # the same calls, results and plan?
  pod replay 3f2a --hooks hooks.json     # with this hook instead of the recorded ones
  pod replay 3f2a --workspace ~/src/app  # with this version of the code
  pod replay --dir ./corpus --json       # every session of a directory, a line each")]
    Replay(ReplayArgs),
    /// Delete sessions that were not updated for a while.
    #[command(after_help = "Examples:
  pod prune --older-than 30d --dry-run   # list what would go
  pod prune --older-than 12h --yes")]
    Prune(PruneArgs),
    /// Queue a session for a fleet of `pod serve` workers and print its id.
    ///
    /// Needs a PostgreSQL store (--store or POD_STORE). Takes `run`'s
    /// flags; they are recorded with the session, and the worker that runs
    /// it takes API keys from its own environment. The workspace must be
    /// reachable at the same path from every worker (a shared filesystem).
    #[command(after_help = "Examples:
  pod submit --store postgres://pod@db/pod --yes \"Fix the failing tests\"
  POD_STORE=postgres://pod@db/pod pod submit --profile work --task-file task.md
  pod submit --yes --from tasks.txt      # one session per line
  pod submit --from tasks.jsonl          # {\"task\": \"…\", \"workspace\": \"/src/a\", \"max_cost\": \"2\"}")]
    Submit(SubmitArgs),
    /// Run queued sessions as a fleet worker, and/or serve the HTTP API and
    /// web dashboard (--http).
    ///
    /// As a fleet worker it needs a PostgreSQL store. Each session is run with its recorded
    /// settings in until-done mode under a lease this worker renews; when
    /// a worker dies, another takes its sessions over once their leases
    /// run out and resumes them from their logs. Ctrl-C or SIGTERM stops
    /// the turns, gives unfinished sessions back to the queue and exits.
    #[command(after_help = "Examples:
  pod serve --store postgres://pod@db/pod --workers 4
  pod serve --store postgres://pod@db/pod --lease-ttl 10s --exit-when-idle
  pod serve --http 127.0.0.1:7700 --profile claude")]
    Serve(ServeArgs),
    /// Copy sessions between the file store and a PostgreSQL store.
    #[command(subcommand)]
    Store(StoreCommand),
    /// Start sessions by the clock: cron expressions in a time zone, or a
    /// fixed period. Needs a PostgreSQL store; `pod serve` workers fire
    /// each fire time once between them.
    #[command(subcommand)]
    Schedule(ScheduleCommand),
}

/// Which model answers.
#[derive(Debug, Clone, Default, Args)]
pub struct ModelArgs {
    /// A named profile from $XDG_CONFIG_HOME/pod/config.toml.
    #[arg(long, value_name = "NAME")]
    pub profile: Option<String>,
    /// The provider kind (overrides the profile's).
    #[arg(long, value_enum, value_name = "KIND")]
    pub provider: Option<ProviderKindArg>,
    /// Script of the scripted model (with --provider scripted); see README.
    #[arg(long, value_name = "FILE.json")]
    pub script: Option<PathBuf>,
    /// Base URL of an HTTP provider (overrides the profile's).
    #[arg(long, value_name = "URL")]
    pub base_url: Option<String>,
    /// Model id (overrides the profile's).
    #[arg(long, value_name = "MODEL")]
    pub model: Option<String>,
}

impl ModelArgs {
    /// What they ask of the launcher.
    pub fn flags(&self) -> pod_launch::ModelFlags {
        pod_launch::ModelFlags {
            profile: self.profile.clone(),
            provider: self.provider.map(Into::into),
            script: self.script.clone(),
            base_url: self.base_url.clone(),
            model: self.model.clone(),
        }
    }
}

/// Provider kinds on the command line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ProviderKindArg {
    /// The deterministic scripted model: needs --script FILE.json.
    Scripted,
    /// An OpenAI-compatible Chat Completions API.
    Openai,
    /// OpenAI's Responses API (each request sends only the new items).
    #[value(name = "openai-responses")]
    OpenaiResponses,
    /// The Anthropic Messages API.
    Anthropic,
}

impl From<ProviderKindArg> for pod_providers::ProviderKind {
    fn from(kind: ProviderKindArg) -> Self {
        use pod_providers::ProviderKind;
        match kind {
            ProviderKindArg::Scripted => ProviderKind::Scripted,
            ProviderKindArg::Openai => ProviderKind::OpenAi,
            ProviderKindArg::OpenaiResponses => ProviderKind::OpenAiResponses,
            ProviderKindArg::Anthropic => ProviderKind::Anthropic,
        }
    }
}

/// How a session is driven: shared by `run` and `resume`.
#[derive(Debug, Clone, Args)]
pub struct DriveArgs {
    /// Print NDJSON events on stdout (one PodEvent per line) instead of text.
    #[arg(long)]
    pub json: bool,
    /// Keep going while todos are unfinished (autonomous mode).
    #[arg(long)]
    pub until_done: bool,
    /// When the log is fsynced: every item, at tool results and turn ends, or never.
    #[arg(long, value_enum, default_value_t = DurabilityArg::Turn)]
    pub durability: DurabilityArg,
}

/// The limits of a run (a prompt and every --until-done continuation):
/// shared by `run`, `resume` and `acp`. Each is laid over the session's
/// recorded budget (on resume), the profile's `budget` table, the config
/// file's `[budget]` table and the defaults.
#[derive(Debug, Clone, Default, Args)]
pub struct BudgetArgs {
    /// Model requests per turn (a turn ends when the model answers without
    /// tools; every --until-done continuation starts a fresh count) [default: 500].
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub max_requests: Option<u32>,
    /// With --until-done: at most this many continuations [default: no limit].
    #[arg(long, value_name = "N")]
    pub max_turns: Option<u32>,
    /// Model requests in the whole run [default: no limit].
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pub max_run_requests: Option<u64>,
    /// Tokens (prompt + completion, as the provider reports them) in the
    /// whole run [default: no limit].
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pub max_run_tokens: Option<u64>,
    /// Money the session and its subagents may spend over its whole life,
    /// across resumes, crashes and fleet workers, at the prices of the
    /// profile (`prices = {...}`, per million tokens, in their currency);
    /// recorded in the session's log [default: no limit].
    #[arg(long, value_name = "AMOUNT", value_parser = parse_cost)]
    pub max_cost: Option<pod_llm::Cost>,
    /// Money each run of the session and its subagents may spend together
    /// (recorded with the run's other limits)
    /// [default: no limit].
    #[arg(long, value_name = "AMOUNT", value_parser = parse_cost)]
    pub max_run_cost: Option<pod_llm::Cost>,
    /// Wall time from the session's creation after which it sends no
    /// request (90m, 2h, 1d); recorded [default: no limit].
    #[arg(long, value_name = "DURATION", value_parser = parse_wall)]
    pub max_wall: Option<u64>,
}

/// A positive duration, in seconds.
pub fn parse_wall(text: &str) -> Result<u64, String> {
    pod_launch::budget::parse_duration(text)
}

/// A positive amount of money.
pub fn parse_cost(text: &str) -> Result<pod_llm::Cost, String> {
    let amount: f64 = text
        .trim_start_matches('$')
        .parse()
        .map_err(|_| format!("`{text}` is not an amount (e.g. 5 or 2.50)"))?;
    match amount.is_finite() && amount > 0.0 {
        true => Ok(pod_llm::Cost::from_amount(amount)),
        false => Err(format!("`{text}`: the limit must be more than 0")),
    }
}

impl BudgetArgs {
    /// What they ask of the launcher.
    pub fn flags(&self) -> pod_launch::BudgetFlags {
        pod_launch::BudgetFlags {
            max_requests: self.max_requests,
            max_turns: self.max_turns,
            max_run_requests: self.max_run_requests,
            max_run_tokens: self.max_run_tokens,
            max_cost: self.max_cost,
            max_run_cost: self.max_run_cost,
            max_wall_secs: self.max_wall,
        }
    }
}

/// Which tool calls run without asking: shared by `run`, `resume` and `acp`.
///
/// Laid over the `[approval]` table of the config file, which is laid over
/// the defaults (reads and the plan allow; write_file, edit_file and bash
/// ask). --until-done does not imply --yes.
#[derive(Debug, Clone, Default, Args)]
pub struct ApprovalArgs {
    /// Allow every tool that would ask (write_file, edit_file, bash) without
    /// asking: the opt-in for unattended runs. A --deny still wins.
    #[arg(long, short = 'y')]
    pub yes: bool,
    /// Allow this tool without asking (repeatable).
    #[arg(long, value_name = "TOOL")]
    pub allow: Vec<String>,
    /// Refuse every call of this tool (repeatable); wins over --yes and --allow.
    #[arg(long, value_name = "TOOL")]
    pub deny: Vec<String>,
}

impl ApprovalArgs {
    /// What they ask of the launcher.
    pub fn flags(&self) -> pod::ApprovalFlags {
        pod::ApprovalFlags {
            yes: self.yes,
            allow: self.allow.clone(),
            deny: self.deny.clone(),
            ask: Vec::new(),
        }
    }
}

/// Where `bash` may write and whether it has the network: shared by `run`,
/// `resume` and `acp`.
///
/// Laid over the session's record (on resume), then the `[sandbox]` table
/// of the config file, then the default: workspace-write, network off.
#[derive(Debug, Clone, Default, Args)]
pub struct SandboxArgs {
    /// What commands may touch: workspace-write (read anywhere, write in
    /// the workspace and $TMPDIR), read-only, strict (read only the
    /// workspace and system paths) or off. Enforced by the kernel (Landlock);
    /// under a sandbox, bash runs without asking.
    #[arg(long, value_name = "MODE", value_parser = parse_sandbox_mode)]
    pub sandbox: Option<pod::SandboxMode>,
    /// Whether commands may use the network under the sandbox.
    #[arg(long, value_name = "on|off", value_parser = parse_on_off)]
    pub network: Option<bool>,
}

impl SandboxArgs {
    /// What they ask of the launcher.
    pub fn flags(&self) -> pod_launch::SandboxFlags {
        pod_launch::SandboxFlags {
            mode: self.sandbox,
            network: self.network,
        }
    }
}

fn parse_sandbox_mode(text: &str) -> Result<pod::SandboxMode, String> {
    text.parse()
        .map_err(|err: pod_tools::sandbox::UnknownMode| err.to_string())
}

fn parse_on_off(text: &str) -> Result<bool, String> {
    match text {
        "on" => Ok(true),
        "off" => Ok(false),
        other => Err(format!("`{other}` is not on or off")),
    }
}

/// `--durability` values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum DurabilityArg {
    /// fsync after every item.
    Always,
    /// fsync after tool results and at turn ends.
    Turn,
    /// Leave it to the OS.
    Never,
}

impl From<DurabilityArg> for pod::Durability {
    fn from(arg: DurabilityArg) -> Self {
        match arg {
            DurabilityArg::Always => pod::Durability::Always,
            DurabilityArg::Turn => pod::Durability::Turn,
            DurabilityArg::Never => pod::Durability::Never,
        }
    }
}

/// `pod run`.
#[derive(Debug, Args)]
#[command(group = clap::ArgGroup::new("the_task").required(true).args(["task", "task_file"]))]
pub struct RunArgs {
    /// The task; `-` reads it from stdin.
    #[arg(value_name = "TASK")]
    pub task: Option<String>,
    /// Read the task from this file.
    #[arg(long, value_name = "FILE")]
    pub task_file: Option<PathBuf>,
    /// The directory the agent works in.
    #[arg(long, value_name = "DIR")]
    pub workspace: Option<PathBuf>,
    /// Work in a new git worktree of the workspace's repository, on a new
    /// branch from its HEAD (pod/ID), so parallel agents never touch each
    /// other's files; `pod show` names the branch.
    #[arg(long)]
    pub worktree: bool,
    /// How the session runs.
    #[command(flatten)]
    pub session: SessionArgs,
    /// How to drive it.
    #[command(flatten)]
    pub drive: DriveArgs,
}

/// How a session runs: the one argument group `run`, `resume`, `acp` and
/// `submit` share, lowered to `pod_launch::Flags`.
#[derive(Debug, Clone, Default, Args)]
pub struct SessionArgs {
    /// The model.
    #[command(flatten)]
    pub model: ModelArgs,
    /// The limits of the run.
    #[command(flatten)]
    pub budget: BudgetArgs,
    /// Which tool calls run without asking.
    #[command(flatten)]
    pub approval: ApprovalArgs,

    #[command(flatten)]
    pub sandbox: SandboxArgs,

    #[command(flatten)]
    pub mcp: McpArgs,

    #[command(flatten)]
    pub goal: GoalArgs,

    #[command(flatten)]
    pub agent: agent::AgentArgs,
    /// Give the agent the schedule_followup tool: it may pause the session
    /// and have a fleet worker continue it later ("check CI again in
    /// 30m"). Only sessions run by `pod serve` workers can use it (`pod
    /// submit`); elsewhere a call is refused, saying so.
    #[arg(long)]
    pub followups: bool,
}

impl SessionArgs {
    /// What they ask of the launcher.
    pub fn flags(&self, until_done: bool) -> pod_launch::Flags {
        pod_launch::Flags {
            model: self.model.flags(),
            budget: self.budget.flags(),
            approval: self.approval.flags(),
            sandbox: self.sandbox.flags(),
            until_done,
            followups: self.followups,
            mcp_config: self.mcp.mcp_config.clone(),
            hooks: self.mcp.hooks.clone(),
            workspace_hooks: self.mcp.workspace_hooks,
            no_checkpoints: self.mcp.no_checkpoints,
            goal: self.goal.flags(),
            agent: self.agent.agent.clone(),
            instructions: self.agent.instructions(),
            system_prompt: self.agent.system_prompt(),
            workspace_agents: self.agent.workspace_agents,
        }
    }
}

/// MCP servers to attach, besides the config file's `[mcp_servers]`.
#[derive(Debug, Clone, Default, Args)]
pub struct McpArgs {
    /// An `{"mcpServers": {...}}` JSON file (the shape editors use);
    /// repeatable. Its servers' tools join the session as SERVER__TOOL and
    /// ask before they run unless --allow says otherwise.
    #[arg(long, value_name = "FILE")]
    pub mcp_config: Vec<PathBuf>,
    /// A Claude Code settings JSON file whose "hooks" run at the session's
    /// events (PreToolUse, Stop, …); repeatable. Read when the session
    /// starts; a resume runs the hooks it started with unless given again.
    #[arg(long, value_name = "FILE")]
    pub hooks: Vec<PathBuf>,
    /// Also run the hooks of the workspace's .claude/settings.json,
    /// .claude/settings.local.json and .pod/settings.json (they run outside
    /// the sandbox: only for a workspace you trust).
    #[arg(long)]
    pub workspace_hooks: bool,
    /// Take no snapshots of the workspace before and after the calls that
    /// may change it (they are what `pod diff` and `pod rewind` use).
    #[arg(long)]
    pub no_checkpoints: bool,
}

/// Parses an age such as `30d`, `12h`, `90m`, `45s` or `2w`.
pub fn parse_age(text: &str) -> Result<std::time::Duration, String> {
    let text = text.trim();
    let split = text
        .find(|c: char| !c.is_ascii_digit())
        .ok_or_else(|| format!("{text:?} has no unit: use s, m, h, d or w (e.g. 30d)"))?;
    let (number, unit) = text.split_at(split);
    let number: u64 = number
        .parse()
        .map_err(|_| format!("{text:?} does not start with a number (e.g. 30d)"))?;
    let seconds = match unit {
        "s" => 1,
        "m" => 60,
        "h" => 3_600,
        "d" => 86_400,
        "w" => 604_800,
        other => return Err(format!("unknown unit {other:?}: use s, m, h, d or w")),
    };
    number
        .checked_mul(seconds)
        .map(std::time::Duration::from_secs)
        .ok_or_else(|| format!("{text:?} is too long"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn ages_take_a_number_and_a_unit() {
        assert_eq!(parse_age("30d"), Ok(Duration::from_secs(30 * 86_400)));
        assert_eq!(parse_age("12h"), Ok(Duration::from_secs(12 * 3_600)));
        assert_eq!(parse_age("0s"), Ok(Duration::ZERO));
        assert!(parse_age("30").unwrap_err().contains("no unit"));
        assert!(parse_age("d").unwrap_err().contains("number"));
        assert!(parse_age("3y").unwrap_err().contains("unknown unit"));
    }
}
