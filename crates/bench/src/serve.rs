//! A fleet at scale: N sessions queued with one `pod submit --from`, run by
//! `pod serve` worker processes (the release binary next to this one) on a
//! throwaway PostgreSQL with the server's default settings (fsync on,
//! `max_connections` 100), against a loopback model that answers after 1 s.
//! Each session makes 5 model requests (4 `read_file` calls, then text), so
//! the ideal wall time is 5 s whatever N. Reported: wall ÷ ideal, the
//! workers' CPU per model request (`getrusage` of the reaped workers), their
//! peak RSS (`VmHWM`) and what it grew by per session, the most database
//! connections they held (`pg_stat_activity`), appends and WAL flushes per
//! second (`pod_records`, `pg_stat_wal`), and how long the submission took.
//! "Cores busy" is the whole machine's busy CPU time over the run (`/proc/
//! stat`: the workers, PostgreSQL, the model server, the kernel) divided by
//! the wall time, and "workers' share" the workers' part of it: a run whose
//! cores are all busy is paced by the machine, not by the model.

use crate::loopback::{Options, Server};
use crate::support::fmt_duration;
use pod_testkit::postgres::Postgres;
use serde_json::json;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

type Error = Box<dyn std::error::Error>;

/// Model requests per session.
const REQUESTS: u64 = 5;
/// The model's latency.
const LATENCY: Duration = Duration::from_secs(1);

/// Children's CPU time so far (the reaped ones).
pub(crate) fn children_cpu() -> Duration {
    // SAFETY: getrusage writes one plain-old-data struct we own.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    if unsafe { libc::getrusage(libc::RUSAGE_CHILDREN, &mut usage) } != 0 {
        return Duration::ZERO;
    }
    let time = |t: libc::timeval| {
        Duration::from_secs(t.tv_sec.max(0) as u64) + Duration::from_micros(t.tv_usec.max(0) as u64)
    };
    time(usage.ru_utime) + time(usage.ru_stime)
}

/// CPU time the whole machine spent busy (every process and the kernel:
/// the workers, PostgreSQL, the model server), from `/proc/stat`; zero
/// where it cannot be read.
fn machine_busy() -> Duration {
    let Ok(stat) = std::fs::read_to_string("/proc/stat") else {
        return Duration::ZERO;
    };
    // SAFETY: sysconf reads a constant of the system.
    let ticks = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    let Some(line) = stat.lines().find(|l| l.starts_with("cpu ")) else {
        return Duration::ZERO;
    };
    let fields: Vec<u64> = line
        .split_whitespace()
        .skip(1)
        .filter_map(|f| f.parse().ok())
        .collect();
    // user nice system idle iowait irq softirq steal: all but idle and
    // iowait are busy.
    let busy: u64 = fields
        .iter()
        .enumerate()
        .filter(|(i, _)| matches!(i, 0 | 1 | 2 | 5 | 6 | 7))
        .map(|(_, v)| v)
        .sum();
    match u64::try_from(ticks) {
        Ok(ticks) if ticks > 0 => Duration::from_secs_f64(busy as f64 / ticks as f64),
        _ => Duration::ZERO,
    }
}

/// A field of `/proc/PID/status` in kB.
fn status_kb(pid: u32, field: &str) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|line| line.strip_prefix(field))
        .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse().ok())
}

pub(crate) struct Setup {
    pub(crate) pg: Postgres,
    pub(crate) server: Server,
    pub(crate) dir: tempfile::TempDir,
    pod: PathBuf,
}

impl Setup {
    pub(crate) fn workspace(&self) -> PathBuf {
        self.dir.path().join("workspace")
    }

    pub(crate) fn command(&self) -> Command {
        let mut cmd = Command::new(&self.pod);
        cmd.env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", self.dir.path().join("home"))
            .env("POD_HOME", self.dir.path().join("pod-home"))
            .env("POD_CONFIG", self.dir.path().join("config.toml"))
            .env("POD_STORE", self.pg.url())
            .env("BENCH_API_KEY", "bench")
            .stdin(Stdio::null());
        cmd
    }
}

/// How the workers reach the loopback model.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Transport {
    /// HTTP/1.1 in the clear: a connection per waiting request.
    Http1,
    /// HTTP/2 in the clear, by prior knowledge (profile `http2 =
    /// "prior-knowledge"`).
    Http2,
    /// TLS whose server offers only HTTP/1.1 in ALPN.
    Http1Tls,
    /// TLS with ALPN `h2`: what hosted model APIs offer.
    Http2Tls,
}

