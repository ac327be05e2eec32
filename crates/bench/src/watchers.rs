//! Watchers of one session (issue 31): what N event streams cost the
//! `pod serve --http` process, in CPU per second of wall time and resident
//! memory, read from `/proc/PID/stat` and `/proc/PID/statm` of the server.
//!
//! Three things watched, each by 0, 1, 10 and 50 streams, each with a
//! fresh server over the same store:
//! - an idle session of ~5,000 records (finished, nobody holds it);
//! - a running session of ~5,000 records, held by this process (as `pod
//!   run` or a fleet worker elsewhere would) and appended to ten times a
//!   second;
//! - every session of a store of 1,000 (`/api/events`, as each dashboard
//!   tab does).
//!
//! Each stream is opened the way the dashboard opens it (a session's at
//! its last 400 records) and read in its own task; the measurement starts
//! once every stream has sent its first state (`status`, or `ready` for
//! the list), so it counts what watching costs, not the first read.

use crate::http::{write_session, Server};
use pod::{Durability, FileStore, Item, PodHome, SessionStore};
use std::time::{Duration, Instant};
use tokio::task::JoinHandle;

type Error = Box<dyn std::error::Error>;

/// How many watchers each case is measured with.
const COUNTS: [usize; 4] = [0, 1, 10, 50];

/// Runs the benchmark and prints its table.
pub async fn run(quick: bool) -> Result<(), Error> {
    let (records, sessions, window) = if quick {
        (1_000, 100, Duration::from_secs(2))
    } else {
        (5_000, 1_000, Duration::from_secs(5))
    };
    let dir = tempfile::tempdir()?;
    let home = dir.path().join("home");
    let store = FileStore::new(PodHome::new(&home));
    // The plan and the user prompt are 4 records; the rest are items.
    let idle = write_session(&store, 0, records - 4).await?;
    let running = write_session(&store, 1, records - 4).await?;
    println!(
        "\n### Watchers: the server's CPU and memory, {records} records, {}s a measurement\n",
        window.as_secs()
    );
    println!("| watched | watchers | CPU (of one core) | resident memory |");
    println!("|---|---:|---:|---:|");
    for n in COUNTS {
        let path = format!("/sessions/{idle}/events?after={}", records - 400);
        let (cpu, rss) = measure(&home, n, &path, "status", window, None).await?;
        row("an idle session", n, cpu, rss);
    }
    for n in COUNTS {
        let path = format!("/sessions/{running}/events?after={}", records - 400);
        let writer = Writer::start(&store, running).await?;
        let (cpu, rss) = measure(&home, n, &path, "status", window, Some(&writer)).await?;
        writer.stop().await?;
        row("a running session (10 records/s)", n, cpu, rss);
    }
    // The list: the two sessions above and `sessions` small ones.
    for n in 2..sessions {
        write_session(&store, n, 6).await?;
    }
    for n in COUNTS {
        let (cpu, rss) = measure(&home, n, "/events", "ready", window, None).await?;
        row(&format!("/api/events, {sessions} sessions"), n, cpu, rss);
    }
    Ok(())
}

fn row(what: &str, n: usize, cpu: f64, rss: u64) {
    println!(
        "| {what} | {n} | {:.1} % | {:.1} MB |",
        cpu * 100.0,
        rss as f64 / 1e6
    );
}

