//! Prompt caching: how much of a session's input a provider can read from
//! its cache, given the requests pod really builds.
//!
//! A Pod runs the session of the reminder bench (a 10-item plan, then 200
//! requests in 20 turns with ~1 KB tool results) on a scripted model that
//! records every request. Each request is then encoded by the real
//! providers (`request_body`) and scored:
//!
//! - Anthropic: a cache that follows the documented rules. A marked block
//!   (`cache_control`) writes the prefix up to it; a request reads the
//!   longest cached prefix that ends at one of its markers or within the 20
//!   blocks before one. Blocks are tools, then system blocks, then message
//!   content blocks, in order; a block's tokens are estimated from its JSON
//!   (4 bytes a token). TTLs do not expire here (the model is instant).
//! - OpenAI-compatible: caching is automatic on the longest byte-identical
//!   prefix, so the share is the bytes each request's messages share, as a
//!   prefix, with the request before it.
//!
//! Run once without compaction and once with a context window small enough
//! to compact twice; "between compactions" leaves out the first request
//! after each boundary (a new prefix, which no cache can have).

use pod::Pod;
use pod_llm::{ItemKind, ProviderRequest, ScriptStep, ScriptedProvider, SystemKind};
use pod_providers::{AnthropicProvider, Endpoint, OpenAiProvider};
use serde_json::{json, Value};
use std::collections::HashSet;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::sync::Arc;

/// Runs the session; returns the requests the main model got.
async fn session(
    context_window: Option<u64>,
) -> Result<Vec<ProviderRequest>, Box<dyn std::error::Error>> {
    let dir = tempfile::tempdir()?;
    let model = ScriptedProvider::from_steps(crate::reminders::script());
    let mut config = crate::support::echo_config(dir.path(), Arc::new(model.clone()));
    config.workspace_tools = false;
    if let Some(window) = context_window {
        config.compaction.context_window = Some(window);
        let summaries = (0..10).map(|i| ScriptStep::text(format!("Summary {i}: steps so far.")));
        config.compact_provider = Some(Arc::new(ScriptedProvider::from_steps(summaries.collect())));
    }
    let pod = Pod::spawn(config).await?;
    for turn in 0..20 {
        pod.prompt(format!("Turn {turn}: keep going.")).await?;
    }
    pod.shutdown().await?;
    Ok(model.requests())
}

/// Whether a request starts from a new compaction summary.
fn after_boundary(request: &ProviderRequest) -> bool {
    request.history.first().is_some_and(|item| {
        matches!(
            item.kind,
            ItemKind::System {
                kind: SystemKind::Summary,
                ..
            }
        )
    })
}

fn tokens(value: &Value) -> u64 {
    (value.to_string().len() as u64).div_ceil(4)
}

/// The blocks of an Anthropic body in prefix order, without their markers,
/// and whether each was marked.
fn blocks(body: &Value) -> Vec<(Value, bool)> {
    let mut out = Vec::new();
    let mut push = |block: &Value| {
        let mut block = block.clone();
        let marked = block
            .as_object_mut()
            .and_then(|map| map.remove("cache_control"))
            .is_some();
        out.push((block, marked));
    };
    for tool in body["tools"].as_array().into_iter().flatten() {
        push(tool);
    }
    match &body["system"] {
        Value::Array(system) => system.iter().for_each(&mut push),
        Value::String(text) => push(&json!({"type": "text", "text": text})),
        _ => {}
    }
    for message in body["messages"].as_array().into_iter().flatten() {
        for block in message["content"].as_array().into_iter().flatten() {
            // The role is part of what a block means.
            let mut block = block.clone();
            block["role"] = message["role"].clone();
            push(&block);
        }
    }
    out
}

