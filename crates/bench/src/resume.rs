//! Resume time against the floor: reading the file and parsing each line
//! with serde_json.

use crate::support::{fmt_duration, median};
use pod::log::{encode_line, read_log, LogRecord, SessionHeader};
use pod::replay::replay;
use pod::{Pod, PodConfig, PodHome};
use pod_llm::{Item, ItemKind, ScriptedProvider, ToolCall, Usage};
use serde_json::{json, Value};
use std::hint::black_box;
use std::path::Path;
use std::sync::Arc;
use uuid::Uuid;

/// Writes a session log of `items` items shaped like a working session:
/// tool calls with ~300-byte results, a todo_write every tenth call, a user
/// prompt every twentieth.
fn write_log(path: &Path, id: Uuid, items: usize) -> std::io::Result<()> {
    let header = SessionHeader::new(id, "bench".into(), "/tmp".into());
    let mut out = encode_line(&LogRecord::Header(header)).map_err(std::io::Error::other)?;
    let mut n = 0usize;
    let mut step = 0usize;
    let push = |out: &mut Vec<u8>, item: Item| -> std::io::Result<()> {
        out.extend(encode_line(&LogRecord::Item(item)).map_err(std::io::Error::other)?);
        Ok(())
    };
    while n < items {
        if step.is_multiple_of(20) {
            push(
                &mut out,
                Item::user(format!("Please continue with part {step} of the task.")),
            )?;
            n += 1;
        }
        let call_id = format!("call_{step}");
        let (name, arguments) = if step.is_multiple_of(10) {
            let todos: Vec<Value> = (0..10)
                .map(|i| json!({"id": format!("t{i}"), "content": format!("Step {i} of the plan"),
                    "status": if i < step % 10 { "completed" } else if i == step % 10 { "in_progress" } else { "pending" }}))
                .collect();
            ("todo_write", json!({"todos": todos}).to_string())
        } else {
            (
                "echo",
                json!({"text": format!("inspect file src/module_{step}.rs")}).to_string(),
            )
        };
        push(
            &mut out,
            Item::new(ItemKind::Assistant {
                text: "Let me look at the next file.".into(),
                reasoning: None,
                tool_calls: vec![ToolCall {
                    id: call_id.clone(),
                    name: name.into(),
                    arguments,
                }],
                usage: Some(Usage {
                    prompt_tokens: 12_000 + step as u64,
                    completion_tokens: 40,
                    ..Default::default()
                }),
            }),
        )?;
        push(
            &mut out,
            Item::tool_result(call_id, "fn example() {}\n".repeat(18), false),
        )?;
        n += 2;
        step += 1;
    }
    std::fs::write(path, out)
}

fn floor(path: &Path) -> Result<(), Box<dyn std::error::Error>> {
    let bytes = std::fs::read(path)?;
    let mut count = 0usize;
    for line in bytes.split(|&b| b == b'\n').filter(|l| !l.is_empty()) {
        let value: Value = serde_json::from_slice(line)?;
        black_box(&value);
        count += 1;
    }
    black_box(count);
    Ok(())
}