/// Starts a server on `home`, opens `n` streams of `path`, waits until
/// each has sent `first`, and measures the server over `window`: its CPU
/// as a share of one core, and its resident memory at the end.
async fn measure(
    home: &std::path::Path,
    n: usize,
    path: &str,
    first: &str,
    window: Duration,
    writer: Option<&Writer>,
) -> Result<(f64, u64), Error> {
    let server = Server::start(home)?;
    let client = reqwest::Client::new();
    let mut readers = Vec::with_capacity(n);
    let mut started = Vec::with_capacity(n);
    for _ in 0..n {
        let response = client
            .get(format!("{}/api{path}", server.base))
            .bearer_auth(&server.token)
            .send()
            .await?;
        if !response.status().is_success() {
            return Err(format!("GET {path}: {}", response.status()).into());
        }
        let (seen, started_rx) = tokio::sync::oneshot::channel();
        readers.push(tokio::spawn(read(
            response,
            format!("event: {first}\n"),
            seen,
        )));
        started.push(started_rx);
    }
    for started in started {
        started
            .await
            .map_err(|_| "a stream ended before its first state")?;
    }
    if let Some(writer) = writer {
        // The writer runs through the window.
        writer.check()?;
    }
    let pid = server.child.id();
    let before = cpu_ticks(pid)?;
    let start = Instant::now();
    tokio::time::sleep(window).await;
    let ticks = cpu_ticks(pid)? - before;
    let elapsed = start.elapsed().as_secs_f64();
    let rss = resident(pid)?;
    for reader in readers {
        reader.abort();
    }
    drop(server);
    Ok((ticks as f64 / clock_ticks() / elapsed, rss))
}

/// Reads a stream until it is dropped, saying when `marker` first came.
async fn read(
    mut response: reqwest::Response,
    marker: String,
    seen: tokio::sync::oneshot::Sender<()>,
) {
    let mut seen = Some(seen);
    let mut text = String::new();
    while let Ok(Some(chunk)) = response.chunk().await {
        if seen.is_some() {
            text.push_str(&String::from_utf8_lossy(&chunk));
            if text.contains(&marker) {
                if let Some(seen) = seen.take() {
                    let _ = seen.send(());
                }
                text = String::new();
            } else {
                // Keep the tail, which may hold half a marker.
                let keep = text.len().saturating_sub(marker.len());
                text = text.split_off(keep);
            }
        }
    }
}

/// User and system time of process `pid`, in clock ticks.
fn cpu_ticks(pid: u32) -> Result<u64, Error> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))?;
    // The fields after the command name, which is in parentheses.
    let rest = stat
        .rsplit_once(')')
        .ok_or("no command in /proc/PID/stat")?
        .1;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // utime and stime are fields 14 and 15 of the whole line, 12 and 13
    // after the state.
    let utime: u64 = fields.get(11).ok_or("no utime")?.parse()?;
    let stime: u64 = fields.get(12).ok_or("no stime")?.parse()?;
    Ok(utime + stime)
}

fn clock_ticks() -> f64 {
    // SAFETY: sysconf reads a constant.
    let ticks = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if ticks > 0 {
        ticks as f64
    } else {
        100.0
    }
}

/// Resident memory of process `pid` in bytes.
fn resident(pid: u32) -> Result<u64, Error> {
    let statm = std::fs::read_to_string(format!("/proc/{pid}/statm"))?;
    let pages: u64 = statm
        .split_whitespace()
        .nth(1)
        .ok_or("no resident size")?
        .parse()?;
    // SAFETY: sysconf reads a constant.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    Ok(pages * u64::try_from(page).unwrap_or(4096))
}

/// Holds a session open, as another process running it would, and
/// appends a ~200-byte item every 100 ms until stopped.
struct Writer {
    task: JoinHandle<Result<(), pod::PodError>>,
    stop: tokio::sync::watch::Sender<bool>,
}

impl Writer {
    async fn start(store: &FileStore, id: uuid::Uuid) -> Result<Self, Error> {
        let log = store.open(id, Durability::Never).await?.writer;
        let (stop, mut stopped) = tokio::sync::watch::channel(false);
        let task = tokio::spawn(async move {
            let text = "y".repeat(200);
            let mut tick = tokio::time::interval(Duration::from_millis(100));
            loop {
                tokio::select! {
                    _ = tick.tick() => {}
                    _ = stopped.changed() => break,
                }
                let record = pod::log::LogRecord::Item(Item::user(text.clone()));
                log.append(&record, false).await?;
            }
            log.shutdown().await
        });
        Ok(Self { task, stop })
    }

    /// Fails if the writer stopped by itself.
    fn check(&self) -> Result<(), Error> {
        match self.task.is_finished() {
            true => Err("the writer stopped".into()),
            false => Ok(()),
        }
    }

    async fn stop(self) -> Result<(), Error> {
        let _ = self.stop.send(true);
        self.task.await??;
        Ok(())
    }
}
