//! The runtime's own CPU time per turn through the real providers of the
//! OpenAI wires (`OpenAiProvider`: Chat Completions, the whole history per
//! request; `OpenAiResponsesProvider`: the Responses API, following the
//! stored response), against the loopback server in a separate process:
//! does a turn late in a long session cost the pod process more than an
//! early one?

use crate::loopback::Server;
use crate::support::fmt_duration;
use pod::{Durability, Pod};
use pod_llm::Provider;
use pod_providers::{Endpoint, OpenAiProvider, OpenAiResponsesProvider};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// CPU time this process has used, user and system.
#[derive(Clone, Copy, Debug)]
pub struct Cpu {
    /// User time.
    pub user: Duration,
    /// System (kernel) time.
    pub system: Duration,
}

impl Cpu {
    /// `getrusage(RUSAGE_SELF)`: every thread of this process.
    pub fn now() -> Self {
        // SAFETY: getrusage writes one plain-old-data struct we own.
        let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
        let ok = unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut usage) } == 0;
        let time = |t: libc::timeval| {
            Duration::from_secs(t.tv_sec.max(0) as u64)
                + Duration::from_micros(t.tv_usec.max(0) as u64)
        };
        if ok {
            Self {
                user: time(usage.ru_utime),
                system: time(usage.ru_stime),
            }
        } else {
            Self {
                user: Duration::ZERO,
                system: Duration::ZERO,
            }
        }
    }
}

/// What the turns of one window cost, summed turn by turn.
#[derive(Clone, Copy, Default)]
struct Window {
    user: Duration,
    system: Duration,
    wall: Duration,
    /// Request bytes the server received.
    bytes: u64,
    /// The bare client's CPU for the same requests (Chat Completions).
    bare: Duration,
}

/// Which OpenAI API the session talks to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Api {
    /// Chat Completions: the whole history with every request.
    Chat,
    /// Responses, stored: only what follows the last response.
    Responses,
}

/// The APIs `--api=chat|responses` names; both without it.
pub fn apis() -> Vec<Api> {
    match std::env::args().find_map(|a| a.strip_prefix("--api=").map(str::to_owned)) {
        Some(api) if api == "chat" => vec![Api::Chat],
        Some(api) if api == "responses" => vec![Api::Responses],
        _ => vec![Api::Chat, Api::Responses],
    }
}

/// Prints CPU time per turn early and late in one long session.
pub async fn run(quick: bool, api: Api) -> Result<(), Box<dyn std::error::Error>> {
    let turns: usize = std::env::args()
        .find_map(|a| a.strip_prefix("--turns=").and_then(|n| n.parse().ok()))
        .unwrap_or(if quick { 400 } else { 2_000 });
    let server = Server::start(300).await?;
    let endpoint = Endpoint::new(server.base_url(), "bench");
    let (provider, name): (Arc<dyn Provider>, _) = match api {
        Api::Chat => (Arc::new(OpenAiProvider::new(endpoint)?), "OpenAiProvider"),
        Api::Responses => (
            Arc::new(OpenAiResponsesProvider::new(endpoint, true)?),
            "OpenAiResponsesProvider (stored responses)",
        ),
    };
    let dir = tempfile::tempdir()?;
    let mut config = crate::support::echo_config(dir.path(), provider);
    // No fsync: the disk's latency is not the runtime's CPU cost.
    config.durability = Durability::Never;
    let pod = Pod::spawn(config).await?;
    let windows = [(100, 200), (turns - 100, turns)];
    // What a bare client spends sending the same number of requests of the
    // same sizes and reading their answers, copying each body from memory
    // once (as any client that keeps the history must put it in a
    // request); the runtime's own cost is what the Pod spends beyond it.
    // Measured turn by turn right after the Pod's turn, so that both see
    // the same moment of the machine (measured after the whole run, the
    // two differed by more than the runtime's own cost).
    let client = reqwest::Client::new();
    let url = format!("{}/chat/completions", server.base_url());
    let mut sums = [Window::default(); 2];
    for turn in 0..turns {
        let Some(w) = windows.iter().position(|&(a, b)| (a..b).contains(&turn)) else {
            pod.prompt(format!("turn {turn}")).await?;
            continue;
        };
        let before = server.stats().await?;
        let (cpu, wall) = (Cpu::now(), Instant::now());
        pod.prompt(format!("turn {turn}")).await?;
        let (done, took) = (Cpu::now(), wall.elapsed());
        let after = server.stats().await?;
        let requests = after.requests.saturating_sub(before.requests);
        let bytes = after.bytes.saturating_sub(before.bytes);
        let sum = &mut sums[w];
        sum.user += done.user.saturating_sub(cpu.user);
        sum.system += done.system.saturating_sub(cpu.system);
        sum.wall += took;
        sum.bytes += bytes;
        if api == Api::Chat {
            let body = vec![b' '; (bytes / requests.max(1)) as usize];
            let start = Cpu::now();
            for _ in 0..requests {
                let response = client
                    .post(&url)
                    .header("content-type", "application/json")
                    .body(bytes::Bytes::from(body.clone()))
                    .send()
                    .await?;
                response.bytes().await?;
            }
            let end = Cpu::now();
            sum.bare +=
                end.user.saturating_sub(start.user) + end.system.saturating_sub(start.system);
        }
    }
    let items = pod.get_history().await?.len();
    pod.shutdown().await?;
    println!(
        "\n### Through the real {name}, loopback server in another process (300-byte tool results, {items} items at the end)\n"
    );
    println!("| turns | CPU per turn (user + system) | user | system | wall per turn | request bytes per turn |");
    println!("|---|---:|---:|---:|---:|---:|");
    for ((a, b), sum) in windows.iter().zip(&sums) {
        let n = (b - a) as u32;
        println!(
            "| {}–{} | {} | {} | {} | {} | {:.1} KiB |",
            a + 1,
            b,
            fmt_duration((sum.user + sum.system) / n),
            fmt_duration(sum.user / n),
            fmt_duration(sum.system / n),
            fmt_duration(sum.wall / n),
            sum.bytes as f64 / f64::from(n) / 1024.0
        );
    }
    let per_turn: Vec<Duration> = windows
        .iter()
        .zip(&sums)
        .map(|((a, b), sum)| (sum.user + sum.system) / (b - a) as u32)
        .collect();
    if let [early, late] = per_turn[..] {
        println!(
            "\nLate / early CPU per turn: {:.2}x",
            late.as_secs_f64() / early.as_secs_f64().max(1e-9)
        );
    }
    if api == Api::Chat {
        println!("\n| turns | Pod CPU per turn | bare client, same bytes, same turns | the runtime's own |");
        println!("|---|---:|---:|---:|");
        let mut own = Vec::new();
        for (((a, b), sum), pod_cpu) in windows.iter().zip(&sums).zip(&per_turn) {
            let bare = sum.bare / (b - a) as u32;
            let runtime = pod_cpu.saturating_sub(bare);
            own.push(runtime);
            println!(
                "| {}–{} | {} | {} | {} |",
                a + 1,
                b,
                fmt_duration(*pod_cpu),
                fmt_duration(bare),
                fmt_duration(runtime)
            );
        }
        if let [early, late] = own[..] {
            // Early the Pod can cost less than the bare client (CPU time
            // is noisy at a few hundred µs): no ratio then, the late
            // figure says it.
            if early >= Duration::from_micros(1) {
                println!(
                    "\nLate / early, the runtime's own CPU per turn: {:.2}x",
                    late.as_secs_f64() / early.as_secs_f64()
                );
            } else {
                println!(
                    "\nThe runtime's own CPU per turn: none measurable early, {} late.",
                    fmt_duration(late)
                );
            }
        }
    }
    Ok(())
}

