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
use crate::cli::ServeArgs;
use crate::error::{Failure, Outcome};
use anyhow::{bail, Context, Result};
use pod::CancellationToken;
use pod_store_pg::PgStore;
use std::sync::Arc;
use uuid::Uuid;

pub(super) fn fleet(place: &Place, command: &str) -> Result<PgStore> {
    match &place.fleet {
        Some(store) => Ok(store.clone()),
        None => bail!(Failure::new(
            format!("`pod {command}` needs a PostgreSQL store"),
            "pass --store postgres://USER@HOST/DB or set POD_STORE"
        )),
    }
}

/// Runs fleet sessions until stopped (or, with `--exit-when-idle`, until
/// the fleet has nothing left).
pub async fn serve(args: ServeArgs, place: Place) -> Result<Outcome> {
    // One launcher for the API's sessions and the worker's: one outbox of
    // notifications to wait for at the end.
    let launcher = place.launcher();
    let stop = CancellationToken::new();
    spawn_signal_watch(stop.clone());
    // The API's connections, and its listener, hold files the sessions
    // cannot have.
    let mut http_connections = 0;
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
            http_connections = bound.max_connections() as u64 + 1;
            // With a fleet, the API's batches go to its queue, and the
            // Managed Agents API's resources to its database, where every
            // server of the fleet reads them.
            let runner = match &place.fleet {
                Some(store) => runner
                    .with_queue(Arc::new(FleetQueue(store.clone())))
                    .with_documents(Arc::new(FleetDocuments(store.clone()))),
                None => runner.with_schedule_files(Arc::new(ScheduleFiles(
                    pod_launch::schedules::Schedules::new(&place.home),
                ))),
            };
            crate::tracing_setup::otlp_metrics(&runner)?;
            crate::output::print(&format!("{}\n", bound.banner().join("\n")))?;
            let http = tokio::spawn(bound.serve(runner.clone(), stop.clone()));
            (Some(runner), Some(http))
        }
        None => (None, None),
    };
    let outcome = match (&place.fleet, http) {
        (Some(_), http) => {
            let outcome = work(
                &args,
                &place,
                &launcher,
                runner,
                http_connections,
                stop.clone(),
            )
            .await;
            stop.cancel();
            if let Some(http) = http {
                http.await.context("the HTTP server's task failed")?;
            }
            outcome
        }
        (None, Some(http)) => {
            // The file store has no queue: the server runs what the API
            // starts, and fires the home's schedules if no other does.
            let firing = fire_schedules(&launcher, runner, stop.clone(), false)?;
            http.await.context("the HTTP server's task failed")?;
            stop.cancel();
            if let Some(firing) = firing {
                firing.await.context("the schedules' task failed")?;
            }
            Ok(Outcome::Done)
        }
        (None, None) => {
            let schedules = pod_launch::schedules::Schedules::new(&place.home);
            if schedules.list()?.is_empty() {
                bail!(Failure::new(
                    "`pod serve` needs a PostgreSQL store, --http, or schedules to fire",
                    "pass --store postgres://USER@HOST/DB or set POD_STORE for a fleet, \
                     --http ADDR for the API, or `pod schedule add` first"
                ));
            }
            if let Some(firing) = fire_schedules(&launcher, None, stop.clone(), true)? {
                firing.await.context("the schedules' task failed")?;
            }
            Ok(Outcome::Done)
        }
    };
    super::flush_notifications(launcher.outbox()).await;
    outcome
}

/// Fires the file store's schedules in a task until `stop`, their
/// sessions shown by the API's `runner` when there is one; `None` (said on
/// stderr) when another `pod serve` holds the home's firing lock, or an
/// error if `must` (nothing else to serve).
fn fire_schedules(
    launcher: &pod_launch::Launcher,
    runner: Option<pod_http::Runner>,
    stop: CancellationToken,
    must: bool,
) -> Result<Option<tokio::task::JoinHandle<()>>> {
    let schedules = pod_launch::schedules::Schedules::new(&launcher.place().home);
    let lock = match schedules.lock_firing() {
        Ok(lock) => lock,
        Err(err) if !must => {
            crate::output::eprint(&format!("pod serve: {}\n", pod_llm::error_chain(&err)))?;
            return Ok(None);
        }
        Err(err) => return Err(err.into()),
    };
    crate::output::print("firing the schedules of this POD_HOME\n")?;
    let adopt = runner.map(|runner| Arc::new(Api(runner)) as Arc<dyn pod_launch::schedules::Adopt>);
    let firer = pod_launch::schedules::Firer::new(launcher.clone(), adopt);
    Ok(Some(tokio::spawn(async move {
        // Held while the loop runs: no other process fires these schedules.
        let _lock = lock;
        firer
            .run(stop, |fired| {
                let _ = crate::output::print(&format!("{fired}\n"));
            })
            .await;
    })))
}

