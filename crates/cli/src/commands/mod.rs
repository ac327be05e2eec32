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

use crate::cli::Command;
use crate::error::Outcome;
use anyhow::Result;

/// Runs the chosen command.
pub async fn dispatch(command: Command) -> Result<Outcome> {
    match command {
        Command::Acp(args) => acp::run(args).await,
        Command::Demo(args) => demo::run(args),
        Command::Run(args) => run::run(args).await,
        Command::Resume(args) => resume::run(args).await,
        Command::Sessions(args) => sessions::run(args),
        Command::Show(args) => show::run(args),
        Command::Fork(args) => fork::run(args).await,
        Command::Rm(args) => rm::run(args),
        Command::Prune(args) => prune::run(args),
    }
}

/// The sessions' home from the environment.
fn home() -> Result<pod::PodHome> {
    Ok(pod::PodHome::from_env()?)
}
