//! `verify`: what verification (`--verify`) costs a run beyond its checks'
//! own time, and what a failing round adds to the next request.
//!
//! Turns answered at once by a scripted model, each ending a run: without
//! checks, and with one check (`true`) that passes. The difference per
//! turn, less the check's own time (the same command run the same way,
//! timed alone), is what a round costs pod: the record written and synced,
//! its events, the gate. Then the reminder a failing round commits, for a
//! check that fails like a Python test and for one that prints 100 KB.

use crate::support::fmt_duration;
use pod::log::{CheckRecord, VerifyRecord};
use pod::verify::{Check, VerifyConfig};
use pod::{Durability, Pod, PodConfig};
use pod_llm::{ScriptStep, ScriptedProvider};
use std::sync::Arc;
use std::time::{Duration, Instant};

pub async fn run(quick: bool) -> Result<(), Box<dyn std::error::Error>> {
    let turns = if quick { 50 } else { 500 };
    println!("\n### Verification: a passing round's overhead ({turns} turns, durability turn)\n");
    println!("| setting | per turn |");
    println!("|---|---:|");
    // A first session pays for what any first session pays once.
    session(false, 20).await?;
    let without = session(false, turns).await?;
    let with = session(true, turns).await?;
    let check = check_alone(turns).await?;
    println!("| no checks | {} |", fmt_duration(without));
    println!("| one check (`true`) | {} |", fmt_duration(with));
    println!(
        "| the check alone (`bash -c true` under the sandbox) | {} |",
        fmt_duration(check)
    );
    let overhead = with.saturating_sub(without).saturating_sub(check);
    println!(
        "| **a round beyond its check** | **{}** |",
        fmt_duration(overhead)
    );
    println!("\n### Verification: what a failing round adds to the next request\n");
    println!("| check output | reminder text | as a chat message (JSON) |");
    println!("|---|---:|---:|");
    let traceback = "Traceback (most recent call last):\n  File \"/work/test_add.py\", line 2, in <module>\n    assert add(2, 2) == 4, f\"add(2, 2) == {add(2, 2)}, expected 4\"\n           ^^^^^^^^^^^^^^\nAssertionError: add(2, 2) == 0, expected 4\n";
    let long: String = (0..2_000)
        .map(|n| format!("test tests::case_{n:04} ... FAILED\n"))
        .collect();
    for (what, output) in [
        ("a Python assertion (5 lines)", traceback.to_string()),
        ("100 KB of test log", long),
    ] {
        let text = pod::verify::reminder(&failed_round(&output), 3);
        let message = serde_json::json!({"role": "user", "content": text}).to_string();
        println!(
            "| {what} | {} bytes | {} bytes |",
            text.len(),
            message.len()
        );
    }
    Ok(())
}

fn failed_round(output: &str) -> VerifyRecord {
    VerifyRecord {
        round: 1,
        answer: uuid::Uuid::nil(),
        checks: vec![CheckRecord {
            name: None,
            command: "python3 test_add.py".into(),
            exit_code: Some(1),
            signal: None,
            timed_out: false,
            error: None,
            output_tail: pod::verify::output_tail(output),
            duration_ms: 300,
        }],
        grader: None,
        passed: false,
        at: chrono::Utc::now(),
    }
}

/// The time per turn of `turns` one-answer runs, with or without a check.
async fn session(verify: bool, turns: usize) -> Result<Duration, Box<dyn std::error::Error>> {
    let dir = tempfile::tempdir()?;
    let steps: Vec<ScriptStep> = (0..turns).map(|_| ScriptStep::text("done")).collect();
    let mut config = PodConfig::new(
        pod::PodHome::new(dir.path().join("home")),
        dir.path(),
        Arc::new(
            ScriptedProvider::from_steps(steps)
                .without_recording()
                .without_usage_estimate(),
        ),
    );
    config.durability = Durability::Turn;
    if verify {
        config.verify = Some(VerifyConfig {
            checks: vec![Check {
                name: None,
                command: "true".into(),
            }],
            timeout: Duration::from_secs(60),
            max_rounds: 3,
            grader: None,
        });
    }
    let pod = Pod::spawn(config).await?;
    let start = Instant::now();
    for i in 0..turns {
        pod.prompt(format!("turn {i}")).await?;
    }
    let elapsed = start.elapsed();
    pod.shutdown().await?;
    Ok(elapsed / turns as u32)
}

/// The check's own time: `true` run as a round runs it, alone.
async fn check_alone(runs: usize) -> Result<Duration, Box<dyn std::error::Error>> {
    let dir = tempfile::tempdir()?;
    let workspace = pod_tools::Workspace::new(dir.path(), pod_tools::FileTracker::new())?
        .with_sandbox(pod_tools::Sandbox::new(
            pod_tools::SandboxPolicy::default(),
            dir.path(),
            Some(dir.path().join("tmp")),
        ));
    let cancel = tokio_util::sync::CancellationToken::new();
    let start = Instant::now();
    for _ in 0..runs {
        pod_tools::workspace::bash::run_command(
            &workspace,
            "true",
            Duration::from_secs(60),
            64 * 1024,
            &cancel,
        )
        .await?;
    }
    Ok(start.elapsed() / runs as u32)
}
