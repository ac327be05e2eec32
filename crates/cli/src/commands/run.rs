//! `pod run`: a new session on a task.

use crate::cli::RunArgs;
use crate::drive::{drive, FirstTurn};
use crate::error::{Failure, Outcome};
use crate::output::{self, Started};
use anyhow::{bail, Context, Result};
use std::io::{IsTerminal, Read};
use std::path::{Path, PathBuf};
use uuid::Uuid;

/// Starts a session and drives it.
pub async fn run(args: RunArgs, place: super::Place) -> Result<Outcome> {
    if args.session.budget.max_turns.is_some() && !args.drive.until_done {
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
    let flags = args.session.flags(args.drive.until_done);
    let mut plan = place.launcher().plan(&flags, workspace)?;
    if args.worktree {
        let made = plan.use_worktree().await?;
        let _ = crate::output::eprint(&format!(
            "working in worktree {} on branch {}\n",
            made.path.display(),
            made.branch
        ));
    }
    let session = super::launch(plan, &args.drive).await?;
    let id = session.session.handle.session_id();
    let driven = drive_session(
        session,
        &place,
        FirstTurn::Prompt(task),
        false,
        args.drive.json,
    )
    .await;
    if driven.is_err() {
        forget_if_empty(&place, id).await;
    }
    driven
}

/// Removes new session `id` if its run failed having recorded nothing but
/// how it was started: its prompt was refused before it was sent (larger
/// than the context window), or an error came first. Such a session has no
/// task, nothing to resume and nothing to show, so keeping it would only
/// list an empty session. One that recorded its prompt stays, and its log
/// says why the run failed.
async fn forget_if_empty(place: &super::Place, id: Uuid) {
    match place.store.read(id).await {
        Ok(contents) if contents.records.is_empty() => {}
        _ => return,
    }
    match place.store.remove(id).await {
        // Nothing to do if stderr is closed: the error still follows.
        Ok(()) => drop(output::eprint(&format!(
            "pod: nothing was recorded, so session {id} is not kept\n"
        ))),
        Err(err) => {
            tracing::warn!(%id, err = %pod_llm::error_chain(&err), "cannot remove the empty session")
        }
    }
}

/// Drives a started session on `first`; its MCP servers stop at the end.
pub async fn drive_session(
    launched: super::Launched,
    place: &super::Place,
    first: FirstTurn,
    resumed: bool,
    json: bool,
) -> Result<Outcome> {
    let super::Launched { session, asks } = launched;
    let id = session.handle.session_id();
    let started = Started {
        session_id: id,
        log_path: place.store.log_location(id),
        store: place.store.clone(),
        resumed,
        model: session.model.clone(),
        prices: session.prices,
        key: session.key.clone(),
    };
    let mut out = output::for_flags(json);
    let outcome = drive(
        session.handle,
        started,
        first,
        session.until_done,
        out.as_mut(),
        asks,
    )
    .await;
    session.mcp.shutdown().await;
    super::flush_notifications(&session.notifications).await;
    outcome
}

/// The task: the argument, stdin for `-` (saying so on stderr when stdin is
/// a terminal), or the file's contents.
pub fn task(arg: Option<&str>, file: Option<&Path>) -> Result<String> {
    let text = match (arg, file) {
        (_, Some(path)) => std::fs::read_to_string(path)
            .with_context(|| format!("cannot read the task file {}", path.display()))?,
        (Some("-"), None) => {
            if std::io::stdin().is_terminal() {
                // Otherwise a terminal just waits, saying nothing.
                let _ = output::eprint("reading the task from stdin (end with Ctrl-D)\n");
            }
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