/// Raises this process's soft limit of open files to its hard limit and
/// returns the limit now: each session waiting on its model holds a
/// connection, and distributions' default soft limit (1,024) would end a
/// worker's sessions long before its memory does.
fn raise_open_files() -> Option<u64> {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit and setrlimit read and write one plain struct we
    // own.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } != 0 {
        return None;
    }
    if limit.rlim_cur < limit.rlim_max {
        let raised = libc::rlimit {
            rlim_cur: limit.rlim_max,
            rlim_max: limit.rlim_max,
        };
        if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &raised) } == 0 {
            limit = raised;
        }
    }
    Some(limit.rlim_cur)
}

/// The open files of a worker asked for `workers` sessions at once in a
/// process that may open `files`: what the database pool's connections and
/// the HTTP API's (`http_connections`, with its listener) take comes off
/// first. When the rest cannot serve `workers` sessions whatever their
/// model speaks, one line says how many run to begin with (more while
/// sessions share HTTP/2 connections; the rest stay queued).
fn admit(
    workers: u32,
    files: u64,
    store: &PgStore,
    http_connections: u64,
) -> pod_fleet::capacity::Files {
    let reserved = store.stats().max_connections as u64 + http_connections;
    let budget = pod_fleet::capacity::Files {
        limit: files,
        reserved,
    };
    let capacity = budget.sessions();
    // What its sessions' tools may hold at once; past it a call waits.
    pod_tools::files::limit(u32::try_from(budget.tools()).unwrap_or(u32::MAX));
    if workers > capacity {
        let _ = crate::output::eprint(&format!(
            "pod serve: --workers {workers} clamped to {capacity}: this process may open {files} \
             files, {} for itself, its connections and its tools, then {} per session for its \
             model connection, none for a session waiting on a shared HTTP/2 connection (it \
             admits more while they do); the rest stay queued (raise the hard limit for more: \
             ulimit -Hn, or LimitNOFILE= in a systemd unit)\n",
            pod_fleet::capacity::OWN_FILES + reserved + budget.tools(),
            pod_fleet::capacity::FILES_PER_SESSION,
        ));
    }
    budget
}

/// The file store's schedules for the API (a server without a fleet).
struct ScheduleFiles(pod_launch::schedules::Schedules);

impl pod_http::ScheduleFiles for ScheduleFiles {
    fn list(&self) -> Result<Vec<serde_json::Value>, String> {
        let list = self.0.list().map_err(|e| pod_llm::error_chain(&e))?;
        Ok(list.iter().map(super::schedule_files::as_json).collect())
    }

    fn pause(&self, name: &str, paused: bool) -> Result<Option<serde_json::Value>, String> {
        let changed = self
            .0
            .set_paused(name, paused, chrono::Utc::now())
            .map_err(|e| pod_llm::error_chain(&e))?;
        Ok(changed.as_ref().map(super::schedule_files::as_json))
    }

    fn remove(&self, name: &str) -> Result<bool, String> {
        self.0.remove(name).map_err(|e| pod_llm::error_chain(&e))
    }

    fn add(
        &self,
        new: pod_http::runner::NewSchedule,
    ) -> Result<serde_json::Value, pod_http::runner::ScheduleRefused> {
        super::schedule_api::add_to_files(&self.0, new)
    }
}

