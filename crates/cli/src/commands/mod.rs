//! One module per subcommand, each with a `run` function taking its
//! arguments; `dispatch` is one line per command.

pub mod acp;
mod demo;
mod fork;
pub mod prune;
mod resume;
mod rm;
mod run;
mod sessions;
mod show;

use crate::cli::{Command, GlobalArgs};
use crate::error::Outcome;
use anyhow::Result;

/// Runs the chosen command.
pub async fn dispatch(command: Command, global: &GlobalArgs) -> Result<Outcome> {
    let place = || Place::resolve(global);
    match command {
        Command::Acp(args) => acp::run(args, place()?).await,
        Command::Demo(args) => demo::run(args).await,
        Command::Run(args) => run::run(args, place()?).await,
        Command::Resume(args) => resume::run(args, place()?).await,
        Command::Sessions(args) => sessions::run(args, place()?).await,
        Command::Show(args) => show::run(args, place()?).await,
        Command::Fork(args) => fork::run(args, place()?).await,
        Command::Rm(args) => rm::run(args, place()?).await,
        Command::Prune(args) => prune::run(args, place()?).await,
    }
}

/// Where a command finds sessions: pod's home (scratch directories, and
/// the session logs of the file store) and the store of session logs.
#[derive(Clone)]
pub struct Place {
    /// `POD_HOME` or its default.
    pub home: pod::PodHome,
    /// The file store under `home`, or the one `--store` names.
    pub store: pod::Store,
}

impl Place {
    fn resolve(global: &GlobalArgs) -> Result<Self> {
        let home = pod::PodHome::from_env()?;
        let store = crate::store::open(global.store.as_deref(), &home)?;
        Ok(Self { home, store })
    }
}
