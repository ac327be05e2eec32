//! The fleet mode: sessions queued in PostgreSQL, several `pod serve`
//! workers running them, and workers killed (SIGKILL, then restarted) or
//! paused (SIGSTOP, often past their lease, then SIGCONT) at seeded random
//! moments until every session is complete. Given the cluster
//! ([`run_with`]), it also crashes the database itself (`SIGQUIT`: every
//! connection dropped) for seconds at a time, past several leases,
//! sometimes killing a worker while it is away.
//!
//! Checked while it runs: every snapshot of every session's records extends
//! the previous one (nothing committed is lost or rewritten). Checked at
//! the end, per session: the plan is complete and equals the last accepted
//! `todo_write` ([`crate::oracle`]), the active context and the full
//! history are valid with no call left unanswered, no item was written
//! twice, and the epochs that wrote its records never go back (no write of
//! a worker after the lease it held was taken over).

use crate::oracle::last_accepted_todos;
use crate::rng::Rng;
use crate::script;
use pod::log::LogRecord;
use pod::replay::{full_history, replay};
use pod::SessionStore;
use pod_llm::{validate_history, ItemKind};
use pod_store_pg::{PgStore, PgStoreConfig};
use pod_testkit::postgres::Postgres;
use pod_tools::TodoStatus;
use std::collections::{HashMap, HashSet};
use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};
use uuid::Uuid;

/// What to run.
#[derive(Debug, Clone)]
pub struct FleetConfig {
    /// The `pod` binary.
    pub pod: PathBuf,
    /// The PostgreSQL store (a database of its own: the harness expects
    /// only its sessions there).
    pub store: String,
    /// Sessions to queue.
    pub sessions: usize,
    /// `pod serve` processes.
    pub workers: usize,
    /// Sessions each worker runs at once.
    pub slots: u32,
    /// Kills and pauses to inject.
    pub chaos: u64,
    /// The seed of every choice.
    pub seed: u64,
    /// Items in each session's plan.
    pub items: usize,
    /// Lease time to live, in seconds.
    pub lease_ttl_secs: u64,
    /// Each scripted step waits between these many milliseconds before its
    /// answer, so that sessions last long enough for kills and pauses to
    /// land mid-turn.
    pub step_delay_ms: (u64, u64),
    /// Database outages to inject (with [`run_with`] only).
    pub outages: u64,
    /// Keep the temporary directory.
    pub keep: bool,
}

impl FleetConfig {
    /// 3 workers of 2 slots, 20 sessions of 8 items, 2 s leases.
    pub fn new(pod: impl Into<PathBuf>, store: impl Into<String>, chaos: u64, seed: u64) -> Self {
        Self {
            pod: pod.into(),
            store: store.into(),
            sessions: 20,
            workers: 3,
            slots: 2,
            chaos,
            seed,
            items: 8,
            lease_ttl_secs: 2,
            step_delay_ms: (100, 500),
            outages: 0,
            keep: false,
        }
    }
}

/// Counts of a finished run.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FleetReport {
    /// The seed.
    pub seed: u64,
    /// Sessions complete and checked.
    pub sessions_completed: usize,
    /// Workers killed with SIGKILL (and restarted).
    pub kills: u64,
    /// Workers paused with SIGSTOP.
    pub pauses: u64,
    /// Pauses longer than the lease.
    pub pauses_past_lease: u64,
    /// Database outages injected.
    pub outages: u64,
    /// Sessions written under more than one lease (taken over).
    pub sessions_taken_over: usize,
    /// Snapshots of all sessions compared with the one before.
    pub snapshots: u64,
    /// Records checked at the end.
    pub records: usize,
    /// Calls answered "interrupted" after a takeover.
    pub interrupted_calls: usize,
}

impl std::fmt::Display for FleetReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "seed {}: {} sessions completed; {} kills, {} pauses ({} past the lease), \
             {} database outages; \
             {} sessions taken over by another worker, {} interrupted calls; \
             {} snapshots compared, {} records checked",
            self.seed,
            self.sessions_completed,
            self.kills,
            self.pauses,
            self.pauses_past_lease,
            self.outages,
            self.sessions_taken_over,
            self.interrupted_calls,
            self.snapshots,
            self.records
        )
    }
}

/// A violation, with where to look.
#[derive(Debug, thiserror::Error)]
#[error("fleet seed {seed}: {problems:?} (files in {dir})")]
pub struct FleetError {
    /// The seed.
    pub seed: u64,
    /// What was wrong.
    pub problems: Vec<String>,
    /// The run's directory (kept).
    pub dir: String,
}

