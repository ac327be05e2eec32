//! Memory per idle Pod.

use pod::{Durability, Pod, PodConfig, PodHome};
use pod_llm::ScriptedProvider;
use std::sync::Arc;

/// Spawns many idle Pods in one process and reports resident memory per Pod.
pub async fn run(quick: bool) -> Result<(), Box<dyn std::error::Error>> {
    let count = if quick { 1_000 } else { 10_000 };
    let dir = tempfile::tempdir()?;
    let provider: Arc<dyn pod_llm::Provider> = Arc::new(ScriptedProvider::from_steps(vec![]));
    let mut config = PodConfig::new(PodHome::new(dir.path()), dir.path(), provider);
    config.durability = Durability::Never;
    if let Some(capacity) = std::env::var("POD_BENCH_EVENT_CAPACITY")
        .ok()
        .and_then(|v| v.parse().ok())
    {
        config.event_capacity = capacity;
    }
    // Warm up allocator and runtime with one Pod so the baseline is fair.
    let warm = Pod::spawn(config.clone()).await?;
    let before = crate::support::resident_bytes();
    // `--subscribed`: each Pod has a receiver of its events (its channel's
    // buffer is made on the first subscription), as a watched Pod does.
    let subscribed = std::env::args().any(|a| a == "--subscribed");
    let mut pods = Vec::with_capacity(count);
    let mut receivers = Vec::new();
    for _ in 0..count {
        let pod = Pod::spawn(config.clone()).await?;
        if subscribed {
            receivers.push(pod.subscribe());
        }
        pods.push(pod);
    }
    let after = crate::support::resident_bytes();
    let per_pod = (after.saturating_sub(before)) as f64 / count as f64;
    println!("\n### Idle Pods\n");
    println!("| pods | subscribed | resident before | resident after | per idle Pod |");
    println!("|---:|---|---:|---:|---:|");
    println!(
        "| {count} | {} | {:.1} MiB | {:.1} MiB | {:.1} KB |",
        if subscribed { "yes" } else { "no" },
        before as f64 / 1_048_576.0,
        after as f64 / 1_048_576.0,
        per_pod / 1000.0
    );
    println!(
        "\n(`event_capacity` {}, {} bytes per event slot's value)",
        config.event_capacity,
        std::mem::size_of::<pod::PodEvent>()
    );
    for pod in &pods {
        pod.shutdown().await?;
    }
    warm.shutdown().await?;
    Ok(())
}
