//! Runtime overhead per turn with an instant scripted model.

use crate::support::fmt_duration;
use pod::{Durability, Pod};
use pod_llm::{ScriptStep, ScriptedProvider};
use serde_json::json;
use std::sync::Arc;
use std::time::Instant;

/// Prints per-turn time and append throughput for each durability setting.
pub async fn run(quick: bool) -> Result<(), Box<dyn std::error::Error>> {
    // `--turns=N` sets the length (the flat-cost check runs 20,000).
    let turns = std::env::args()
        .find_map(|a| a.strip_prefix("--turns=").and_then(|n| n.parse().ok()))
        .unwrap_or(if quick { 200 } else { 2_000 });
    println!("\n### Per-turn overhead (instant scripted model, one tool call per turn)\n");
    println!("| durability | turns | per turn | items appended / s |");
    println!("|---|---:|---:|---:|");
    // `--durability=never` (or turn, always) runs one setting only.
    let only =
        std::env::args().find_map(|a| a.strip_prefix("--durability=").map(str::to_lowercase));
    // The process's first session pays for what any first session in a
    // process pays once (the runtime's threads, the allocator's arenas, the
    // file system's first blocks): a short one is run and not counted, so
    // the figure is the per-turn cost of a session in a running process.
    session(Durability::Never, 50).await?;
    for durability in [Durability::Never, Durability::Turn, Durability::Always] {
        if only
            .as_deref()
            .is_some_and(|o| o != format!("{durability:?}").to_lowercase())
        {
            continue;
        }
        let (elapsed, items) = session(durability, turns).await?;
        println!(
            "| {durability:?} | {turns} | {} | {:.0} |",
            fmt_duration(elapsed / turns as u32),
            items as f64 / elapsed.as_secs_f64()
        );
    }
    Ok(())
}

/// Runs one session of `turns` turns; returns its time and item count.
async fn session(
    durability: Durability,
    turns: usize,
) -> Result<(std::time::Duration, usize), Box<dyn std::error::Error>> {
    let dir = tempfile::tempdir()?;
    let steps: Vec<ScriptStep> = (0..turns)
        .flat_map(|i| {
            [
                ScriptStep::tool_call("echo", json!({"text": format!("step {i}")})),
                ScriptStep::text("ok"),
            ]
        })
        .collect();
    let mut config = crate::support::echo_config(
        dir.path(),
        Arc::new(
            ScriptedProvider::from_steps(steps)
                .without_recording()
                .without_usage_estimate(),
        ),
    );
    config.durability = durability;
    let pod = Pod::spawn(config).await?;
    let start = Instant::now();
    for i in 0..turns {
        pod.prompt(format!("turn {i}")).await?;
    }
    let elapsed = start.elapsed();
    let items = pod.get_history().await?.len();
    pod.shutdown().await?;
    Ok((elapsed, items))
}