struct Worker {
    home: PathBuf,
    log: PathBuf,
    child: Option<Child>,
}

/// Runs the fleet mode on `config.store` (no database outages).
pub fn run(config: &FleetConfig) -> Result<FleetReport, FleetError> {
    run_with(config, None)
}

/// Runs the fleet mode; with `database` (the cluster behind
/// `config.store`), `config.outages` of the chaos steps crash it.
pub fn run_with(
    config: &FleetConfig,
    database: Option<&mut Postgres>,
) -> Result<FleetReport, FleetError> {
    let dir = tempfile::Builder::new()
        .prefix("pod-fleet-")
        .tempdir()
        .map_err(|e| fail(config, vec![format!("no temp dir: {e}")], ""))?;
    let root = dir.path().to_path_buf();
    let result = run_in(config, &root, database);
    if result.is_err() || config.keep {
        let kept = dir.keep();
        return result.map_err(|mut err| {
            err.dir = kept.display().to_string();
            err
        });
    }
    result
}

fn fail(config: &FleetConfig, problems: Vec<String>, dir: &str) -> FleetError {
    FleetError {
        seed: config.seed,
        problems,
        dir: dir.to_string(),
    }
}

fn run_in(
    config: &FleetConfig,
    root: &Path,
    mut database: Option<&mut Postgres>,
) -> Result<FleetReport, FleetError> {
    let err = |problem: String| fail(config, vec![problem], &root.display().to_string());
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| err(format!("no runtime: {e}")))?;
    let store = runtime
        .block_on(PgStore::connect(PgStoreConfig::new(&config.store)))
        .map_err(|e| err(format!("cannot connect to the store: {e}")))?;
    let mut rng = Rng::new(config.seed);
    let mut report = FleetReport {
        seed: config.seed,
        ..FleetReport::default()
    };

    // The sessions: long scripted plans, every step a little slow so that
    // kills and pauses land mid-turn.
    let workspace = root.join("workspace");
    script::write_workspace(&workspace, config.items)
        .map_err(|e| err(format!("cannot write the workspace: {e}")))?;
    // One `pod submit --from` for all of them: a line per session, each
    // naming its own script.
    let mut lines = String::new();
    for n in 0..config.sessions {
        let mut generated = script::generate(&mut rng, config.items);
        if let Some(steps) = generated.script["steps"].as_array_mut() {
            for step in steps {
                let (lo, hi) = config.step_delay_ms;
                step["delay_ms"] = serde_json::json!(rng.range(lo, hi));
            }
        }
        let path = root.join(format!("script-{n:02}.json"));
        std::fs::write(&path, generated.script.to_string())
            .map_err(|e| err(format!("cannot write a script: {e}")))?;
        lines
            .push_str(&serde_json::json!({"task": "Check every item", "script": path}).to_string());
        lines.push('\n');
    }
    let tasks = root.join("tasks.jsonl");
    std::fs::write(&tasks, lines).map_err(|e| err(format!("cannot write the tasks: {e}")))?;
    let out = pod(config, &root.join("submitter"))
        .args(["submit", "--yes", "--workspace"])
        .arg(&workspace)
        .arg("--from")
        .arg(&tasks)
        .output()
        .map_err(|e| err(format!("cannot run pod submit: {e}")))?;
    if !out.status.success() {
        return Err(err(format!(
            "pod submit failed: {}",
            String::from_utf8_lossy(&out.stderr)
        )));
    }
    let mut ids = Vec::new();
    for id in String::from_utf8_lossy(&out.stdout).lines() {
        ids.push(Uuid::parse_str(id.trim()).map_err(|e| err(format!("bad id {id:?}: {e}")))?);
    }
    if ids.len() != config.sessions {
        return Err(err(format!(
            "pod submit queued {} sessions, not {}",
            ids.len(),
            config.sessions
        )));
    }

    let mut workers: Vec<Worker> = (0..config.workers)
        .map(|k| Worker {
            home: root.join(format!("worker-{k}")),
            log: root.join(format!("worker-{k}.log")),
            child: None,
        })
        .collect();
    for worker in &mut workers {
        start(config, worker).map_err(&err)?;
    }

    let lease = Duration::from_secs(config.lease_ttl_secs);
    let mut snapshots: HashMap<Uuid, Vec<LogRecord>> = HashMap::new();
    let mut problems = Vec::new();
    let mut snapshot = |report: &mut FleetReport, problems: &mut Vec<String>| {
        for id in &ids {
            match runtime.block_on(store.read(*id)) {
                Ok(contents) => {
                    let before = snapshots.entry(*id).or_default();
                    let base = before.len();
                    if contents.records.len() < base || contents.records[..base] != before[..] {
                        problems.push(format!(
                            "session {id}: committed records were lost or rewritten \
                             ({base} before, {} now)",
                            contents.records.len()
                        ));
                    }
                    *before = contents.records;
                }
                Err(e) => problems.push(format!(
                    "session {id}: cannot read: {}",
                    pod_llm::error_chain(&e)
                )),
            }
        }
        report.snapshots += 1;
    };

    // Chaos.
    for _ in 0..config.chaos {
        std::thread::sleep(Duration::from_millis(rng.range(200, 1200)));
        snapshot(&mut report, &mut problems);
        if runtime.block_on(store.fleet_idle()).unwrap_or(false) {
            break;
        }
        if let Some(db) = database.as_deref_mut() {
            // Drawn only while outages are asked for: a seed without them
            // makes the same choices as before they existed. The first
            // chaos step is one, so a short run has at least one.
            if report.outages < config.outages && (report.outages == 0 || rng.one_in(3)) {
                outage(db, &mut rng, lease, &mut workers, config, &mut report).map_err(&err)?;
                continue;
            }
        }
        let k = rng.below(workers.len() as u64) as usize;
        let worker = &mut workers[k];
        let Some(child) = worker.child.as_mut() else {
            continue;
        };
        let pid = child.id().to_string();
        if rng.one_in(2) {
            let _ = child.kill();
            let _ = child.wait();
            worker.child = None;
            report.kills += 1;
            std::thread::sleep(Duration::from_millis(rng.range(0, 800)));
            start(config, worker).map_err(&err)?;
        } else {
            // Half the pauses end within the lease, half well past it.
            let lease_ms = lease.as_millis() as u64;
            let pause = Duration::from_millis(match rng.one_in(2) {
                true => rng.range(200, lease_ms),
                false => rng.range(lease_ms + 500, lease_ms * 2 + 1500),
            });
            signal("-STOP", &pid).map_err(&err)?;
            std::thread::sleep(pause);
            snapshot(&mut report, &mut problems);
            signal("-CONT", &pid).map_err(&err)?;
            report.pauses += 1;
            report.pauses_past_lease += u64::from(pause > lease);
        }
    }

    // Let the fleet finish what is left.
    // Five minutes, and a tenth of a second more per session.
    let patience = Duration::from_secs(300) + Duration::from_millis(100) * config.sessions as u32;
    let deadline = Instant::now() + patience;
    loop {
        snapshot(&mut report, &mut problems);
        if runtime.block_on(store.fleet_idle()).unwrap_or(false) {
            break;
        }
        if Instant::now() > deadline {
            problems.push(format!(
                "the fleet did not finish its sessions within {} s",
                patience.as_secs()
            ));
            break;
        }
        for worker in &mut workers {
            let exited = worker
                .child
                .as_mut()
                .is_none_or(|c| c.try_wait().ok().flatten().is_some());
            if exited {
                start(config, worker).map_err(&err)?;
            }
        }
        std::thread::sleep(Duration::from_millis(250));
    }
    for worker in &mut workers {
        if let Some(mut child) = worker.child.take() {
            let _ = signal("-TERM", &child.id().to_string());
            let _ = child.wait();
        }
    }
    snapshot(&mut report, &mut problems);

    // The end state of every session.
    let epochs = runtime
        .block_on(epochs(&config.store, &ids))
        .map_err(&err)?;
    for id in &ids {
        let records = snapshots.get(id).cloned().unwrap_or_default();
        report.records += records.len();
        problems.extend(check_session(*id, &records, &mut report));
        let written = epochs.get(id).cloned().unwrap_or_default();
        if written.windows(2).any(|w| w[1] < w[0]) {
            problems.push(format!(
                "session {id}: a record written under an older lease after a newer one: {written:?}"
            ));
        }
        let leases: HashSet<i64> = written.iter().copied().filter(|e| *e > 0).collect();
        report.sessions_taken_over += usize::from(leases.len() > 1);
    }
    match problems.is_empty() {
        true => Ok(report),
        false => Err(fail(config, problems, &root.display().to_string())),
    }
}

