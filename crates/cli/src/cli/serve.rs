//! The arguments of the front ends and the fleet: `pod serve`, `pod acp`,
//! `pod submit`, `pod store`, `pod demo`.

use super::*;

/// `pod store`.
#[derive(Debug, Subcommand)]
pub enum StoreCommand {
    /// Copy file-store sessions (POD_HOME, or --from DIR) into the
    /// PostgreSQL store, each verified record by record.
    #[command(after_help = "Example:
  pod store import --store postgres://pod@db/pod")]
    Import(ImportArgs),
    /// Copy sessions of the PostgreSQL store into a file store (POD_HOME,
    /// or --to DIR), each verified record by record.
    #[command(after_help = "Example:
  pod store export --store postgres://pod@db/pod --to ./backup")]
    Export(ExportArgs),
}

/// `pod store import`.
#[derive(Debug, Args)]
pub struct ImportArgs {
    /// Sessions to copy (unique prefixes are enough); all when none.
    #[arg(value_name = "ID")]
    pub ids: Vec<String>,
    /// The file store to import from (default: POD_HOME).
    #[arg(long, value_name = "DIR")]
    pub from: Option<PathBuf>,
}

/// `pod store export`.
#[derive(Debug, Args)]
pub struct ExportArgs {
    /// Sessions to copy (unique prefixes are enough); all when none.
    #[arg(value_name = "ID")]
    pub ids: Vec<String>,
    /// The file store to export to (default: POD_HOME).
    #[arg(long, value_name = "DIR")]
    pub to: Option<PathBuf>,
}

/// `pod serve`.
#[derive(Debug, Args)]
pub struct ServeArgs {
    /// Sessions this worker runs at once (no fixed limit: a waiting
    /// session costs tens of kilobytes and no database connection; the
    /// model's rate limits are the limit, see docs/fleet.md). Clamped to
    /// what the process's open-file limit serves; the rest stay queued.
    #[arg(long, value_name = "N", default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..))]
    pub workers: u32,
    /// How long a lease lasts unless renewed (renewed every third of it):
    /// a dead worker's sessions move on this long after it died.
    #[arg(long, value_name = "AGE", value_parser = parse_age)]
    pub lease_ttl: Option<std::time::Duration>,
    /// The most PostgreSQL connections this process opens, for all its
    /// sessions together (default 16): sessions share them, so several
    /// workers fit a default server's max_connections (100).
    #[arg(long, value_name = "N", value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..=1000))]
    pub db_connections: Option<usize>,
    /// How long sessions wait for an unreachable database before they fail
    /// (default: as long as it takes; they pause meanwhile, and `pod
    /// serve` started while the database is down waits for it).
    #[arg(long, value_name = "AGE", value_parser = parse_age)]
    pub db_outage_limit: Option<std::time::Duration>,
    /// Notify (the `[notify]` table's webhook or command) when the database
    /// has been unreachable this long, and again when it is back; 0s
    /// turns it off.
    #[arg(long, value_name = "AGE", value_parser = parse_age, default_value = "1m")]
    pub db_outage_notify_after: std::time::Duration,
    /// Exit once every fleet session is idle (none queued, none running).
    #[arg(long)]
    pub exit_when_idle: bool,
    /// Serve the HTTP API and the web dashboard on this address (for
    /// example 127.0.0.1:7700; port 0 picks a free one). Works on both
    /// stores: the file store's sessions, or the whole fleet's.
    #[arg(long, value_name = "ADDR")]
    pub http: Option<std::net::SocketAddr>,
    /// The API's bearer token, from this file (required to bind an
    /// address other machines reach); by default one is made on first
    /// start and kept in POD_HOME/http-token.
    #[arg(long, value_name = "FILE", requires = "http")]
    pub token_file: Option<PathBuf>,
    /// A directory API clients may put workspaces in (repeatable; with
    /// `[http] workspace_roots`); default: the directory pod serve runs in.
    #[arg(long, value_name = "DIR", requires = "http")]
    pub workspace_root: Vec<PathBuf>,
    /// The model of sessions the API creates without naming a profile.
    #[command(flatten)]
    pub model: ModelArgs,
    /// With --http: what sessions the API starts get, and the most any
    /// request may ask for (it may narrow, never widen: --yes, --allow,
    /// --sandbox off and --network on must be given here to be allowed).
    #[command(flatten, next_help_heading = "Sessions started through the API")]
    pub approval: ApprovalArgs,
    /// The sandbox of sessions the API starts, and the widest allowed.
    #[command(flatten, next_help_heading = "Sessions started through the API")]
    pub sandbox: SandboxArgs,
}

/// `pod acp`.
#[derive(Debug, Args)]
pub struct AcpArgs {
    /// How every session runs (the model, limits of each prompt's run,
    /// which calls run without asking the editor, the sandbox, MCP servers
    /// besides the config file's and the editor's own).
    #[command(flatten)]
    pub session: SessionArgs,
}

/// `pod demo` (it always plays the same story).
#[derive(Debug, Args)]
pub struct DemoArgs {
    /// Keep the demo's temporary directory (its POD_HOME and workspace) and
    /// print how to look at its session.
    #[arg(long)]
    pub keep: bool,
}

/// `pod submit`.
#[derive(Debug, Args)]
#[command(args_override_self = true)]
pub struct SubmitArgs {
    /// Queue one session per line of FILE (`-`: stdin), all or none: a
    /// line is a task, or a JSON object with "task" and any of these
    /// flags by their long names ("workspace", "profile", "max_cost",
    /// "allow": [...], "yes": true, …), which override the command line's.
    #[arg(long, value_name = "FILE", group = "the_task")]
    pub from: Option<PathBuf>,
    /// The session, as `pod run` takes it.
    #[command(flatten)]
    pub run: RunArgs,
}
