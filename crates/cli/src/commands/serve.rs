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
use crate::error::{Failure, Outcome};
use anyhow::{bail, Context, Result};
use pod::log::{LogRecord, SessionHeader};
use pod::CancellationToken;
use pod::Item;
use pod_launch::Model;
use pod_store_pg::PgStore;
use std::sync::Arc;
use uuid::Uuid;

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
    let mut plan = place
        .launcher()
        .plan(&args.session.flags(true), workspace.clone())?;
    let workspace = match args.worktree {
        true => plan.use_worktree().await?.workspace,
        false => workspace,
    };
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
    // One launcher for the API's sessions and the worker's: one outbox of
    // notifications to wait for at the end.
    let launcher = place.launcher();
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
            let (runner, bound) = pod_http::start(options, launcher.clone()).await?;
            crate::tracing_setup::otlp_metrics(&runner)?;
            crate::output::print(&format!("{}\n", bound.banner().join("\n")))?;
            let http = tokio::spawn(bound.serve(runner.clone(), stop.clone()));
            (Some(runner), Some(http))
        }
        None => (None, None),
    };
    let outcome = match (&place.fleet, http) {
        (Some(_), http) => {
            let outcome = work(&args, &place, &launcher, runner, stop.clone()).await;
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
    super::flush_notifications(launcher.outbox()).await;
    outcome
}

/// Runs the fleet worker until `stop` (or the fleet is idle, with
/// `--exit-when-idle`), printing what it does.
async fn work(
    args: &ServeArgs,
    place: &Place,
    launcher: &pod_launch::Launcher,
    runner: Option<pod_http::Runner>,
    stop: CancellationToken,
) -> Result<Outcome> {
    let worker = pod_fleet::Worker {
        store: fleet(place, "serve")?,
        launcher: launcher.clone(),
        slots: args.workers,
        exit_when_idle: args.exit_when_idle,
        api: runner.map(|runner| Arc::new(Api(runner)) as Arc<dyn pod_fleet::Api>),
    };
    worker
        .run(stop, |report| {
            let _ = crate::output::print(&format!("{report}\n"));
        })
        .await;
    Ok(Outcome::Done)
}

/// The HTTP API of this process, where the worker's sessions ask.
struct Api(pod_http::Runner);

impl pod_fleet::Api for Api {
    fn approver(&self, id: Uuid) -> Arc<dyn pod::Approver> {
        self.0.approver(id)
    }

    fn adopt(&self, id: Uuid, handle: pod::PodHandle, prices: Option<pod_llm::Prices>) {
        self.0.adopt(id, handle, prices);
    }

    fn release(&self, id: Uuid) {
        self.0.release(id);
    }
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