/// The database crashed for one to four leases (the store's writes wait,
/// sessions pause); half the time a worker is killed while it is away, so
/// its sessions move to another after the post-outage grace.
fn outage(
    db: &mut Postgres,
    rng: &mut Rng,
    lease: Duration,
    workers: &mut [Worker],
    config: &FleetConfig,
    report: &mut FleetReport,
) -> Result<(), String> {
    let lease_ms = lease.as_millis() as u64;
    let down = Duration::from_millis(rng.range(lease_ms, lease_ms * 4));
    db.crash();
    report.outages += 1;
    if rng.one_in(2) {
        let k = rng.below(workers.len() as u64) as usize;
        if let Some(mut child) = workers[k].child.take() {
            let _ = child.kill();
            let _ = child.wait();
            report.kills += 1;
            start(config, &mut workers[k])?;
        }
    }
    std::thread::sleep(down);
    db.start_again();
    Ok(())
}

/// The checks of one finished session.
fn check_session(id: Uuid, records: &[LogRecord], report: &mut FleetReport) -> Vec<String> {
    let mut problems = Vec::new();
    let replayed = replay(records);
    if !replayed.interrupted.is_empty() {
        problems.push(format!(
            "session {id}: {} calls without a result at the end",
            replayed.interrupted.len()
        ));
    }
    if let Err(e) = validate_history(&replayed.history) {
        problems.push(format!("session {id}: the active context is invalid: {e}"));
    }
    let full = full_history(records);
    if let Err(e) = validate_history(&full) {
        problems.push(format!("session {id}: the full history is invalid: {e}"));
    }
    let mut seen = HashSet::new();
    for item in &full {
        if !seen.insert(item.id) {
            problems.push(format!("session {id}: item {} written twice", item.id));
        }
        if let ItemKind::ToolResult { content, .. } = &item.kind {
            report.interrupted_calls += usize::from(content.starts_with("Interrupted"));
        }
    }
    let oracle = last_accepted_todos(records);
    if replayed.todos != oracle {
        problems.push(format!(
            "session {id}: replayed todos differ from the last accepted todo_write"
        ));
    }
    let complete = !oracle.is_empty() && oracle.iter().all(|t| t.status == TodoStatus::Completed);
    match complete {
        true => report.sessions_completed += 1,
        false => problems.push(format!("session {id}: its plan is not complete")),
    }
    problems
}