impl Transport {
    /// `h1`, `h2`, `h1-tls` or `h2-tls`.
    fn parse(name: &str) -> Option<Self> {
        Some(match name {
            "h1" => Self::Http1,
            "h2" => Self::Http2,
            "h1-tls" => Self::Http1Tls,
            "h2-tls" => Self::Http2Tls,
            _ => return None,
        })
    }

    fn name(self) -> &'static str {
        match self {
            Self::Http1 => "HTTP/1.1",
            Self::Http2 => "HTTP/2",
            Self::Http1Tls => "HTTP/1.1 + TLS",
            Self::Http2Tls => "HTTP/2 + TLS",
        }
    }

    fn tls(self) -> bool {
        matches!(self, Self::Http1Tls | Self::Http2Tls)
    }
}

async fn setup(checkpoints: bool, latency: Duration, transport: Transport) -> Result<Setup, Error> {
    setup_on(latency, checkpoints, transport).await
}

/// A fleet's parts with a model that answers after `latency`.
pub(crate) async fn setup_with(latency: Duration, checkpoints: bool) -> Result<Setup, Error> {
    setup_on(latency, checkpoints, Transport::Http1).await
}

/// A fleet's parts with a model that answers after `latency`, reached
/// over `transport`.
async fn setup_on(
    latency: Duration,
    checkpoints: bool,
    transport: Transport,
) -> Result<Setup, Error> {
    let pod = crate::support::pod_binary()?;
    let pg = Postgres::start_with_limits(true, None);
    let dir = tempfile::tempdir()?;
    for sub in ["home", "pod-home", "workspace", "model"] {
        std::fs::create_dir_all(dir.path().join(sub))?;
    }
    let mut options = Options::new(0);
    options.latency = latency;
    options.call = Some(("read_file".into(), json!({"path": "notes.txt"})));
    options.rounds = Some(REQUESTS as usize - 1);
    if transport.tls() {
        options.tls = Some(dir.path().join("model"));
        options.http1_only = transport == Transport::Http1Tls;
    }
    let server = Server::start_with(options).await?;
    let mut transport_keys = match transport {
        Transport::Http2 => "http2 = \"prior-knowledge\"\n".to_string(),
        Transport::Http1 => "http2 = \"never\"\n".to_string(),
        Transport::Http1Tls | Transport::Http2Tls => String::new(),
    };
    if let Some(ca) = server.ca_file() {
        transport_keys.push_str(&format!("ca_file = \"{}\"\n", ca.display()));
    }
    std::fs::write(
        dir.path().join("workspace/notes.txt"),
        "A file the agent reads: three hundred bytes of notes. ".repeat(6),
    )?;
    std::fs::write(
        dir.path().join("config.toml"),
        format!(
            "checkpoints = {checkpoints}\n[profiles.bench]\nkind = \"openai\"\nbase_url = \"{}\"\nmodel = \"bench\"\n\
             api_key_env = \"BENCH_API_KEY\"\ncontext_window = 128000\n{transport_keys}",
            server.base_url()
        ),
    )?;
    Ok(Setup {
        pg,
        server,
        dir,
        pod,
    })
}

/// What one run measured.
struct Row {
    checkpoints: bool,
    transport: Transport,
    latency: Duration,
    /// The most descriptors the workers held open at once.
    files: u64,
    workers: usize,
    sessions: usize,
    submit: Duration,
    wall: Duration,
    cpu: Duration,
    /// The machine's busy CPU time over the same span.
    busy: Duration,
    requests: u64,
    peak_rss_kb: u64,
    idle_rss_kb: u64,
    connections: i64,
    appends: i64,
    wal_syncs: i64,
}

/// `n` task lines in the setup's directory; the file.
pub(crate) fn write_tasks(setup: &Setup, n: usize) -> Result<PathBuf, Error> {
    let tasks = setup.dir.path().join("tasks.txt");
    let lines: Vec<String> = (0..n)
        .map(|i| format!("Read notes.txt and say what it holds ({i})"))
        .collect();
    std::fs::write(&tasks, lines.join("\n"))?;
    Ok(tasks)
}

/// Queues `tasks` with one `pod submit --from`; how long it took.
pub(crate) fn submit(setup: &Setup, tasks: &std::path::Path) -> Result<Duration, Error> {
    let started = Instant::now();
    let out = setup
        .command()
        .args(["submit", "--profile", "bench", "--yes", "--from"])
        .arg(tasks)
        .arg("--workspace")
        .arg(setup.workspace())
        .output()?;
    if !out.status.success() {
        return Err(format!(
            "pod submit failed: {}",
            String::from_utf8_lossy(&out.stderr)
        )
        .into());
    }
    Ok(started.elapsed())
}

