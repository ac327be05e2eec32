//! Reminder cost: reminder tokens as a share of all prompt tokens.

use pod::{Pod, PodConfig, PodHome};
use pod_llm::tokens::{estimate_item_tokens, estimate_request_tokens};
use pod_llm::{ItemKind, ScriptStep, ScriptedProvider, SystemKind};
use pod_testkit::tools::Echo;
use pod_worker::ToolRegistry;
use serde_json::json;
use std::collections::HashSet;
use std::sync::Arc;

/// 200 requests in 20 turns of 10, a 10-item plan written once. Tool calls
/// return about 1 KB, the size of a short file excerpt or command output.
/// The cache bench plays the same session.
pub fn script() -> Vec<ScriptStep> {
    let todos: Vec<_> = (0..10)
        .map(|i| {
            json!({"id": format!("t{i}"), "content": format!("Part {i} of the migration"),
            "status": if i == 0 { "in_progress" } else { "pending" }})
        })
        .collect();
    let mut steps = vec![ScriptStep::tool_call("todo_write", json!({"todos": todos}))];
    while steps.len() < 200 {
        if steps.len() % 10 == 9 {
            steps.push(ScriptStep::text("Continuing in the next turn."));
        } else {
            let output = "fn step() -> Result<(), Error> { Ok(()) }\n".repeat(24);
            steps.push(ScriptStep::tool_call("echo", json!({"text": output})));
        }
    }
    steps
}

/// Prints the share for the default cadence and for "every request".
pub async fn run(_quick: bool) -> Result<(), Box<dyn std::error::Error>> {
    println!("\n### Reminder cost (200 requests, 20 turns, 10-item plan)\n");
    println!("| cadence | reminders | reminder tokens | all prompt tokens | share |");
    println!("|---|---:|---:|---:|---:|");
    for (label, every) in [
        ("default (turn start, then every 5)", 5),
        ("every request", 1),
    ] {
        let dir = tempfile::tempdir()?;
        let model = ScriptedProvider::from_steps(script());
        let mut config = PodConfig::new(
            PodHome::new(dir.path()),
            dir.path(),
            Arc::new(model.clone()),
        );
        let mut tools = ToolRegistry::new();
        tools.register(Echo::concurrent());
        config.tools = tools;
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
        println!(
            "| {label} | {} | {reminder_tokens} | {all} | {:.2}% |",
            reminders.len(),
            100.0 * reminder_tokens as f64 / all as f64
        );
    }
    Ok(())
}
