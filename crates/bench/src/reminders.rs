//! Reminder cost: reminder tokens as a share of all prompt tokens.

use pod::Pod;
use pod_llm::tokens::{estimate_item_tokens, estimate_request_tokens};
use pod_llm::{ItemKind, ScriptStep, ScriptedProvider, SystemKind};
use serde_json::json;
use std::collections::HashSet;
use std::sync::Arc;

/// 200 requests in 20 turns of 10, a 10-item plan written once. Tool calls
/// return about 1 KB, the size of a short file excerpt or command output.
/// The cache bench plays the same session.
pub fn script() -> Vec<ScriptStep> {
    script_with(1_000, false)
}

fn plan(done: usize) -> serde_json::Value {
    let todos: Vec<_> = (0..10)
        .map(|i| {
            let status = match i.cmp(&done) {
                std::cmp::Ordering::Less => "completed",
                std::cmp::Ordering::Equal => "in_progress",
                std::cmp::Ordering::Greater => "pending",
            };
            json!({"id": format!("t{i}"), "content": format!("Part {i} of the migration"),
            "status": status})
        })
        .collect();
    json!({"todos": todos})
}

/// The same session with tool results of about `result_bytes`, and with
/// `progress` a plan that advances: each turn from the second starts by
/// completing one more item (a `todo_write` in place of one tool call).
pub fn script_with(result_bytes: usize, progress: bool) -> Vec<ScriptStep> {
    let line = "fn step() -> Result<(), Error> { Ok(()) }\n";
    let output = line.repeat((result_bytes / line.len()).max(1));
    let mut steps = vec![ScriptStep::tool_call("todo_write", plan(0))];
    while steps.len() < 200 {
        let n = steps.len();
        if n % 10 == 9 {
            steps.push(ScriptStep::text("Continuing in the next turn."));
        } else if progress && n % 10 == 0 {
            steps.push(ScriptStep::tool_call("todo_write", plan((n / 10).min(9))));
        } else {
            steps.push(ScriptStep::tool_call("echo", json!({"text": output})));
        }
    }
    steps
}

/// Prints the share for the default cadence and for "every request", with
/// ~200-byte and ~1 KB tool results, a plan written once and one that
/// advances.
pub async fn run(_quick: bool) -> Result<(), Box<dyn std::error::Error>> {
    println!("\n### Reminder cost (200 requests, 20 turns, 10-item plan)\n");
    println!("| tool results | plan | cadence | reminders | reminder tokens | all prompt tokens | share |");
    println!("|---|---|---|---:|---:|---:|---:|");
    for (size_label, bytes) in [("~200 B", 200), ("~1 KB", 1_000)] {
        for (plan_label, progress) in [("written once", false), ("advancing", true)] {
            for (label, every) in [
                ("default (turn start, then every 5)", 5),
                ("every request", 1),
            ] {
                let (reminders, reminder_tokens, all) = measure(bytes, progress, every).await?;
                println!(
                    "| {size_label} | {plan_label} | {label} | {reminders} | {reminder_tokens} | {all} | {:.2}% |",
                    100.0 * reminder_tokens as f64 / all as f64
                );
            }
        }
    }
    Ok(())
}

/// (reminders, their tokens, all prompt tokens) of one session.
async fn measure(
    bytes: usize,
    progress: bool,
    every: u32,
) -> Result<(usize, u64, u64), Box<dyn std::error::Error>> {
    let dir = tempfile::tempdir()?;
    let model = ScriptedProvider::from_steps(script_with(bytes, progress));
    let mut config = crate::support::echo_config(dir.path(), Arc::new(model.clone()));
    config.remind_every = every;
    let pod = Pod::spawn(config).await?;
    for turn in 0..20 {
        pod.prompt(format!("Turn {turn}: keep going.")).await?;
    }
    pod.shutdown().await?;
    let requests = model.requests();
    let mut all = 0u64;
    let mut reminder_tokens = 0u64;
    let mut reminders = HashSet::new();
    for request in &requests {
        all += estimate_request_tokens(request);
        for item in request.history.iter() {
            if let ItemKind::System {
                kind: SystemKind::Reminder,
                ..
            } = item.kind
            {
                reminder_tokens += estimate_item_tokens(item);
                reminders.insert(item.id);
            }
        }
    }
    Ok((reminders.len(), reminder_tokens, all))
}