/// Encoding one request body of a long history, both wires: the first
/// time (every item encoded and kept) and again (kept bytes copied), the
/// cost a request pays at that history length.
pub fn encoding(quick: bool) -> Result<(), Box<dyn std::error::Error>> {
    use pod_llm::{Item, ItemKind, ProviderRequest, ToolCall};
    use pod_providers::AnthropicProvider;
    let items = if quick { 2_000 } else { 10_000 };
    let mut history = Vec::with_capacity(items);
    for n in 0..items / 2 {
        let id = format!("call_{n}");
        history.push(Item::new(ItemKind::Assistant {
            text: String::new(),
            reasoning: None,
            tool_calls: vec![ToolCall {
                id: id.clone(),
                name: "echo".into(),
                arguments: format!("{{\"text\":\"step {n}\"}}"),
            }],
            usage: None,
        }));
        history.push(Item::tool_result(id, "x".repeat(300), false));
    }
    let request = ProviderRequest {
        system_prompt: pod::DEFAULT_SYSTEM_PROMPT.into(),
        history: Arc::new(history),
        tools: Arc::from(Vec::new()),
        cache_key: None,
        history_id: None,
    };
    let openai = OpenAiProvider::new(Endpoint::new("http://127.0.0.1:1/v1", "bench"))?;
    let anthropic = AnthropicProvider::new(Endpoint::new("http://127.0.0.1:1", "bench"))?;
    println!("\n### Encoding one request of {items} items (~300-byte results)\n");
    println!("| wire | body | first time (encode and keep) | again (kept bytes) |");
    println!("|---|---:|---:|---:|");
    let row = |wire: &str, encode: &dyn Fn() -> Vec<u8>| {
        let start = Instant::now();
        let bytes = encode().len();
        let first = start.elapsed();
        let start = Instant::now();
        let runs = 20;
        for _ in 0..runs {
            std::hint::black_box(encode());
        }
        let again = start.elapsed() / runs;
        println!(
            "| {wire} | {:.1} KiB | {} | {} |",
            bytes as f64 / 1024.0,
            fmt_duration(first),
            fmt_duration(again)
        );
    };
    row("openai", &|| openai.request_bytes(&request));
    // Fresh items for the other wire: an item keeps one wire's encoding.
    let request = ProviderRequest {
        history: Arc::new(request.history.iter().cloned().collect()),
        ..request.clone()
    };
    row("anthropic", &|| anthropic.request_bytes(&request));
    Ok(())
}
