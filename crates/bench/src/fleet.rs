//! Throughput of many concurrent Pods against a loopback server that speaks
//! the OpenAI-compatible Chat Completions streaming format.

use crate::support::fmt_duration;
use pod::{Durability, Pod, PodConfig, PodHome};
use pod_providers::{Endpoint, OpenAiProvider};
use pod_testkit::tools::Echo;
use pod_worker::ToolRegistry;
use serde_json::{json, Value};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};

/// Answers every request on a keep-alive connection: a tool call when the
/// last message is not a tool result, plain text when it is.
async fn serve(stream: TcpStream, served: Arc<AtomicU64>) -> std::io::Result<()> {
    let (read, mut write) = stream.into_split();
    let mut read = BufReader::new(read);
    loop {
        let mut content_length = 0usize;
        let mut line = String::new();
        if read.read_line(&mut line).await? == 0 {
            return Ok(());
        }
        loop {
            line.clear();
            read.read_line(&mut line).await?;
            if line == "\r\n" || line.is_empty() {
                break;
            }
            if let Some((name, value)) = line.split_once(':') {
                if name.eq_ignore_ascii_case("content-length") {
                    content_length = value.trim().parse().unwrap_or(0);
                }
            }
        }
        let mut body = vec![0; content_length];
        read.read_exact(&mut body).await?;
        let request: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
        let last_role = request["messages"]
            .as_array()
            .and_then(|m| m.last())
            .and_then(|m| m["role"].as_str())
            .unwrap_or("");
        let n = served.fetch_add(1, Ordering::Relaxed);
        let sse = if last_role == "tool" {
            text_answer()
        } else {
            tool_call_answer(n)
        };
        let head = format!(
            "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncontent-length: {}\r\n\r\n",
            sse.len()
        );
        write.write_all(head.as_bytes()).await?;
        write.write_all(sse.as_bytes()).await?;
    }
}

fn chunk(delta: Value, finish: Option<&str>) -> String {
    let body = json!({"id": "c", "object": "chat.completion.chunk", "model": "bench",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]});
    format!("data: {body}\n\n")
}

fn usage() -> String {
    let body = json!({"id": "c", "object": "chat.completion.chunk", "model": "bench", "choices": [],
        "usage": {"prompt_tokens": 500, "completion_tokens": 20, "total_tokens": 520}});
    format!("data: {body}\n\n")
}

fn tool_call_answer(n: u64) -> String {
    let mut out = chunk(
        json!({"role": "assistant", "content": null, "tool_calls": [{"index": 0,
        "id": format!("call_{n}"), "type": "function", "function": {"name": "echo", "arguments": ""}}]}),
        None,
    );
    out.push_str(&chunk(
        json!({"tool_calls": [{"index": 0, "function": {"arguments": "{\"text\":"}}]}),
        None,
    ));
    out.push_str(&chunk(
        json!({"tool_calls": [{"index": 0, "function": {"arguments": "\"hello\"}"}}]}),
        None,
    ));
    out.push_str(&chunk(json!({}), Some("tool_calls")));
    out.push_str(&usage());
    out.push_str("data: [DONE]\n\n");
    out
}

fn text_answer() -> String {
    let mut out = chunk(json!({"role": "assistant", "content": "Done with "}), None);
    out.push_str(&chunk(json!({"content": "this step."}), None));
    out.push_str(&chunk(json!({}), Some("stop")));
    out.push_str(&usage());
    out.push_str("data: [DONE]\n\n");
    out
}

/// Prints the fleet table.
pub async fn run(quick: bool) -> Result<(), Box<dyn std::error::Error>> {
    let (pods, turns) = if quick { (100, 5) } else { (1_000, 10) };
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let address = listener.local_addr()?;
    let served = Arc::new(AtomicU64::new(0));
    let server = {
        let served = served.clone();
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let served = served.clone();
                tokio::spawn(async move {
                    let _ = serve(stream, served).await;
                });
            }
        })
    };
    let provider: Arc<dyn pod_llm::Provider> = Arc::new(OpenAiProvider::new(Endpoint::new(
        format!("http://{address}/v1"),
        "bench",
    ))?);
    let dir = tempfile::tempdir()?;
    let mut config = PodConfig::new(PodHome::new(dir.path()), dir.path(), provider);
    let mut tools = ToolRegistry::new();
    tools.register(Echo::concurrent());
    config.tools = tools;
    config.durability = Durability::Turn;
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
    server.abort();
    let requests = served.load(Ordering::Relaxed);
    let total_turns = (pods * turns) as f64;
    println!("\n### Fleet: concurrent Pods against a loopback OpenAI-compatible server\n");
    println!("| pods | turns each | model requests | wall time | turns / s | requests / s |");
    println!("|---:|---:|---:|---:|---:|---:|");
    println!(
        "| {pods} | {turns} | {requests} | {} | {:.0} | {:.0} |",
        fmt_duration(elapsed),
        total_turns / elapsed.as_secs_f64(),
        requests as f64 / elapsed.as_secs_f64()
    );
    Ok(())
}
