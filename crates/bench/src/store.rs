//! The session stores side by side: appends per second and the time to
//! read a session back (what a resume starts with), for the file store and
//! PostgreSQL on this machine (a throwaway cluster on a unix socket, fsync
//! on), and the failover time of a fleet: from SIGKILL of the worker
//! running a session to the next record another worker commits to it.

use crate::support::fmt_duration;
use pod::log::{LogRecord, SessionHeader};
use pod::{Durability, FileStore, Item, PodHome, SessionStore};
use pod_store_pg::{PgStore, PgStoreConfig};
use pod_testkit::postgres::Postgres;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};
use uuid::Uuid;

type Error = Box<dyn std::error::Error>;

/// An item the size of a typical tool result (~400 bytes of JSON).
fn item(n: usize) -> LogRecord {
    LogRecord::Item(Item::user(format!(
        "result {n}: {}",
        "the quick brown fox jumps over the lazy dog; ".repeat(7)
    )))
}

fn header() -> SessionHeader {
    SessionHeader::new(Uuid::new_v4(), "bench".into(), "/tmp".into())
}

/// Appends `n` records one by one, each awaited (as a turn awaits its
/// items); returns the session and the appends per second.
async fn appends(
    store: &dyn SessionStore,
    n: usize,
    durability: Durability,
    sync: bool,
) -> Result<(Uuid, f64), Error> {
    let header = header();
    let log = store.create(&header, durability).await?;
    let start = Instant::now();
    for i in 0..n {
        log.append(&item(i), sync).await?;
    }
    let elapsed = start.elapsed();
    log.shutdown().await?;
    Ok((header.session_id, n as f64 / elapsed.as_secs_f64()))
}

/// Median time of `read` of session `id` over 5 runs.
async fn read_time(store: &dyn SessionStore, id: Uuid) -> Result<Duration, Error> {
    let mut times = Vec::new();
    for _ in 0..5 {
        let start = Instant::now();
        let contents = store.read(id).await?;
        std::hint::black_box(contents);
        times.push(start.elapsed());
    }
    times.sort();
    Ok(times[times.len() / 2])
}

/// Runs the store benchmarks.
pub async fn run(quick: bool) -> Result<(), Error> {
    let pg = Postgres::start_with(true);
    let pg_store: Arc<dyn SessionStore> =
        Arc::new(PgStore::connect(PgStoreConfig::new(pg.url())).await?);
    let dir = tempfile::tempdir()?;
    let file_store: Arc<dyn SessionStore> =
        Arc::new(FileStore::new(PodHome::new(dir.path().join("home"))));
    let sizes: &[usize] = if quick { &[200] } else { &[1_000, 10_000] };

    println!("\n## Session stores: appends and reads\n");
    println!(
        "One session, records of ~400 bytes appended one at a time, each awaited. \
         PostgreSQL 15 on a unix socket of a throwaway cluster (fsync on), same disk.\n"
    );
    println!("| store | durability | records | appends/s | read back |");
    println!("|---|---|---:|---:|---:|");
    let cases: [(&str, &Arc<dyn SessionStore>, Durability, bool); 5] = [
        ("file", &file_store, Durability::Never, false),
        ("file", &file_store, Durability::Always, true),
        ("postgres", &pg_store, Durability::Never, false),
        ("postgres", &pg_store, Durability::Turn, false),
        ("postgres", &pg_store, Durability::Always, true),
    ];
    for &n in sizes {
        for (name, store, durability, sync) in &cases {
            // fsync per append at 10k records is minutes of the same number.
            let n = match sync {
                true => n.min(1_000),
                false => n,
            };
            let (id, rate) = appends(store.as_ref(), n, *durability, *sync).await?;
            let read = read_time(store.as_ref(), id).await?;
            println!(
                "| {name} | {} | {n} | {rate:.0} | {} |",
                match durability {
                    Durability::Never => "never",
                    Durability::Turn => "turn",
                    Durability::Always => "always",
                },
                fmt_duration(read)
            );
        }
    }
    if !quick {
        failover(&pg).await?;
    }
    Ok(())
}

/// Kill-to-next-commit time with the default lease and a short one.
async fn failover(pg: &Postgres) -> Result<(), Error> {
    let Some(pod) = pod_binary() else {
        println!("\n(failover not measured: build the pod binary first, `cargo build --release -p pod-cli`)");
        return Ok(());
    };
    println!("\n## Fleet failover\n");
    println!(
        "A session runs on a `pod serve` worker; the worker is killed with SIGKILL inside a \
         tool call and a second worker is already polling. Time from the kill to the first \
         record the second worker commits (the interrupted result).\n"
    );
    println!("| lease | kill → next committed record |");
    println!("|---|---:|");
    for ttl in [None, Some(5u64)] {
        let time = failover_once(pg, &pod, ttl).await?;
        let lease = ttl.map_or("30 s (default)".to_string(), |s| format!("{s} s"));
        println!("| {lease} | {} |", fmt_duration(time));
    }
    Ok(())
}

fn pod_binary() -> Option<PathBuf> {
    let me = std::env::current_exe().ok()?;
    let pod = me.parent()?.join("pod");
    pod.is_file().then_some(pod)
}

async fn failover_once(pg: &Postgres, pod: &Path, ttl: Option<u64>) -> Result<Duration, Error> {
    let dir = tempfile::tempdir()?;
    let script = dir.path().join("script.json");
    std::fs::write(
        &script,
        serde_json::json!({"model": "bench", "steps": [
            {"tool_calls": [{"name": "bash", "arguments": {"command": "sleep 120"}}]},
            {"text": "done"}
        ]})
        .to_string(),
    )?;
    let command = |home: &str| {
        let mut cmd = Command::new(pod);
        cmd.env("POD_HOME", dir.path().join(home))
            .env("POD_STORE", pg.url())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        cmd
    };
    let out = command("submitter")
        .args(["submit", "--yes", "--script"])
        .arg(&script)
        .arg("--workspace")
        .arg(dir.path())
        .arg("wait")
        .stdout(Stdio::piped())
        .output()?;
    let id: Uuid = String::from_utf8_lossy(&out.stdout).trim().parse()?;
    let serve = |home: &str| {
        let mut cmd = command(home);
        cmd.arg("serve");
        if let Some(ttl) = ttl {
            cmd.args(["--lease-ttl", &format!("{ttl}s")]);
        }
        cmd
    };
    let store = PgStore::connect(PgStoreConfig::new(pg.url())).await?;
    let mut first = serve("a").spawn()?;
    // Wait until the first worker is inside the bash call (2 records after
    // the header and the task: the call).
    while store.read(id).await?.records.len() < 2 {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let mut second = serve("b").spawn()?;
    let committed = store.read(id).await?.records.len();
    first.kill()?;
    let killed = Instant::now();
    first.wait()?;
    while store.read_after(id, committed).await?.is_empty() {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let time = killed.elapsed();
    let _ = second.kill();
    let _ = second.wait();
    // The first worker's `sleep 120` is its own process; end it.
    let _ = Command::new("pkill").args(["-f", "sleep 120"]).status();
    Ok(time)
}
