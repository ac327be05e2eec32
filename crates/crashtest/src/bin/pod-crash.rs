//! `pod-crash`: SIGKILL crash injection against the real `pod` binary.
//!
//! ```sh
//! cargo build -p pod-cli && cargo run -p pod-crashtest --bin pod-crash -- --kills 30 --seed 7
//! cargo run --release -p pod-crashtest --bin pod-crash -- --soak --pod target/release/pod
//! cargo run --release -p pod-crashtest --bin pod-crash -- --fleet --kills 200 --sessions 20
//! cargo run --release -p pod-crashtest --bin pod-crash -- --tree --kills 300 --items 8
//! ```

use anyhow::{bail, Context, Result};
use pod_crashtest::fleet::FleetConfig;
use pod_crashtest::harness::{run, CrashConfig, Durability};
use std::path::PathBuf;

const USAGE: &str = "usage: pod-crash [--kills N] [--seed S] [--soak] [--durability turn|always|never] \
[--items N] [--pod PATH] [--keep]
  --kills N      kills to inject (default 30; --soak: 2000)
  --seed S       seed of every choice (default: from the clock, printed)
  --soak         many kills, cycling the durability settings unless one is given
  --pod PATH     the pod binary (default: $POD_BIN, else target/{debug,release}/pod next to this binary)
  --keep         keep the temporary directories
  --fleet        fleet mode: sessions in PostgreSQL, `pod serve` workers killed
                 (SIGKILL) and paused (SIGSTOP) at random; --kills counts both
  --store URL    fleet mode's database (default: a throwaway cluster of its own)
  --sessions N   fleet mode's sessions (default 20)
  --workers N    fleet mode's `pod serve` processes (default 3)
  --slots N      fleet mode's sessions per worker at once (default 2)
  --outages N    fleet mode: also crash its own database N times, for one to
                 four leases each (not with --store)
  --tree         tree mode: a parent with two parallel subagents, killed at
                 random and resumed until it answers (--items: per child, default 6)";

fn main() {
    if let Err(err) = real_main() {
        eprintln!("{err:#}");
        std::process::exit(1);
    }
}

fn real_main() -> Result<()> {
    let mut kills: Option<u64> = None;
    let mut seed: Option<u64> = None;
    let mut soak = false;
    let mut durability: Option<Durability> = None;
    let mut items: Option<usize> = None;
    let mut pod: Option<PathBuf> = None;
    let mut keep = false;
    let mut fleet = false;
    let mut store: Option<String> = None;
    let mut sessions = 20usize;
    let mut workers = 3usize;
    let mut slots: Option<u32> = None;
    let mut outages = 0u64;
    let mut tree = false;
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let mut value = || {
            args.next()
                .with_context(|| format!("{arg} needs a value\n{USAGE}"))
        };
        match arg.as_str() {
            "--kills" => kills = Some(value()?.parse().context("--kills")?),
            "--seed" => seed = Some(value()?.parse().context("--seed")?),
            "--soak" => soak = true,
            "--durability" => durability = Some(value()?.parse().map_err(anyhow::Error::msg)?),
            "--items" => items = Some(value()?.parse().context("--items")?),
            "--pod" => pod = Some(PathBuf::from(value()?)),
            "--keep" => keep = true,
            "--fleet" => fleet = true,
            "--tree" => tree = true,
            "--store" => store = Some(value()?),
            "--sessions" => sessions = value()?.parse().context("--sessions")?,
            "--workers" => workers = value()?.parse().context("--workers")?,
            "--slots" => slots = Some(value()?.parse().context("--slots")?),
            "--outages" => outages = value()?.parse().context("--outages")?,
            "-h" | "--help" => {
                println!("{USAGE}");
                return Ok(());
            }
            other => bail!("unknown argument {other:?}\n{USAGE}"),
        }
    }
    let pod = match pod.or_else(|| std::env::var_os("POD_BIN").map(PathBuf::from)) {
        Some(pod) => pod,
        None => sibling_pod()?,
    };
    // Absolute: each process runs in its round's workspace.
    let pod = std::fs::canonicalize(&pod)
        .with_context(|| format!("no pod binary at {}", pod.display()))?;
    let seed = seed.unwrap_or_else(clock_seed);
    if tree {
        let mut config =
            pod_crashtest::tree::TreeConfig::new(pod.clone(), kills.unwrap_or(30), seed);
        // Per child: 6 unless given.
        config.items = items.unwrap_or(config.items).min(20);
        config.keep = keep;
        println!(
            "pod-crash --tree: {} with seed {seed}, {} kills",
            pod.display(),
            config.kills
        );
        let report = pod_crashtest::tree::run(&config).map_err(anyhow::Error::msg)?;
        println!("{report}");
        return Ok(());
    }
    if fleet {
        // A throwaway cluster unless a database is given.
        if outages > 0 && store.is_some() {
            bail!("--outages crashes the harness's own database: leave out --store");
        }
        let mut cluster = store.is_none().then(pod_testkit::postgres::Postgres::start);
        let url = store.unwrap_or_else(|| cluster.as_ref().map(|c| c.url()).unwrap_or_default());
        let mut config = FleetConfig::new(pod.clone(), url, kills.unwrap_or(30), seed);
        config.sessions = sessions;
        config.workers = workers;
        config.slots = slots.unwrap_or(config.slots);
        config.items = items.unwrap_or(20).min(12);
        config.keep = keep;
        config.outages = outages;
        println!(
            "pod-crash --fleet: {} with seed {seed}, {} workers of {} slots, {} sessions, {} kills and pauses, up to {} database outages",
            pod.display(),
            config.workers,
            config.slots,
            config.sessions,
            config.chaos,
            config.outages
        );
        let started = std::time::Instant::now();
        let report = pod_crashtest::fleet::run_with(&config, cluster.as_mut())
            .map_err(anyhow::Error::msg)?;
        println!("{report} in {:.0} s", started.elapsed().as_secs_f64());
        return Ok(());
    }
    let kills = kills.unwrap_or(if soak { 2000 } else { 30 });
    let settings: Vec<Durability> = match (durability, soak) {
        (Some(d), _) => vec![d],
        (None, true) => vec![Durability::Turn, Durability::Always, Durability::Never],
        (None, false) => vec![Durability::Turn],
    };
    println!(
        "pod-crash: {} with seed {seed}, {kills} kills",
        pod.display()
    );
    let share = kills.div_ceil(settings.len() as u64);
    for (n, setting) in settings.iter().enumerate() {
        let config = CrashConfig {
            pod: pod.clone(),
            kills: share,
            // One seed per setting, derived so the whole run reproduces.
            seed: seed.wrapping_add(n as u64),
            durability: *setting,
            items: items.unwrap_or(20),
            keep,
        };
        let report = run(&config).map_err(anyhow::Error::msg)?;
        println!("durability {}: {report}", setting.as_arg());
    }
    Ok(())
}

fn sibling_pod() -> Result<PathBuf> {
    let me = std::env::current_exe().context("cannot locate this binary")?;
    let dir = me.parent().context("this binary has no directory")?;
    let pod = dir.join("pod");
    if pod.exists() {
        Ok(pod)
    } else {
        bail!(
            "no pod binary next to {} (build it with `cargo build -p pod-cli`, or pass --pod PATH)",
            me.display()
        )
    }
}

fn clock_seed() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(1, |d| d.as_nanos() as u64)
}