/// Runs the fleet worker until `stop` (or the fleet is idle, with
/// `--exit-when-idle`), printing what it does.
async fn work(
    args: &ServeArgs,
    place: &Place,
    launcher: &pod_launch::Launcher,
    runner: Option<pod_http::Runner>,
    http_connections: u64,
    stop: CancellationToken,
) -> Result<Outcome> {
    let store = fleet(place, "serve")?;
    let files =
        raise_open_files().map(|files| admit(args.workers, files, &store, http_connections));
    let worker = pod_fleet::Worker {
        store,
        launcher: launcher.clone(),
        slots: args.workers,
        files,
        exit_when_idle: args.exit_when_idle,
        api: runner.map(|runner| Arc::new(Api(runner)) as Arc<dyn pod_fleet::Api>),
        outage_notify_after: Some(args.db_outage_notify_after).filter(|after| !after.is_zero()),
    };
    worker
        .run(stop, |report| {
            let _ = crate::output::print(&format!("{report}\n"));
        })
        .await;
    Ok(Outcome::Done)
}

/// The fleet's queue, for the API's batches.
struct FleetQueue(PgStore);

#[async_trait::async_trait]
impl pod_http::Queue for FleetQueue {
    async fn submit(
        &self,
        sessions: &[(pod::log::SessionHeader, Vec<pod::log::LogRecord>)],
    ) -> Result<(), pod::PodError> {
        self.0.submit_many(sessions).await
    }

    async fn schedules(&self) -> Result<Vec<serde_json::Value>, pod::PodError> {
        Ok(self
            .0
            .schedules()
            .await?
            .iter()
            .map(super::schedule::as_json)
            .collect())
    }

    async fn add_schedule(
        &self,
        new: pod_http::runner::NewSchedule,
    ) -> Result<serde_json::Value, pod_http::runner::ScheduleRefused> {
        super::schedule_api::add(&self.0, new).await
    }

    async fn pause_schedule(
        &self,
        name: &str,
        paused: bool,
    ) -> Result<serde_json::Value, pod_http::runner::ScheduleRefused> {
        super::schedule_api::pause(&self.0, name, paused).await
    }

    async fn remove_schedule(&self, name: &str) -> Result<(), pod_http::runner::ScheduleRefused> {
        super::schedule_api::remove(&self.0, name).await
    }
}

/// The fleet's database, where the Managed Agents API keeps its resources.
struct FleetDocuments(PgStore);

#[async_trait::async_trait]
impl pod_http::Documents for FleetDocuments {
    async fn put(&self, kind: &str, id: &str, body: &[u8]) -> Result<(), pod_http::DocumentError> {
        // JSON the API encoded: UTF-8, so this copies nothing lossy.
        let body = String::from_utf8_lossy(body);
        Ok(self.0.put_document(kind, id, &body).await?)
    }

    async fn get(&self, kind: &str, id: &str) -> Result<Option<Vec<u8>>, pod_http::DocumentError> {
        Ok(self.0.document(kind, id).await?.map(String::into_bytes))
    }

    async fn all(&self, kind: &str) -> Result<Vec<Vec<u8>>, pod_http::DocumentError> {
        let all = self.0.documents(kind).await?;
        Ok(all.into_iter().map(String::into_bytes).collect())
    }

    async fn remove(&self, kind: &str, id: &str) -> Result<(), pod_http::DocumentError> {
        self.0.remove_document(kind, id).await?;
        Ok(())
    }
}

/// The HTTP API of this process, where the worker's sessions ask.
struct Api(pod_http::Runner);

impl pod_fleet::Api for Api {
    fn approver(&self, id: Uuid) -> Arc<dyn pod::Approver> {
        self.0.approver(id)
    }

    fn adopt(&self, id: Uuid, handle: pod::PodHandle, meter: pod_launch::Meter) {
        self.0.adopt(id, handle, meter);
    }

    fn release(&self, id: Uuid) {
        self.0.release(id);
    }
}

impl pod_launch::schedules::Adopt for Api {
    fn approver(&self, id: Uuid) -> Arc<dyn pod::Approver> {
        self.0.approver(id)
    }

    fn adopt(&self, id: Uuid, handle: pod::PodHandle, meter: pod_launch::Meter) {
        self.0.adopt(id, handle, meter);
    }

    fn release(&self, id: Uuid) {
        self.0.release(id);
    }
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
