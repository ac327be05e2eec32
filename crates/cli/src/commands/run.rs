//! `pod run`: a new session on a task.

use crate::approval;
use crate::cli::RunArgs;
use crate::drive::{drive, FirstTurn};
use crate::error::{Failure, Outcome};
use crate::output::{self, Started};
use crate::settings::{Flags, RunSettings};
use anyhow::{bail, Context, Result};
use pod::Pod;
use std::io::Read;
use std::path::{Path, PathBuf};

/// Starts a session and drives it.
pub async fn run(args: RunArgs, place: super::Place) -> Result<Outcome> {
    if args.budget.max_turns.is_some() && !args.drive.until_done {
        // Continuations only happen in until-done mode (a resumed session
        // may have it recorded, so only `run` insists).
        use clap::CommandFactory;
        crate::cli::Cli::command()
            .error(
                clap::error::ErrorKind::MissingRequiredArgument,
                "--max-turns limits the continuations of --until-done: add --until-done",
            )
            .exit();
    }
    let workspace = workspace(args.workspace.as_deref())?;
    let task = task(args.task.as_deref(), args.task_file.as_deref())?;
    let settings = RunSettings::resolve(
        &Flags {
            model: &args.model,
            budget: &args.budget,
            approval: &args.approval,
            sandbox: &args.sandbox,
            until_done: args.drive.until_done,
        },
        None,
    )?;
    if let Some(warning) = crate::sandbox::warning(&settings.sandbox) {
        eprintln!("{warning}");
    }
    let mut config = settings.pod_config(&place, workspace, args.drive.durability.into());
    let servers = crate::mcp::configs(
        &settings.file,
        settings.choice.raw.mcp_servers.as_ref(),
        &args.mcp,
        &[],
    )?;
    let mcp = crate::mcp::attach(servers, &mut config, settings.approval_flags.yes).await;
    let mut launch = settings.launch();
    launch.mcp_servers = crate::mcp::recorded(&mcp);
    config.launch = launch.to_json();
    let asks = approval::attach(&mut config, args.drive.json);
    let model_name = config.provider.model_name();
    let handle = Pod::spawn(config)
        .await
        .context("cannot start the session")?;
    let started = Started {
        session_id: handle.session_id(),
        log_path: place.store.log_location(handle.session_id()),
        store: place.store.clone(),
        resumed: false,
        model: model_name,
    };
    let mut out = output::for_flags(args.drive.json);
    let outcome = drive(
        handle,
        started,
        FirstTurn::Prompt(task),
        settings.until_done,
        out.as_mut(),
        asks,
    )
    .await;
    mcp.shutdown().await;
    outcome
}

/// The task: the argument, stdin for `-`, or the file's contents.
pub fn task(arg: Option<&str>, file: Option<&Path>) -> Result<String> {
    let text = match (arg, file) {
        (_, Some(path)) => std::fs::read_to_string(path)
            .with_context(|| format!("cannot read the task file {}", path.display()))?,
        (Some("-"), None) => {
            let mut text = String::new();
            std::io::stdin()
                .read_to_string(&mut text)
                .context("cannot read the task from stdin")?;
            text
        }
        (Some(text), None) => text.to_string(),
        // clap requires one of them.
        (None, None) => String::new(),
    };
    if text.trim().is_empty() {
        bail!(Failure::new(
            "the task is empty",
            "give it as an argument, with --task-file FILE, or on stdin with `pod run -`"
        ));
    }
    Ok(text)
}

/// The workspace: `dir` or the current directory, made absolute.
pub fn workspace(dir: Option<&Path>) -> Result<PathBuf> {
    let dir = match dir {
        Some(dir) => dir.to_path_buf(),
        None => std::env::current_dir().context("cannot read the current directory")?,
    };
    if !dir.is_dir() {
        bail!(Failure::new(
            format!("workspace {} is not a directory", dir.display()),
            "pass an existing directory with --workspace DIR"
        ));
    }
    dir.canonicalize()
        .with_context(|| format!("cannot resolve workspace {}", dir.display()))
}
