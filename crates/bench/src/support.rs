//! Shared pieces: timing and memory readings (the instant echo tool is the
//! test kit's, concurrency-safe).

use pod::{PodConfig, PodHome};
use pod_testkit::tools::Echo;
use pod_worker::ToolRegistry;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A Pod in `dir` (its home and workspace) on `provider`, with the test
/// kit's instant, concurrency-safe `echo` as its own tool: what most
/// sections measure with.
pub fn echo_config(dir: &Path, provider: Arc<dyn pod_llm::Provider>) -> PodConfig {
    let mut config = PodConfig::new(PodHome::new(dir), dir, provider);
    let mut tools = ToolRegistry::new();
    tools.register(Echo::concurrent());
    config.tools = tools;
    config
}

/// Median of `runs` timings of `f`.
pub async fn median<F, Fut>(runs: usize, mut f: F) -> Result<Duration, Box<dyn std::error::Error>>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<(), Box<dyn std::error::Error>>>,
{
    let mut times = Vec::with_capacity(runs);
    for _ in 0..runs {
        let start = Instant::now();
        f().await?;
        times.push(start.elapsed());
    }
    times.sort();
    Ok(times[times.len() / 2])
}

/// Resident memory of this process in bytes (Linux), or 0 elsewhere.
pub fn resident_bytes() -> u64 {
    std::fs::read_to_string("/proc/self/statm")
        .ok()
        .and_then(|s| {
            s.split_whitespace()
                .nth(1)
                .and_then(|p| p.parse::<u64>().ok())
        })
        .map_or(0, |pages| pages * 4096)
}

/// One line describing the machine, for the report.
pub fn machine_line() -> String {
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split(':').nth(1))
                .map(|m| m.trim().to_string())
        })
        .unwrap_or_else(|| "unknown CPU".into());
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    let mem = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .next()
                .map(|l| l.split_whitespace().nth(1).unwrap_or("0").to_string())
        })
        .and_then(|kb| kb.parse::<u64>().ok())
        .map_or(0, |kb| kb / 1024 / 1024);
    format!("Machine: {cpu}, {cores} cores, {mem} GiB RAM")
}

/// Formats a duration in the most readable unit.
pub fn fmt_duration(d: Duration) -> String {
    let us = d.as_secs_f64() * 1e6;
    if us < 1_000.0 {
        format!("{us:.1} µs")
    } else if us < 1_000_000.0 {
        format!("{:.2} ms", us / 1e3)
    } else {
        format!("{:.2} s", us / 1e6)
    }
}

/// The `pod` binary of the same build as this one.
pub fn pod_binary() -> Result<std::path::PathBuf, Box<dyn std::error::Error>> {
    let exe = std::env::current_exe()?;
    let pod = exe.with_file_name("pod");
    if !pod.is_file() {
        return Err(format!(
            "{} is missing: build it first (cargo build --release -p pod-cli)",
            pod.display()
        )
        .into());
    }
    Ok(pod)
}
