//! A fleet through a database outage (issue 53): 300 sessions × 5 model
//! requests at 2 s each on `pod serve` workers, with the throwaway
//! PostgreSQL stopped as a crash (`SIGQUIT`: every connection dropped) 4 s
//! into the run for 8, 15 and 60 s, and with two workers of which one is
//! `SIGKILL`ed while the database is away. Reported per run: how the
//! sessions ended (`pod sessions --json`), sessions the workers dropped,
//! model requests against the outage-free count (a request whose answer
//! could not be recorded is asked again), and wall time against the ideal
//! (10 s of model time plus the outage).

use crate::serve::{children_cpu, setup_with, submit, write_tasks};
use crate::support::fmt_duration;
use std::collections::BTreeMap;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

type Error = Box<dyn std::error::Error>;

/// Model requests per session.
const REQUESTS: u64 = 5;
/// The model's latency (the run).
const LATENCY: Duration = Duration::from_secs(2);
/// When the database goes away, from the workers' start.
const CRASH_AT: Duration = Duration::from_secs(4);

/// One run's shape.
struct Run {
    sessions: usize,
    workers: usize,
    down: Duration,
    /// SIGKILL the first worker as the database goes.
    kill_one: bool,
}

/// What one run measured.
struct Row {
    wall: Duration,
    statuses: BTreeMap<String, usize>,
    dropped: usize,
    requests: u64,
    cpu: Duration,
}

async fn measure(run: &Run) -> Result<Row, Error> {
    let mut setup = setup_with(LATENCY, true).await?;
    let tasks = write_tasks(&setup, run.sessions)?;
    submit(&setup, &tasks)?;
    let requests_before = setup.server.stats().await?.requests;
    let cpu_before = children_cpu();
    let started = Instant::now();
    let mut workers: Vec<(Child, std::path::PathBuf)> = Vec::new();
    for i in 0..run.workers {
        let log = setup.dir.path().join(format!("worker-{i}.log"));
        let child = setup
            .command()
            .args(["serve", "--exit-when-idle", "--workers"])
            .arg(run.sessions.to_string())
            .stdout(std::fs::File::create(&log)?)
            .stderr(Stdio::null())
            .spawn()?;
        workers.push((child, log));
    }
    if !run.down.is_zero() {
        tokio::time::sleep(CRASH_AT).await;
        setup.pg.crash();
        if run.kill_one {
            workers[0].0.kill()?;
        }
        tokio::time::sleep(run.down).await;
        setup.pg.start_again();
    }
    loop {
        let mut running = 0;
        for (child, _) in &mut workers {
            if child.try_wait()?.is_none() {
                running += 1;
            }
        }
        if running == 0 {
            break;
        }
        if started.elapsed() > Duration::from_secs(1800) {
            for (child, _) in &mut workers {
                let _ = child.kill();
            }
            return Err("the fleet did not finish within 30 minutes".into());
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let wall = started.elapsed();
    let cpu = children_cpu().saturating_sub(cpu_before);
    let requests = setup.server.stats().await?.requests - requests_before;
    let mut dropped = 0;
    for (_, log) in &workers {
        dropped += std::fs::read_to_string(log)?
            .lines()
            .filter(|l| l.starts_with("dropped "))
            .count();
    }
    let out = setup.command().args(["sessions", "--json"]).output()?;
    let listed: serde_json::Value = serde_json::from_slice(&out.stdout)?;
    let mut statuses = BTreeMap::new();
    for session in listed.as_array().into_iter().flatten() {
        let status = &session["status"];
        let name = status
            .as_str()
            .or_else(|| status["state"].as_str())
            .map(str::to_string)
            .unwrap_or_else(|| status.to_string());
        *statuses.entry(name).or_insert(0) += 1;
    }
    Ok(Row {
        wall,
        statuses,
        dropped,
        requests,
        cpu,
    })
}

/// Prints the table (see the module docs).
pub async fn run(quick: bool) -> Result<(), Error> {
    let runs: Vec<Run> = if quick {
        vec![Run {
            sessions: 50,
            workers: 1,
            down: Duration::from_secs(8),
            kill_one: false,
        }]
    } else {
        [
            (1, 0, false),
            (1, 8, false),
            (1, 15, false),
            (1, 60, false),
            (2, 15, true),
        ]
        .into_iter()
        .map(|(workers, down, kill_one)| Run {
            sessions: 300,
            workers,
            down: Duration::from_secs(down),
            kill_one,
        })
        .collect()
    };
    println!(
        "\n### A database outage: sessions × {REQUESTS} requests at {}s, PostgreSQL crashed {}s in\n",
        LATENCY.as_secs(),
        CRASH_AT.as_secs()
    );
    println!("| sessions | workers | down | how they ended | dropped | requests (extra) | wall | wall ÷ (ideal + down) | CPU / request |");
    println!("|---:|---|---:|---|---:|---:|---:|---:|---:|");
    for run in &runs {
        let row = measure(run).await?;
        let ideal = LATENCY * REQUESTS as u32 + run.down;
        let expected = run.sessions as u64 * REQUESTS;
        let ended: Vec<String> = row
            .statuses
            .iter()
            .map(|(status, n)| format!("{n} {status}"))
            .collect();
        println!(
            "| {} | {}{} | {} s | {} | {} | {} ({:+}) | {} | {:.2}× | {:.3} ms |",
            run.sessions,
            run.workers,
            if run.kill_one { ", one killed" } else { "" },
            run.down.as_secs(),
            ended.join(", "),
            row.dropped,
            row.requests,
            row.requests as i64 - expected as i64,
            fmt_duration(row.wall),
            row.wall.as_secs_f64() / ideal.as_secs_f64(),
            row.cpu.as_secs_f64() * 1000.0 / row.requests.max(1) as f64,
        );
    }
    Ok(())
}
