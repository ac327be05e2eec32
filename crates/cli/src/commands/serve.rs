//! `pod submit` and `pod serve`: a queue of sessions in PostgreSQL and the
//! workers that run them.
//!
//! A submitted session is a header recording how to run it (the `launch`
//! `pod run` records) and the task as its first user item, queued. A worker
//! claims it (taking its lease), resumes it as `pod resume` would with no
//! flags, in until-done mode, and continues its turn; the lease is renewed
//! while it runs and released at the end. A worker that dies leaves its
//! sessions leased until their leases run out; then any worker claims them
//! as orphans and resumes them from their logs.

use super::Place;
use crate::cli::{RunArgs, ServeArgs};
use crate::error::{chain, Failure, Outcome};
use anyhow::{bail, Context, Result};
use pod::log::{LogRecord, SessionHeader};
use pod::CancellationToken;
use pod::{Durability, Item, PodError, TurnEndReason};
use pod_launch::sessions as session;
use pod_launch::Model;
use pod_store_pg::{Claimed, PgStore, SessionState};
use std::time::Duration;
use tokio::task::JoinSet;
use uuid::Uuid;

/// How often an idle worker looks for work.
const POLL: Duration = Duration::from_millis(250);

fn fleet(place: &Place, command: &str) -> Result<PgStore> {
    match &place.fleet {
        Some(store) => Ok(store.clone()),
        None => bail!(Failure::new(
            format!("`pod {command}` needs a PostgreSQL store"),
            "pass --store postgres://USER@HOST/DB or set POD_STORE"
        )),
    }
}

/// Queues a session and prints its id.
pub async fn submit(args: RunArgs, place: Place) -> Result<Outcome> {
    let store = fleet(&place, "submit")?;
    let workspace = super::run::workspace(args.workspace.as_deref())?;
    let task = super::run::task(args.task.as_deref(), args.task_file.as_deref())?;
    // A fleet runs every session until its plan is done. Resolved without
    // the API key: the worker that runs the session reads it from its own
    // environment.
    let plan = place
        .launcher()
        .plan(&args.session.flags(true), workspace.clone())?;
    let model_name = match Model::from_choice(&plan.settings.choice) {
        Ok(model) => model.provider.model_name(),
        Err(err) if is_missing_key(&err) => plan
            .settings
            .choice
            .raw
            .model
            .clone()
            .unwrap_or_else(|| "unknown".into()),
        Err(err) => return Err(err.into()),
    };
    let id = Uuid::new_v4();
    // The servers are started by the worker; their settings are recorded
    // here (the config file's and --mcp-config's, no env values).
    let mut header = SessionHeader::new(id, model_name, workspace);
    header.launch = plan.record()?.to_json();
    store
        .submit(&header, &[LogRecord::Item(Item::user(task))])
        .await
        .context("cannot queue the session")?;
    let line = match args.drive.json {
        true => format!("{}\n", serde_json::json!({ "session_id": id })),
        false => format!("{id}\n"),
    };
    crate::output::print(&line)?;
    Ok(Outcome::Done)
}

/// Runs fleet sessions until stopped (or, with `--exit-when-idle`, until
/// the fleet has nothing left).
pub async fn serve(args: ServeArgs, place: Place) -> Result<Outcome> {
    let stop = CancellationToken::new();
    spawn_signal_watch(stop.clone());
    let (runner, http) = match args.http {
        Some(addr) => {
            let options = pod_http::ServeOptions {
                addr,
                token_file: args.token_file.clone(),
                workspace_roots: args.workspace_root.clone(),
                model: args.model.flags(),
                approval: args.approval.flags(),
                sandbox: args.sandbox.flags(),
            };
            let (runner, bound) = pod_http::start(options, place.launcher()).await?;
            crate::output::print(&format!("{}\n", bound.banner().join("\n")))?;
            let http = tokio::spawn(bound.serve(runner.clone(), stop.clone()));
            (Some(runner), Some(http))
        }
        None => (None, None),
    };
    let outcome = match (&place.fleet, http) {
        (Some(_), http) => {
            let outcome = work(&args, &place, runner, stop.clone()).await;
            stop.cancel();
            if let Some(http) = http {
                http.await.context("the HTTP server's task failed")?;
            }
            outcome
        }
        (None, Some(http)) => {
            // The file store has no queue: the server runs what the API starts.
            http.await.context("the HTTP server's task failed")?;
            Ok(Outcome::Done)
        }
        (None, None) => {
            fleet(&place, "serve")?;
            Ok(Outcome::Done)
        }
    };
    outcome
}