/// The epoch of every record of each session, in sequence order.
async fn epochs(url: &str, ids: &[Uuid]) -> Result<HashMap<Uuid, Vec<i64>>, String> {
    let (client, connection) = tokio_postgres::connect(url, tokio_postgres::NoTls)
        .await
        .map_err(|e| format!("cannot connect: {e}"))?;
    tokio::spawn(connection);
    let mut out = HashMap::new();
    for id in ids {
        let rows = client
            .query(
                "SELECT epoch FROM pod_records WHERE session_id = $1 ORDER BY seq",
                &[id],
            )
            .await
            .map_err(|e| format!("cannot read epochs: {e}"))?;
        out.insert(*id, rows.iter().map(|row| row.get(0)).collect());
    }
    Ok(out)
}

fn pod(config: &FleetConfig, home: &Path) -> Command {
    let mut cmd = Command::new(&config.pod);
    cmd.env("POD_HOME", home)
        .env("POD_STORE", &config.store)
        .env_remove("RUST_LOG")
        .stdin(Stdio::null());
    cmd
}

fn start(config: &FleetConfig, worker: &mut Worker) -> Result<(), String> {
    let log = File::options()
        .create(true)
        .append(true)
        .open(&worker.log)
        .map_err(|e| format!("cannot open {}: {e}", worker.log.display()))?;
    let err = log
        .try_clone()
        .map_err(|e| format!("cannot open {}: {e}", worker.log.display()))?;
    let child = pod(config, &worker.home)
        .args(["serve", "--workers", &config.slots.to_string()])
        .args(["--lease-ttl", &format!("{}s", config.lease_ttl_secs)])
        .stdout(log)
        .stderr(err)
        .spawn()
        .map_err(|e| format!("cannot start pod serve: {e}"))?;
    worker.child = Some(child);
    Ok(())
}

fn signal(name: &str, pid: &str) -> Result<(), String> {
    let status = Command::new("kill")
        .args([name, pid])
        .status()
        .map_err(|e| format!("cannot run kill: {e}"))?;
    match status.success() {
        true => Ok(()),
        false => Err(format!("kill {name} {pid} failed")),
    }
}
