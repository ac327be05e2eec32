//! `pod-crash`: SIGKILL crash injection against the real `pod` binary.
//!
//! ```sh
//! cargo build -p pod-cli && cargo run -p pod-crashtest --bin pod-crash -- --kills 30 --seed 7
//! cargo run --release -p pod-crashtest --bin pod-crash -- --soak --pod target/release/pod
//! ```

use anyhow::{bail, Context, Result};
use pod_crashtest::harness::{run, CrashConfig, Durability};
use std::path::PathBuf;

const USAGE: &str = "usage: pod-crash [--kills N] [--seed S] [--soak] [--durability turn|always|never] \
[--items N] [--pod PATH] [--keep]
  --kills N      kills to inject (default 30; --soak: 2000)
  --seed S       seed of every choice (default: from the clock, printed)
  --soak         many kills, cycling the durability settings unless one is given
  --pod PATH     the pod binary (default: $POD_BIN, else target/{debug,release}/pod next to this binary)
  --keep         keep the temporary directories";

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
    let mut items = 20usize;
    let mut pod: Option<PathBuf> = None;
    let mut keep = false;
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
            "--items" => items = value()?.parse().context("--items")?,
            "--pod" => pod = Some(PathBuf::from(value()?)),
            "--keep" => keep = true,
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
            items,
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