/// Claims and runs fleet sessions until `stop` (or, with
/// `--exit-when-idle`, until the fleet has nothing left).
async fn work(
    args: &ServeArgs,
    place: &Place,
    runner: Option<pod_http::Runner>,
    stop: CancellationToken,
) -> Result<Outcome> {
    let store = fleet(place, "serve")?;
    say(&format!(
        "pod serve: worker {} on {}, {} at a time, leases of {}s",
        store.owner(),
        pod::SessionStore::location(&store),
        args.workers,
        store.lease_ttl().as_secs_f64()
    ));
    let mut running: JoinSet<(Uuid, Result<String>)> = JoinSet::new();
    loop {
        while running.len() < args.workers as usize && !stop.is_cancelled() {
            match store.claim().await {
                Ok(Some(claimed)) => {
                    say(&format!(
                        "claimed {} ({})",
                        claimed.id,
                        if claimed.orphaned {
                            "its worker died"
                        } else {
                            "queued"
                        }
                    ));
                    let (place, store, stop) = (place.clone(), store.clone(), stop.clone());
                    let runner = runner.clone();
                    running.spawn(async move {
                        let id = claimed.id;
                        (id, run_one(claimed, place, store, runner, stop).await)
                    });
                }
                Ok(None) => break,
                Err(err) => {
                    say(&format!("cannot claim: {}", chain(&err)));
                    break;
                }
            }
        }
        if stop.is_cancelled() && running.is_empty() {
            break;
        }
        if args.exit_when_idle && running.is_empty() && store.fleet_idle().await.unwrap_or(false) {
            say("pod serve: the fleet is idle; exiting");
            break;
        }
        tokio::select! {
            Some(joined) = running.join_next(), if !running.is_empty() => match joined {
                Ok((id, Ok(summary))) => say(&format!("finished {id}: {summary}")),
                Ok((id, Err(err))) => say(&format!("dropped {id}: {err:#}")),
                Err(err) => say(&format!("a session's task failed: {err}")),
            },
            _ = tokio::time::sleep(POLL) => {}
            _ = stop.cancelled(), if !stop.is_cancelled() => {
                say("pod serve: stopping; unfinished sessions go back to the queue");
            }
        }
    }
    Ok(Outcome::Done)
}

