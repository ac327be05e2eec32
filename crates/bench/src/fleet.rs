//! Throughput of many concurrent Pods against a loopback server that speaks
//! the OpenAI-compatible Chat Completions streaming format, beside what the
//! same server delivers to a bare HTTP client sending the same requests.
//! Two more rows split the Pods' cost: the `OpenAiProvider` alone sending
//! the same requests (its HTTP path without the runtime), and the same
//! Pods on an instant scripted model (the runtime without HTTP). Each row
//! gives this process's CPU time per request (`getrusage`, the server's
//! excluded).

use crate::loopback::Server;
use crate::support::fmt_duration;
use crate::wire::Cpu;
use pod::{Durability, Pod, PodConfig};
use pod_llm::{EventStream, Provider, ProviderError, ProviderRequest};
use pod_providers::{Endpoint, OpenAiProvider};
use std::sync::Arc;
use std::time::Duration;
use std::time::Instant;

/// Records every request it forwards, and its body.
struct Recording {
    inner: OpenAiProvider,
    bodies: parking_lot::Mutex<Vec<Vec<u8>>>,
    requests: parking_lot::Mutex<Vec<ProviderRequest>>,
}

#[async_trait::async_trait]
impl Provider for Recording {
    async fn stream(&self, request: &ProviderRequest) -> Result<EventStream, ProviderError> {
        let body = serde_json::to_vec(&self.inner.request_body(request))
            .map_err(|e| ProviderError::Malformed(e.to_string()))?;
        self.bodies.lock().push(body);
        self.requests.lock().push(request.clone());
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

/// The requests one Pod sends in `turns` turns, and their bodies.
async fn one_sessions_requests(
    server: &Server,
    turns: usize,
) -> Result<(Vec<ProviderRequest>, Vec<Vec<u8>>), Box<dyn std::error::Error>> {
    let recording = Arc::new(Recording {
        inner: OpenAiProvider::new(Endpoint::new(server.base_url(), "bench"))?,
        bodies: parking_lot::Mutex::new(Vec::new()),
        requests: parking_lot::Mutex::new(Vec::new()),
    });
    let dir = tempfile::tempdir()?;
    let pod = Pod::spawn(pod_config(dir.path(), recording.clone(), Durability::Never)).await?;
    for turn in 0..turns {
        pod.prompt(format!("turn {turn}")).await?;
    }
    pod.shutdown().await?;
    let bodies = std::mem::take(&mut *recording.bodies.lock());
    let requests = std::mem::take(&mut *recording.requests.lock());
    Ok((requests, bodies))
}

/// `clients` concurrent tasks each send `requests` in order through their
/// own `OpenAiProvider` (one per session, as the Pods have) and drain every
/// event stream: the provider's HTTP path without the runtime around it.
async fn provider_clients(
    server: &Server,
    clients: usize,
    requests: Arc<Vec<ProviderRequest>>,
) -> Result<Run, Box<dyn std::error::Error>> {
    use futures_util::StreamExt;
    let providers = (0..clients)
        .map(|_| OpenAiProvider::new(Endpoint::new(server.base_url(), "bench")))
        .collect::<Result<Vec<_>, _>>()?;
    let (start, cpu) = (Instant::now(), Cpu::now());
    let mut tasks = Vec::with_capacity(clients);
    for provider in providers {
        let requests = requests.clone();
        tasks.push(tokio::spawn(async move {
            for request in requests.iter() {
                let mut events = provider.stream(request).await?;
                while let Some(event) = events.next().await {
                    event?;
                }
            }
            Ok::<(), ProviderError>(())
        }));
    }
    for task in tasks {
        task.await??;
    }
    Ok(Run {
        requests: (clients * requests.len()) as u64,
        wall: start.elapsed(),
        cpu: cpu_since(cpu),
    })
}

/// What one run cost: model requests served, wall time, and the CPU time
/// (user + system) of this process, the server's not included.
struct Run {
    requests: u64,
    wall: Duration,
    cpu: Duration,
}

impl Run {
    fn rate(&self) -> f64 {
        self.requests as f64 / self.wall.as_secs_f64()
    }

    fn cpu_per_request(&self) -> Duration {
        self.cpu / self.requests.max(1) as u32
    }
}

/// CPU time (user + system) this process used since `start`.
fn cpu_since(start: Cpu) -> Duration {
    let now = Cpu::now();
    now.user.saturating_sub(start.user) + now.system.saturating_sub(start.system)
}

/// `clients` concurrent bare HTTP clients each POST `bodies` in order and
/// read every response to its end.
async fn bare_clients(
    server: &Server,
    clients: usize,
    bodies: Arc<Vec<Vec<u8>>>,
) -> Result<Run, Box<dyn std::error::Error>> {
    let client = reqwest::Client::new();
    let url = format!("{}/chat/completions", server.base_url());
    let (start, cpu) = (Instant::now(), Cpu::now());
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
    Ok(Run {
        requests: (clients * bodies.len()) as u64,
        wall: start.elapsed(),
        cpu: cpu_since(cpu),
    })
}

/// Prints the fleet table.
pub async fn run(quick: bool) -> Result<(), Box<dyn std::error::Error>> {
    let (pods, turns) = if quick { (100, 5) } else { (1_000, 10) };
    // Tool results as small as the echo's ("hello"): the figure is about
    // request handling, not bytes.
    let server = Server::start(5).await?;
    let (requests, bodies) = one_sessions_requests(&server, turns).await?;
    let bodies = Arc::new(bodies);
    let baseline = bare_clients(&server, pods, bodies.clone()).await?;
    let provider_only = provider_clients(&server, pods, Arc::new(requests)).await?;
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
    let total_turns = (pods * turns) as f64;
    println!("\n### Fleet: concurrent Pods against a loopback OpenAI-compatible server (another process)\n");
    println!("| client | sessions | turns each | model requests | wall time | turns / s | requests / s | this process's CPU per request |");
    println!("|---|---:|---:|---:|---:|---:|---:|---:|");
    let row = |name: &str, run: &Run| {
        println!(
            "| {name} | {pods} | {turns} | {} | {} | {:.0} | {:.0} | {} |",
            run.requests,
            fmt_duration(run.wall),
            total_turns / run.wall.as_secs_f64(),
            run.rate(),
            fmt_duration(run.cpu_per_request()),
        );
    };
    row("bare HTTP client, the same bodies", &baseline);
    row("OpenAiProvider alone, the same requests", &provider_only);
    for (durability, run) in &rows {
        row(&format!("Pods (durability {durability:?})"), run);
    }
    // The runtime alone: the same Pods and turns on an instant scripted
    // model, no HTTP and no server, to split the Pods' CPU per request into
    // the runtime's part and the provider's.
    let scripted = scripted_fleet(pods, turns).await?;
    row(
        "Pods (durability Never) on an instant scripted model, no HTTP",
        &scripted,
    );
    println!();
    for (durability, run) in &rows {
        println!(
            "Pods with durability {durability:?} reach {:.0} % of the bare client's request rate.",
            100.0 * run.rate() / baseline.rate()
        );
    }
    Ok(())
}

/// Every Pod of `handles` runs `turns` turns, all at once; then they shut
/// down. Returns the wall and CPU time of the turns.
async fn run_turns(
    handles: &[pod::PodHandle],
    turns: usize,
) -> Result<(Duration, Duration), Box<dyn std::error::Error>> {
    let (start, cpu) = (Instant::now(), Cpu::now());
    let mut tasks = Vec::with_capacity(handles.len());
    for pod in handles {
        let pod = pod.clone();
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
    let (wall, cpu) = (start.elapsed(), cpu_since(cpu));
    for pod in handles {
        pod.shutdown().await?;
    }
    Ok((wall, cpu))
}

/// `pods` Pods with durability `never` run `turns` turns each on instant
/// scripted models (a tool call, then an answer).
async fn scripted_fleet(pods: usize, turns: usize) -> Result<Run, Box<dyn std::error::Error>> {
    use pod_llm::{ScriptStep, ScriptedProvider};
    let dir = tempfile::tempdir()?;
    let mut handles = Vec::with_capacity(pods);
    for _ in 0..pods {
        let steps: Vec<ScriptStep> = (0..turns)
            .flat_map(|i| {
                [
                    ScriptStep::tool_call("echo", serde_json::json!({"text": format!("step {i}")})),
                    ScriptStep::text("ok"),
                ]
            })
            .collect();
        let provider = ScriptedProvider::from_steps(steps)
            .without_recording()
            .without_usage_estimate();
        let config = pod_config(dir.path(), Arc::new(provider), Durability::Never);
        handles.push(Pod::spawn(config).await?);
    }
    let (wall, cpu) = run_turns(&handles, turns).await?;
    Ok(Run {
        requests: (pods * turns * 2) as u64,
        wall,
        cpu,
    })
}

/// `pods` Pods run `turns` turns each, concurrently; the requests are the
/// ones the server saw.
async fn fleet(
    server: &Server,
    pods: usize,
    turns: usize,
    durability: Durability,
) -> Result<Run, Box<dyn std::error::Error>> {
    let before = server.stats().await?;
    let dir = tempfile::tempdir()?;
    let mut handles = Vec::with_capacity(pods);
    for _ in 0..pods {
        // One provider per session, as pod's launcher builds them: a
        // provider keeps what it sent of its session's history.
        let provider: Arc<dyn Provider> = Arc::new(OpenAiProvider::new(Endpoint::new(
            server.base_url(),
            "bench",
        ))?);
        handles.push(Pod::spawn(pod_config(dir.path(), provider, durability)).await?);
    }
    let (wall, cpu) = run_turns(&handles, turns).await?;
    Ok(Run {
        requests: server.stats().await?.requests - before.requests,
        wall,
        cpu,
    })
}
