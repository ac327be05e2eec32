//! One module per subcommand, each with a `run` function taking its
//! arguments; `dispatch` is one line per command.

pub mod acp;
mod approve;
mod budget;
mod checkpoints;
mod demo;
mod fork;
pub mod prune;
mod replay;
mod resume;
mod rm;
mod run;
mod schedule;
mod schedule_api;
mod schedule_files;
mod serve;
mod sessions;
mod show;
mod submit;
mod transfer;

use crate::cli::{Command, GlobalArgs};
use crate::error::Outcome;
use anyhow::Result;

/// Runs the chosen command.
pub async fn dispatch(command: Command, global: &GlobalArgs) -> Result<Outcome> {
    let place = || Place::resolve(global, crate::store::Tuning::default());
    match command {
        Command::Acp(args) => acp::run(args, place().await?).await,
        Command::Demo(args) => demo::run(args).await,
        Command::Run(args) => run::run(args, place().await?).await,
        Command::Resume(args) => resume::run(args, place().await?).await,
        Command::Sessions(args) => sessions::run(args, place().await?).await,
        Command::Show(args) => show::run(args, place().await?).await,
        Command::Fork(args) => fork::run(args, place().await?).await,
        Command::Diff(args) => checkpoints::diff(args, place().await?).await,
        Command::Rewind(args) => checkpoints::rewind(args, place().await?).await,
        Command::Rm(args) => rm::run(args, place().await?).await,
        Command::Approve(args) => approve::run(args, place().await?).await,
        Command::Budget(args) => budget::run(args, place().await?).await,
        Command::Prune(args) => prune::run(args, place().await?).await,
        Command::Replay(args) => replay::run(args, place().await?).await,
        Command::Store(command) => transfer::run(command, place().await?).await,
        Command::Submit(args) => submit::run(args, place().await?).await,
        Command::Schedule(command) => schedule::run(command, place().await?).await,
        Command::Serve(args) => {
            let tuning = crate::store::Tuning {
                lease_ttl: args.lease_ttl,
                connections: args.db_connections,
                outage_limit: args.db_outage_limit,
                wait_for_database: true,
            };
            let place = Place::resolve(global, tuning).await?;
            serve::serve(args, place).await
        }
    }
}

/// A session `run` or `resume` started, and the questions its terminal
/// approver asks (none when nobody can answer).
pub struct Launched {
    /// The session.
    pub session: pod_launch::Session,
    /// Its approver's questions.
    pub asks: crate::approval::terminal::Asks,
}

/// Starts a planned session for `run` or `resume`: says on stderr what the
/// user should know first (a sandbox that is not enforced, MCP servers that
/// did not start), with the terminal approver when one can answer.
pub async fn launch(plan: pod_launch::Plan, drive: &crate::cli::DriveArgs) -> Result<Launched> {
    if let Some(warning) = plan.settings.sandbox_warning() {
        let _ = crate::output::eprint(&format!("{warning}\n"));
    }
    let options = pod_launch::Options {
        durability: drive.durability.into(),
        ..Default::default()
    };
    let mut prepared = plan.prepare(options).await?;
    for warning in &prepared.warnings {
        let _ = crate::output::eprint(&format!("warning: {warning}\n"));
    }
    let asks = crate::approval::attach(&mut prepared.config, drive.json);
    let session = prepared.start().await?;
    Ok(Launched { session, asks })
}

/// How long a command about to exit waits for its notifications.
const NOTIFY_FLUSH: std::time::Duration = std::time::Duration::from_secs(5);

/// Waits a bounded time for notifications still being delivered (a
/// receiver that is down must not hold the exit), saying so if some are
/// not done.
pub async fn flush_notifications(outbox: &pod_notify::Outbox) {
    if !outbox.flush(NOTIFY_FLUSH).await {
        let _ = crate::output::eprint(&format!(
            "warning: {} notification(s) not delivered before exit (the receiver did not \
             answer in {}s)\n",
            outbox.in_flight(),
            NOTIFY_FLUSH.as_secs()
        ));
    }
}

/// Makes pod's home private (see [`pod::PodHome::secure`]): tightened when
/// it is pod's default location, warned about (once per process) when it
/// is the user's `POD_HOME`.
fn secure_home(home: &pod::PodHome) -> Result<()> {
    let ours = std::env::var_os("POD_HOME").is_none_or(|v| v.is_empty());
    match home.secure(ours)? {
        pod::HomeAccess::Open { mode } => {
            static SAID: std::sync::Once = std::sync::Once::new();
            SAID.call_once(|| {
                let _ = crate::output::eprint(&format!(
                    "warning: POD_HOME {} is open to other users (mode {mode:o}); what pod keeps \
                     in it is private (0700/0600), but its names show: chmod 700 {}\n",
                    home.path().display(),
                    home.path().display()
                ));
            });
        }
        pod::HomeAccess::Tightened { mode } => tracing::info!(
            home = %home.path().display(),
            "pod's home was open to other users (mode {mode:o}); made it 0700"
        ),
        pod::HomeAccess::Private => {}
    }
    Ok(())
}

/// Where a command finds sessions: pod's home (scratch directories, and
/// the session logs of the file store) and the store of session logs.
#[derive(Clone)]
pub struct Place {
    /// `POD_HOME` or its default.
    pub home: pod::PodHome,
    /// The file store under `home`, or the one `--store` names.
    pub store: pod::Store,
    /// The store again when it is PostgreSQL, for what only a fleet does.
    pub fleet: Option<pod_store_pg::PgStore>,
}

impl Place {
    /// The launcher for sessions here.
    pub fn launcher(&self) -> pod_launch::Launcher {
        pod_launch::Launcher::new(pod_launch::Place {
            home: self.home.clone(),
            store: self.store.clone(),
        })
    }

    async fn resolve(global: &GlobalArgs, tuning: crate::store::Tuning) -> Result<Self> {
        let home = pod::PodHome::from_env()?;
        secure_home(&home)?;
        let (home, store, fleet) =
            crate::store::open(global.store.as_deref(), home, tuning).await?;
        Ok(Self { home, store, fleet })
    }
}