/// Runs one claimed session until its plan is done, it stops, or the worker
/// stops; returns a one-line summary.
async fn run_one(
    claimed: Claimed,
    place: Place,
    store: PgStore,
    runner: Option<pod_http::Runner>,
    stop: CancellationToken,
) -> Result<String> {
    let id = claimed.id;
    // Without the HTTP API nobody answers `ask` on a fleet worker: such
    // calls are refused with a message saying so, and the recorded
    // --yes/--allow decide the rest. With it, they wait for an answer there.
    let options = pod_launch::Options {
        durability: Durability::Turn,
        approver: runner.as_ref().map(|runner| runner.approver(id)),
        ..Default::default()
    };
    let prepared = match plan(id, &place).await {
        Ok(plan) => plan.prepare(options).await.map_err(anyhow::Error::new),
        Err(err) => Err(err),
    };
    let prepared = match prepared {
        Ok(prepared) => prepared,
        Err(err) => {
            // It cannot run here; idle, so that no worker claims it again
            // and again. `pod show` and `pod resume` still reach it.
            let _ = store.unclaim(id, SessionState::Idle).await;
            return Err(err);
        }
    };
    for warning in &prepared.warnings {
        tracing::warn!(session = %id, %warning, "MCP server");
    }
    let launched = match prepared.start().await {
        Ok(session) => session,
        Err(err) => {
            // A session that cannot be opened (a damaged log, say) must not
            // be claimed over and over; a database error may pass, so the
            // session stays for the next claim.
            if !matches!(err.pod_error(), Some(PodError::Store { .. })) {
                // Still claimed if it failed before opening the log.
                let _ = store.unclaim(id, SessionState::Idle).await;
                let _ = store.set_state(id, SessionState::Idle).await;
            }
            return Err(err.into());
        }
    };
    let (handle, mcp) = (launched.handle, launched.mcp);
    if let Some(runner) = &runner {
        runner.adopt(id, handle.clone());
    }
    let turn = handle.continue_turn();
    tokio::pin!(turn);
    let result = tokio::select! {
        result = &mut turn => result,
        _ = stop.cancelled() => {
            let _ = handle.cancel().await;
            turn.await
        }
    };
    let todos = handle.get_todos().await.unwrap_or_default();
    if let Some(runner) = &runner {
        runner.release(id);
    }
    let shutdown = handle.shutdown().await;
    mcp.shutdown().await;
    let progress = session::progress(&todos);
    let unfinished = progress.completed < progress.total;
    if stop.is_cancelled() && unfinished && shutdown.is_ok() {
        store
            .set_state(id, SessionState::Queued)
            .await
            .context("cannot give the session back to the queue")?;
        return Ok(format!(
            "stopped with {}/{} todos done; queued again",
            progress.completed, progress.total
        ));
    }
    match (result, shutdown) {
        (Err(PodError::LeaseLost { .. }), _) | (_, Err(PodError::LeaseLost { .. })) => {
            bail!("another worker took it over (this worker's lease ran out)")
        }
        (Err(err), _) => Err(anyhow::Error::new(err).context("the turn failed")),
        (Ok(outcome), shutdown) => {
            shutdown.context("cannot close the session")?;
            Ok(format!(
                "{}, {}/{} todos done, {} requests",
                reason(&outcome.reason),
                progress.completed,
                progress.total,
                outcome.requests
            ))
        }
    }
}

/// A claimed session's plan: its recorded settings, as `pod resume` would
/// use them with no flags, in until-done mode.
async fn plan(id: Uuid, place: &Place) -> Result<pod_launch::Plan> {
    let loaded = session::load(place.store.as_ref(), id).await?;
    let workspace = loaded.header.workspace.clone();
    if !workspace.is_dir() {
        bail!(
            "its workspace {} is not reachable from this worker (workspaces must be on a \
             filesystem every worker shares, at the same path)",
            workspace.display()
        );
    }
    if pod_launch::Launch::from_header(&loaded.header).is_none() {
        bail!("its log records no launch settings (it was not submitted with `pod submit`)");
    }
    let flags = pod_launch::Flags {
        until_done: true,
        ..Default::default()
    };
    Ok(place
        .launcher()
        .plan_resume(id, &flags, Some(workspace))
        .await?)
}

fn is_missing_key(err: &pod_launch::LaunchError) -> bool {
    matches!(
        err,
        pod_launch::LaunchError::Config {
            source: pod_providers::ConfigError::MissingKey(_),
            ..
        }
    )
}

fn reason(reason: &TurnEndReason) -> String {
    format!("{reason:?}").to_lowercase()
}

fn say(line: &str) {
    let _ = crate::output::print(&format!("{line}\n"));
}

/// Cancels `stop` on Ctrl-C or SIGTERM.
fn spawn_signal_watch(stop: CancellationToken) {
    tokio::spawn(async move {
        let interrupt = tokio::signal::ctrl_c();
        #[cfg(unix)]
        {
            let mut term =
                match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
                    Ok(term) => term,
                    Err(_) => {
                        let _ = interrupt.await;
                        stop.cancel();
                        return;
                    }
                };
            tokio::select! {
                _ = interrupt => {}
                _ = term.recv() => {}
            }
        }
        #[cfg(not(unix))]
        let _ = interrupt.await;
        stop.cancel();
    });
}
