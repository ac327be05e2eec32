//! Throughput of many concurrent Pods against a loopback server that speaks
//! the OpenAI-compatible Chat Completions streaming format, beside what the
//! same server delivers to a bare HTTP client sending the same requests.

use crate::loopback::Server;
use crate::support::fmt_duration;
use pod::{Durability, Pod, PodConfig};
use pod_llm::{EventStream, Provider, ProviderError, ProviderRequest};
use pod_providers::{Endpoint, OpenAiProvider};
use std::sync::Arc;
use std::time::Instant;

/// Records the body of every request it forwards.
struct Recording {
    inner: OpenAiProvider,
    bodies: parking_lot::Mutex<Vec<Vec<u8>>>,
}

#[async_trait::async_trait]
impl Provider for Recording {
    async fn stream(&self, request: &ProviderRequest) -> Result<EventStream, ProviderError> {
        let body = serde_json::to_vec(&self.inner.request_body(request))
            .map_err(|e| ProviderError::Malformed(e.to_string()))?;
        self.bodies.lock().push(body);
        self.inner.stream(request).await
    }

    fn model_name(&self) -> String {
        self.inner.model_name()
    }
}

fn pod_config(
    dir: &std::path::Path,
    provider: Arc<dyn Provider>,
    durability: Durability,
) -> PodConfig {
    let mut config = crate::support::echo_config(dir, provider);
    config.durability = durability;
    config
}

/// The request bodies one Pod sends in `turns` turns.
async fn one_sessions_bodies(
    server: &Server,
    turns: usize,
) -> Result<Vec<Vec<u8>>, Box<dyn std::error::Error>> {
    let recording = Arc::new(Recording {
        inner: OpenAiProvider::new(Endpoint::new(server.base_url(), "bench"))?,
        bodies: parking_lot::Mutex::new(Vec::new()),
    });
    let dir = tempfile::tempdir()?;
    let pod = Pod::spawn(pod_config(dir.path(), recording.clone(), Durability::Never)).await?;
    for turn in 0..turns {
        pod.prompt(format!("turn {turn}")).await?;
    }
    pod.shutdown().await?;
    let bodies = std::mem::take(&mut *recording.bodies.lock());
    Ok(bodies)
}

/// `clients` concurrent bare HTTP clients each POST `bodies` in order and
/// read every response to its end; returns the wall time.
async fn bare_clients(
    server: &Server,
    clients: usize,
    bodies: Arc<Vec<Vec<u8>>>,
) -> Result<std::time::Duration, Box<dyn std::error::Error>> {
    let client = reqwest::Client::new();
    let url = format!("{}/chat/completions", server.base_url());
    let start = Instant::now();
    let mut tasks = Vec::with_capacity(clients);
    for _ in 0..clients {
        let (client, url, bodies) = (client.clone(), url.clone(), bodies.clone());
        tasks.push(tokio::spawn(async move {
            for body in bodies.iter() {
                let response = client
                    .post(&url)
                    .header("content-type", "application/json")
                    .body(body.clone())
                    .send()
                    .await?;
                response.bytes().await?;
            }
            Ok::<(), reqwest::Error>(())
        }));
    }
    for task in tasks {
        task.await??;
    }
    Ok(start.elapsed())
}

/// Prints the fleet table.
pub async fn run(quick: bool) -> Result<(), Box<dyn std::error::Error>> {
    let (pods, turns) = if quick { (100, 5) } else { (1_000, 10) };
    // Tool results as small as the echo's ("hello"): the figure is about
    // request handling, not bytes.
    let server = Server::start(5).await?;
    let bodies = Arc::new(one_sessions_bodies(&server, turns).await?);
    let baseline = bare_clients(&server, pods, bodies.clone()).await?;
    let mut rows = Vec::new();
    // `--durability=never` (or turn) runs one setting only.
    let only =
        std::env::args().find_map(|a| a.strip_prefix("--durability=").map(str::to_lowercase));
    for durability in [Durability::Never, Durability::Turn] {
        if only
            .as_deref()
            .is_some_and(|o| o != format!("{durability:?}").to_lowercase())
        {
            continue;
        }
        rows.push((durability, fleet(&server, pods, turns, durability).await?));
    }
    let baseline_requests = (pods * bodies.len()) as f64;
    let total_turns = (pods * turns) as f64;
    println!("\n### Fleet: concurrent Pods against a loopback OpenAI-compatible server (another process)\n");
    println!("| client | sessions | turns each | model requests | wall time | turns / s | requests / s |");
    println!("|---|---:|---:|---:|---:|---:|---:|");
    println!(
        "| bare HTTP client, the same bodies | {pods} | {turns} | {baseline_requests} | {} | {:.0} | {:.0} |",
        fmt_duration(baseline),
        total_turns / baseline.as_secs_f64(),
        baseline_requests / baseline.as_secs_f64()
    );
    for (durability, (requests, elapsed)) in &rows {
        println!(
            "| Pods (durability {durability:?}) | {pods} | {turns} | {requests} | {} | {:.0} | {:.0} |",
            fmt_duration(*elapsed),
            total_turns / elapsed.as_secs_f64(),
            *requests as f64 / elapsed.as_secs_f64()
        );
    }
    println!();
    for (durability, (requests, elapsed)) in &rows {
        println!(
            "Pods with durability {durability:?} reach {:.0} % of the bare client's request rate.",
            100.0 * (*requests as f64 / elapsed.as_secs_f64())
                / (baseline_requests / baseline.as_secs_f64())
        );
    }
    Ok(())
}

/// `pods` Pods run `turns` turns each, concurrently; returns the model
/// requests the server saw and the wall time.
async fn fleet(
    server: &Server,
    pods: usize,
    turns: usize,
    durability: Durability,
) -> Result<(u64, std::time::Duration), Box<dyn std::error::Error>> {
    let before = server.stats().await?;
    let provider: Arc<dyn Provider> = Arc::new(OpenAiProvider::new(Endpoint::new(
        server.base_url(),
        "bench",
    ))?);
    let dir = tempfile::tempdir()?;
    let config = pod_config(dir.path(), provider, durability);
    let mut handles = Vec::with_capacity(pods);
    for _ in 0..pods {
        handles.push(Pod::spawn(config.clone()).await?);
    }
    let start = Instant::now();
    let mut tasks = Vec::with_capacity(pods);
    for pod in handles.clone() {
        tasks.push(tokio::spawn(async move {
            for turn in 0..turns {
                pod.prompt(format!("turn {turn}")).await?;
            }
            Ok::<(), pod::PodError>(())
        }));
    }
    for task in tasks {
        task.await??;
    }
    let elapsed = start.elapsed();
    for pod in &handles {
        pod.shutdown().await?;
    }
    let requests = server.stats().await?.requests - before.requests;
    Ok((requests, elapsed))
}