/// Median time of `Pod::resume` and shutdown of an empty session.
async fn fixed_cost(runs: usize) -> Result<std::time::Duration, Box<dyn std::error::Error>> {
    let dir = tempfile::tempdir()?;
    let home = PodHome::new(dir.path());
    let id = Uuid::new_v4();
    home.create_session_dir(id)?;
    write_log(&home.log_path(id), id, 0)?;
    let config = PodConfig::new(
        home.clone(),
        dir.path(),
        Arc::new(ScriptedProvider::from_steps(vec![])),
    );
    // `POD_BENCH_FIXED_RUNS` repeats it (for a profile of the fixed part).
    let runs = std::env::var("POD_BENCH_FIXED_RUNS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(runs * 3);
    median(runs, || {
        let config = config.clone();
        async move {
            let pod = Pod::resume(id, config).await?;
            pod.shutdown().await?;
            Ok(())
        }
    })
    .await
}

fn replay_only(path: &Path) -> Result<(), Box<dyn std::error::Error>> {
    let contents = read_log(path)?;
    let replayed = replay(&contents.records);
    black_box((replayed.history.len(), replayed.todos.len()));
    Ok(())
}

/// `Pod::resume` of one log of `items` items, `runs` times and nothing
/// else, for a profiler (`POD_BENCH_RESUME_PROFILE=ITEMS[:RUNS]`).
async fn profile(items: usize, runs: usize) -> Result<(), Box<dyn std::error::Error>> {
    let dir = tempfile::tempdir()?;
    let home = PodHome::new(dir.path());
    let id = Uuid::new_v4();
    home.create_session_dir(id)?;
    write_log(&home.log_path(id), id, items)?;
    let config = PodConfig::new(
        home.clone(),
        dir.path(),
        Arc::new(ScriptedProvider::from_steps(vec![])),
    );
    let took = median(runs, || {
        let config = config.clone();
        async move {
            let pod = Pod::resume(id, config).await?;
            pod.shutdown().await?;
            Ok(())
        }
    })
    .await?;
    println!(
        "Pod::resume of {items} items, median of {runs}: {}",
        fmt_duration(took)
    );
    Ok(())
}

/// Prints the resume table.
pub async fn run(quick: bool) -> Result<(), Box<dyn std::error::Error>> {
    if let Ok(spec) = std::env::var("POD_BENCH_RESUME_PROFILE") {
        let (items, runs) = spec.split_once(':').unwrap_or((&spec, "20"));
        return profile(items.parse()?, runs.parse()?).await;
    }
    let sizes: &[usize] = if quick {
        &[1_000, 10_000]
    } else {
        &[1_000, 10_000, 100_000]
    };
    let runs = if quick { 3 } else { 7 };
    println!("\n### Resume\n");
    println!("| items | log size | floor: read + serde_json per line | read + verify + replay | ratio | Pod::resume (incl. repair, fsync, actor) | ratio |");
    println!("|---:|---:|---:|---:|---:|---:|---:|");
    let fixed = fixed_cost(runs).await?;
    for &items in sizes {
        let dir = tempfile::tempdir()?;
        let home = PodHome::new(dir.path());
        let id = Uuid::new_v4();
        home.create_session_dir(id)?;
        let path = home.log_path(id);
        write_log(&path, id, items)?;
        let size = std::fs::metadata(&path)?.len();
        let config = PodConfig::new(
            home.clone(),
            dir.path(),
            Arc::new(ScriptedProvider::from_steps(vec![])),
        );
        // Round by round, the three in turn: on a shared machine the load
        // moves between them less than between three series run one after
        // the other, and each round's ratio compares like with like.
        let (mut floors, mut replays, mut pods) = (Vec::new(), Vec::new(), Vec::new());
        let (mut replay_ratios, mut pod_ratios) = (Vec::new(), Vec::new());
        for _ in 0..runs {
            let floor_time = median(1, || async { floor(&path) }).await?;
            let replay_time = median(1, || async { replay_only(&path) }).await?;
            let pod_time = median(1, || {
                let config = config.clone();
                async move {
                    let pod = Pod::resume(id, config).await?;
                    pod.shutdown().await?;
                    Ok(())
                }
            })
            .await?;
            let ratio = |t: std::time::Duration| t.as_secs_f64() / floor_time.as_secs_f64();
            replay_ratios.push(ratio(replay_time));
            pod_ratios.push(ratio(pod_time));
            floors.push(floor_time);
            replays.push(replay_time);
            pods.push(pod_time);
        }
        let middle = |mut v: Vec<std::time::Duration>| {
            v.sort();
            v[v.len() / 2]
        };
        let middle_ratio = |mut v: Vec<f64>| {
            v.sort_by(f64::total_cmp);
            v[v.len() / 2]
        };
        let (floor_time, replay_time, pod_time) = (middle(floors), middle(replays), middle(pods));
        println!(
            "| {items} | {:.1} MiB | {} | {} | {:.2}x | {} | {:.2}x |",
            size as f64 / 1_048_576.0,
            fmt_duration(floor_time),
            fmt_duration(replay_time),
            middle_ratio(replay_ratios),
            fmt_duration(pod_time),
            middle_ratio(pod_ratios),
        );
    }
    println!(
        "\nTimes are medians of {runs} rounds, each running the three in turn; ratios are \
         the medians of each round's ratio to that round's floor."
    );
    println!(
        "\nPod::resume of a session holding only its header (what the ratio's \
         fixed part costs: tools, actor, shutdown): {}",
        fmt_duration(fixed)
    );
    Ok(())
}