pub(crate) async fn sql(pg: &Postgres) -> Result<tokio_postgres::Client, Error> {
    let (client, connection) = tokio_postgres::connect(&pg.url(), tokio_postgres::NoTls).await?;
    tokio::spawn(connection);
    Ok(client)
}

async fn db_counters(client: &tokio_postgres::Client) -> Result<(i64, i64), Error> {
    let records: i64 = client
        .query_one("SELECT count(*) FROM pod_records", &[])
        .await?
        .get(0);
    let syncs: i64 = client
        .query_one("SELECT wal_sync FROM pg_stat_wal", &[])
        .await?
        .get(0);
    Ok((records, syncs))
}

/// The resident size of an idle worker (nothing queued), in kB.
fn idle_rss(setup: &Setup) -> Result<u64, Error> {
    let mut child = setup
        .command()
        .args(["serve", "--workers", "10000"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()?;
    let mut line = String::new();
    let stdout = child.stdout.take().ok_or("no stdout")?;
    std::io::BufRead::read_line(&mut std::io::BufReader::new(stdout), &mut line)?;
    // Its first claims and renewal period pass.
    std::thread::sleep(Duration::from_secs(2));
    let rss = status_kb(child.id(), "VmRSS:").unwrap_or(0);
    let _ = child.kill();
    let _ = child.wait();
    Ok(rss)
}

/// How many descriptors process `pid` holds open.
fn open_files(pid: u32) -> u64 {
    std::fs::read_dir(format!("/proc/{pid}/fd")).map_or(0, |dir| dir.count() as u64)
}

async fn measure(
    workers: usize,
    per_worker: usize,
    checkpoints: bool,
    latency: Duration,
    transport: Transport,
    instructions_kb: usize,
) -> Result<Row, Error> {
    let setup = setup(checkpoints, latency, transport).await?;
    if instructions_kb > 0 {
        // Project instructions every session's system prompt carries, as
        // an AGENTS.md of that size in the workspace.
        let line = "- Keep every change small, tested and described in its commit.\n";
        let text = line.repeat(instructions_kb * 1024 / line.len() + 1);
        std::fs::write(setup.dir.path().join("workspace/AGENTS.md"), text)?;
    }
    let sessions = workers * per_worker;
    let tasks = write_tasks(&setup, sessions)?;
    // Measured while the queue is empty: a worker with nothing to run.
    let idle_rss_kb = idle_rss(&setup)?;
    let submit = submit(&setup, &tasks)?;
    let client = sql(&setup.pg).await?;
    let (records_before, syncs_before) = db_counters(&client).await?;
    let requests_before = setup.server.stats().await?.requests;
    let cpu_before = children_cpu();
    let busy_before = machine_busy();
    let started = Instant::now();
    let mut children: Vec<Child> = (0..workers)
        .map(|_| {
            setup
                .command()
                .args(["serve", "--exit-when-idle", "--workers"])
                .arg(per_worker.to_string())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
        })
        .collect::<Result<_, _>>()?;
    let (mut peak_rss_kb, mut connections) = (vec![0u64; workers], 0i64);
    let mut files = 0u64;
    let mut running = workers;
    let mut polls = 0u64;
    while running > 0 {
        for (i, child) in children.iter().enumerate() {
            if let Some(hwm) = status_kb(child.id(), "VmHWM:") {
                peak_rss_kb[i] = peak_rss_kb[i].max(hwm);
            }
        }
        // Counting tens of thousands of descriptors takes a while: once a
        // second is enough to see the plateau.
        if polls.is_multiple_of(10) {
            files = files.max(children.iter().map(|c| open_files(c.id())).sum());
        }
        polls += 1;
        let held: i64 = client
            .query_one(
                "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'pod'",
                &[],
            )
            .await?
            .get(0);
        connections = connections.max(held);
        running = 0;
        for child in &mut children {
            if child.try_wait()?.is_none() {
                running += 1;
            }
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
        if started.elapsed() > Duration::from_secs(3600) {
            return Err("the fleet did not finish within an hour".into());
        }
    }
    let wall = started.elapsed();
    let busy = machine_busy().saturating_sub(busy_before);
    let cpu = children_cpu().saturating_sub(cpu_before);
    let requests = setup.server.stats().await?.requests - requests_before;
    let (records_after, syncs_after) = db_counters(&client).await?;
    let done: i64 = client
        .query_one(
            "SELECT count(*) FROM pod_sessions WHERE state = 'idle' AND fleet",
            &[],
        )
        .await?
        .get(0);
    if done as usize != sessions || requests != sessions as u64 * REQUESTS {
        return Err(format!(
            "{done} of {sessions} sessions ended, {requests} requests (expected {})",
            sessions as u64 * REQUESTS
        )
        .into());
    }
    Ok(Row {
        checkpoints,
        transport,
        latency,
        files,
        workers,
        sessions,
        submit,
        wall,
        cpu,
        busy,
        requests,
        peak_rss_kb: peak_rss_kb.iter().sum(),
        idle_rss_kb,
        connections,
        appends: records_after - records_before,
        wal_syncs: syncs_after - syncs_before,
    })
}

/// Prints the table (see the module docs). `--sessions=N` runs N
/// sessions (with and without checkpoints), `--workers=W` splits them over
/// W workers, `--latency-ms=MS` sets the model's latency and
/// `--transport=h1,h2,h1-tls,h2-tls` runs each of those ways to the model
/// (HTTP/1.1 in the clear by default), and `--instructions-kb=N` gives the
/// workspace an AGENTS.md of N KB (none by default).
pub async fn run(quick: bool, args: &[String]) -> Result<(), Error> {
    let value = |name: &str| args.iter().find_map(|a| a.strip_prefix(name));
    let sessions: Option<usize> = value("--sessions=").and_then(|n| n.parse().ok());
    let workers: usize = value("--workers=")
        .and_then(|n| n.parse().ok())
        .unwrap_or(1)
        .max(1);
    let latency = value("--latency-ms=")
        .and_then(|n| n.parse().ok())
        .map_or(LATENCY, Duration::from_millis);
    let instructions_kb: usize = value("--instructions-kb=")
        .and_then(|n| n.parse().ok())
        .unwrap_or(0);
    let transports: Vec<Transport> = match value("--transport=") {
        Some(list) => list
            .split(',')
            .map(|name| {
                Transport::parse(name)
                    .ok_or_else(|| format!("unknown transport `{name}`: h1, h2, h1-tls or h2-tls"))
            })
            .collect::<Result<_, _>>()?,
        None => vec![Transport::Http1],
    };
    // (workers, sessions each, checkpoints, transport): the last rows
    // without the workspace snapshots a session takes when it starts.
    let runs: Vec<(usize, usize, bool, Transport)> = match (sessions, quick) {
        (Some(n), _) if transports.len() > 1 => transports
            .iter()
            .map(|&t| (workers, n.div_ceil(workers), true, t))
            .collect(),
        (Some(n), _) => vec![
            (workers, n.div_ceil(workers), true, transports[0]),
            (workers, n.div_ceil(workers), false, transports[0]),
        ],
        (None, true) => vec![
            (1, 200, true, Transport::Http1),
            (1, 200, false, Transport::Http1),
        ],
        (None, false) => vec![
            (1, 1000, true, Transport::Http1),
            (1, 10_000, true, Transport::Http1),
            (3, 3000, true, Transport::Http1),
            (1, 1000, false, Transport::Http1),
            (1, 10_000, false, Transport::Http1),
        ],
    };
    println!(
        "\n### A fleet at scale: N sessions × {REQUESTS} requests, {:.1}s model latency\n",
        latency.as_secs_f64()
    );
    println!("| workers × sessions | to the model | checkpoints | submit | wall | wall ÷ ideal | CPU / request | cores busy | workers' share | peak RSS | RSS / session | open files | DB connections | appends/s | WAL flushes/s |");
    println!("|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    for (workers, per_worker, checkpoints, transport) in runs {
        let row = measure(
            workers,
            per_worker,
            checkpoints,
            latency,
            transport,
            instructions_kb,
        )
        .await?;
        let ideal = row.latency * REQUESTS as u32;
        let secs = row.wall.as_secs_f64();
        let per_session_kb =
            row.peak_rss_kb
                .saturating_sub(row.idle_rss_kb * row.workers as u64) as f64
                / row.sessions as f64;
        println!(
            "| {} × {} | {} | {} | {} | {} | {:.2}× | {:.3} ms | {:.2} of {cores} | {:.0} % | {:.0} MB | {:.1} KB | {} | {} | {:.0} | {:.0} |",
            row.workers,
            row.sessions / row.workers,
            row.transport.name(),
            if row.checkpoints { "on" } else { "off" },
            fmt_duration(row.submit),
            fmt_duration(row.wall),
            secs / ideal.as_secs_f64(),
            row.cpu.as_secs_f64() * 1000.0 / row.requests as f64,
            row.busy.as_secs_f64() / secs,
            100.0 * row.cpu.as_secs_f64() / row.busy.as_secs_f64().max(f64::EPSILON),
            row.peak_rss_kb as f64 / 1024.0,
            per_session_kb,
            row.files,
            row.connections,
            row.appends as f64 / secs,
            row.wal_syncs as f64 / secs,
        );
    }
    Ok(())
}