/// Scores requests against a cache that follows Anthropic's rules; returns
/// (input tokens read from the cache, all input tokens) per request.
fn anthropic_scores(requests: &[ProviderRequest], cache_on: bool) -> Vec<(u64, u64)> {
    let mut endpoint = Endpoint::new("http://127.0.0.1:9", "bench");
    endpoint.cache.enabled = cache_on;
    let provider = match AnthropicProvider::new(endpoint) {
        Ok(provider) => provider,
        Err(err) => panic!("a local endpoint is valid: {err}"),
    };
    let mut cache: HashSet<u64> = HashSet::new();
    requests
        .iter()
        .map(|request| {
            let blocks = blocks(&provider.request_body(request));
            // Prefix hashes and cumulative tokens, block by block.
            let mut hasher = DefaultHasher::new();
            let mut prefix = Vec::with_capacity(blocks.len());
            let mut total = 0;
            for (block, _) in &blocks {
                block.to_string().hash(&mut hasher);
                total += tokens(block);
                prefix.push((hasher.finish(), total));
            }
            let marks: Vec<usize> = (0..blocks.len()).filter(|&i| blocks[i].1).collect();
            let mut read = 0;
            for &mark in &marks {
                let lookback = mark.saturating_sub(19)..=mark;
                if let Some(hit) = lookback.rev().find(|&i| cache.contains(&prefix[i].0)) {
                    read = read.max(prefix[hit].1);
                }
            }
            for &mark in &marks {
                cache.insert(prefix[mark].0);
            }
            (read, total)
        })
        .collect()
}

/// Scores requests by the byte-identical prefix of their messages with the
/// request before (what automatic caching can reuse).
fn openai_scores(requests: &[ProviderRequest]) -> Vec<(u64, u64)> {
    let provider = match OpenAiProvider::new(Endpoint::new("http://127.0.0.1:9/v1", "bench")) {
        Ok(provider) => provider,
        Err(err) => panic!("a local endpoint is valid: {err}"),
    };
    let mut previous = String::new();
    requests
        .iter()
        .map(|request| {
            let body = provider.request_body(request);
            // Tools first: servers put them ahead of the messages.
            let text = format!("{}{}", body["tools"], body["messages"]);
            let shared = previous
                .bytes()
                .zip(text.bytes())
                .take_while(|(a, b)| a == b)
                .count();
            let scored = ((shared as u64).div_ceil(4), (text.len() as u64).div_ceil(4));
            previous = text;
            scored
        })
        .collect()
}

fn share(scores: &[(u64, u64)], skip: &[bool]) -> (f64, f64) {
    let sum = |keep: &dyn Fn(usize) -> bool| {
        let (read, all) = scores
            .iter()
            .enumerate()
            .filter(|(i, _)| keep(*i))
            .fold((0, 0), |(r, a), (_, (read, all))| (r + read, a + all));
        100.0 * read as f64 / all.max(1) as f64
    };
    // The first request of the session and of each compacted context start
    // a new prefix.
    (sum(&|_| true), sum(&|i| i > 0 && !skip[i]))
}

/// Prints the cached shares.
pub async fn run(_quick: bool) -> Result<(), Box<dyn std::error::Error>> {
    println!("\n### Prompt caching (200 requests, 20 turns, 10-item plan, ~1 KB results)\n");
    println!(
        "| session | requests | compactions | wire | input tokens | read from cache | between compactions |"
    );
    println!("|---|---:|---:|---|---:|---:|---:|");
    for (label, window) in [("no compaction", None), ("compacting", Some(40_000))] {
        let requests = session(window).await?;
        let boundaries: Vec<bool> = requests.iter().map(after_boundary).collect();
        // A boundary request is one whose history starts with a summary and
        // whose predecessor's did not start with the same one.
        let starts: Vec<bool> = (0..requests.len())
            .map(|i| {
                boundaries[i]
                    && (i == 0 || requests[i - 1].history.first() != requests[i].history.first())
            })
            .collect();
        let compactions = starts.iter().filter(|s| **s).count();
        for (wire, scores) in [
            ("anthropic", anthropic_scores(&requests, true)),
            ("anthropic, caching off", anthropic_scores(&requests, false)),
            ("openai", openai_scores(&requests)),
        ] {
            let all: u64 = scores.iter().map(|(_, all)| all).sum();
            let (overall, between) = share(&scores, &starts);
            println!(
                "| {label} | {} | {compactions} | {wire} | {all} | {overall:.1}% | {between:.1}% |",
                requests.len()
            );
        }
    }
    Ok(())
}
