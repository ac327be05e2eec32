//! A loopback server speaking the OpenAI-compatible Chat Completions
//! streaming format (`POST /v1/chat/completions`) and the Responses API
//! (`POST /v1/responses`), run as a separate process (`pod-bench
//! loopback-server`) so its CPU time is not the measured process's.
//!
//! It answers a tool call (`echo` with a text of the configured size) when
//! the last message is not a tool result, plain text when it is. On the
//! Responses API it remembers the ids of the responses it gave and answers
//! 400 `previous_response_not_found` to a request following any other. Each
//! response goes out in one write on a `TCP_NODELAY` socket: a head and a
//! body written separately can meet Nagle's algorithm and the client's
//! delayed ACK and stall ~40 ms, which would measure the stall, not pod.
//! `GET /stats` answers how many requests and request-body bytes it saw.

use serde_json::{json, Value};
use std::process::Stdio;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};
use tokio::process::{Child, Command};

/// What the server has seen.
#[derive(Default)]
struct Counters {
    requests: AtomicU64,
    bytes: AtomicU64,
    /// Ids of the responses given on the Responses API. Held to insert or
    /// look up one id.
    responses: parking_lot::Mutex<std::collections::HashSet<u64>>,
}

/// How the server answers.
#[derive(Clone, Debug)]
pub struct Options {
    /// The length of the text the `echo` call carries.
    pub result_bytes: usize,
    /// How long it waits before answering (a model's latency).
    pub latency: std::time::Duration,
    /// The tool it calls and its arguments (default: `echo` with the text).
    pub call: Option<(String, Value)>,
    /// Chat Completions: answer with a call until the conversation holds
    /// this many tool results, then with text (default: a call unless the
    /// last message is a tool result).
    pub rounds: Option<usize>,
}

impl Options {
    /// Answers at once, calling `echo` with `result_bytes` of text.
    pub fn new(result_bytes: usize) -> Self {
        Self {
            result_bytes,
            latency: std::time::Duration::ZERO,
            call: None,
            rounds: None,
        }
    }

    /// Reads `--result-bytes=N`, `--latency-ms=N`, `--tool=NAME`,
    /// `--arguments=JSON` and `--rounds=N`.
    pub fn from_args(args: &[String]) -> Self {
        let value = |name: &str| args.iter().find_map(|a| a.strip_prefix(name));
        let mut options = Self::new(
            value("--result-bytes=")
                .and_then(|n| n.parse().ok())
                .unwrap_or(300),
        );
        if let Some(ms) = value("--latency-ms=").and_then(|n| n.parse().ok()) {
            options.latency = std::time::Duration::from_millis(ms);
        }
        if let Some(tool) = value("--tool=") {
            let arguments = value("--arguments=")
                .and_then(|a| serde_json::from_str(a).ok())
                .unwrap_or_else(|| json!({}));
            options.call = Some((tool.to_string(), arguments));
        }
        options.rounds = value("--rounds=").and_then(|n| n.parse().ok());
        options
    }

    fn args(&self) -> Vec<String> {
        let mut args = vec![
            format!("--result-bytes={}", self.result_bytes),
            format!("--latency-ms={}", self.latency.as_millis()),
        ];
        if let Some((tool, arguments)) = &self.call {
            args.push(format!("--tool={tool}"));
            args.push(format!("--arguments={arguments}"));
        }
        if let Some(rounds) = self.rounds {
            args.push(format!("--rounds={rounds}"));
        }
        args
    }
}

/// Runs the server until the parent closes its stdin (or kills it); prints
/// `ADDR` on its first line of stdout.
pub async fn serve_forever(options: Options) -> Result<(), Box<dyn std::error::Error>> {
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    println!("{}", listener.local_addr()?);
    let counters = Arc::new(Counters::default());
    let answers = Arc::new(Answers::new(&options));
    let accept = async {
        while let Ok((stream, _)) = listener.accept().await {
            let (counters, answers) = (counters.clone(), answers.clone());
            tokio::spawn(async move {
                let _ = connection(stream, &counters, &answers).await;
            });
        }
    };
    // The parent holds our stdin; its end (even by SIGKILL) ends the server.
    let parent_gone = async {
        let mut sink = Vec::new();
        let _ = tokio::io::stdin().read_to_end(&mut sink).await;
    };
    tokio::select! {
        () = accept => {}
        () = parent_gone => {}
    }
    Ok(())
}

/// Pre-rendered response bodies; only the call id (and on the Responses
/// API the response id) changes per request.
struct Answers {
    latency: std::time::Duration,
    rounds: Option<usize>,
    call_prefix: String,
    call_suffix: String,
    text: String,
    /// Responses API: a call answer and a text answer, with
    /// [`RESPONSE_ID`] and [`CALL_ID`] where the ids go.
    responses_call: String,
    responses_text: String,
}

const RESPONSE_ID: &str = "RESPONSE_ID_MARKER";
const CALL_ID: &str = "CALL_ID_MARKER";

impl Answers {
    fn new(options: &Options) -> Self {
        let (tool, arguments) = match &options.call {
            Some((tool, arguments)) => (tool.clone(), arguments.to_string()),
            None => (
                "echo".to_string(),
                json!({ "text": "x".repeat(options.result_bytes) }).to_string(),
            ),
        };
        let marker = CALL_ID;
        let mut call = chunk(
            json!({"role": "assistant", "content": null, "tool_calls": [{"index": 0,
            "id": marker, "type": "function", "function": {"name": tool, "arguments": ""}}]}),
            None,
        );
        // The arguments arrive in two fragments, as real servers split them.
        let (first, second) = arguments.split_at(arguments.len() / 2);
        call.push_str(&chunk(
            json!({"tool_calls": [{"index": 0, "function": {"arguments": first}}]}),
            None,
        ));
        call.push_str(&chunk(
            json!({"tool_calls": [{"index": 0, "function": {"arguments": second}}]}),
            None,
        ));
        call.push_str(&chunk(json!({}), Some("tool_calls")));
        call.push_str(&usage());
        call.push_str("data: [DONE]\n\n");
        let (call_prefix, call_suffix) = match call.split_once(marker) {
            Some((a, b)) => (a.to_string(), b.to_string()),
            None => (call, String::new()),
        };
        let mut text = chunk(json!({"role": "assistant", "content": "Done with "}), None);
        text.push_str(&chunk(json!({"content": "this step."}), None));
        text.push_str(&chunk(json!({}), Some("stop")));
        text.push_str(&usage());
        text.push_str("data: [DONE]\n\n");
        let (responses_call, responses_text) = responses_answers(&arguments);
        Self {
            latency: options.latency,
            rounds: options.rounds,
            call_prefix,
            call_suffix,
            text,
            responses_call,
            responses_text,
        }
    }
}

/// The Responses API's call answer (arguments in two deltas) and text
/// answer, as SSE.
fn responses_answers(arguments: &str) -> (String, String) {
    let sse = |events: &[Value]| -> String {
        events
            .iter()
            .map(|e| format!("event: {}\ndata: {e}\n\n", e["type"].as_str().unwrap_or("")))
            .collect()
    };
    let created = json!({"type": "response.created", "response": {"id": RESPONSE_ID, "status": "in_progress"}});
    let completed = json!({"type": "response.completed", "response": {"id": RESPONSE_ID,
        "status": "completed", "usage": {"input_tokens": 500, "output_tokens": 20,
        "input_tokens_details": {"cached_tokens": 0}}}});
    let item = |args: &str| {
        json!({"type": "function_call", "id": "fc", "call_id": CALL_ID,
        "name": "echo", "arguments": args})
    };
    let (first, second) = arguments.split_at(arguments.len() / 2);
    let call = sse(&[
        created.clone(),
        json!({"type": "response.output_item.added", "output_index": 0, "item": item("")}),
        json!({"type": "response.function_call_arguments.delta", "output_index": 0, "delta": first}),
        json!({"type": "response.function_call_arguments.delta", "output_index": 0, "delta": second}),
        json!({"type": "response.output_item.done", "output_index": 0, "item": item(arguments)}),
        completed.clone(),
    ]);
    let text = sse(&[
        created,
        json!({"type": "response.output_text.delta", "output_index": 0, "delta": "Done with "}),
        json!({"type": "response.output_text.delta", "output_index": 0, "delta": "this step."}),
        completed,
    ]);
    (call, text)
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

/// Serves one keep-alive connection.
async fn connection(
    stream: TcpStream,
    counters: &Counters,
    answers: &Answers,
) -> std::io::Result<()> {
    stream.set_nodelay(true)?;
    let (read, mut write) = stream.into_split();
    let mut read = BufReader::new(read);
    let mut line = String::new();
    let mut body = Vec::new();
    loop {
        let mut content_length = 0usize;
        line.clear();
        if read.read_line(&mut line).await? == 0 {
            return Ok(());
        }
        let stats = line.starts_with("GET /stats");
        let responses_api = line.starts_with("POST /v1/responses");
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
        body.resize(content_length, 0);
        read.read_exact(&mut body).await?;
        let (status, content_type, payload) = if stats {
            let stats = json!({
                "requests": counters.requests.load(Ordering::Relaxed),
                "bytes": counters.bytes.load(Ordering::Relaxed),
            });
            ("200 OK", "application/json", stats.to_string())
        } else if responses_api {
            let n = counters.requests.fetch_add(1, Ordering::Relaxed);
            counters
                .bytes
                .fetch_add(content_length as u64, Ordering::Relaxed);
            responses_answer(n, &body, counters, answers)
        } else {
            let n = counters.requests.fetch_add(1, Ordering::Relaxed);
            counters
                .bytes
                .fetch_add(content_length as u64, Ordering::Relaxed);
            let done = match answers.rounds {
                Some(rounds) => tool_results(&body) >= rounds,
                None => last_role_is_tool(&body),
            };
            let payload = if done {
                answers.text.clone()
            } else {
                format!("{}call_{n}{}", answers.call_prefix, answers.call_suffix)
            };
            ("200 OK", "text/event-stream", payload)
        };
        if !stats && !answers.latency.is_zero() {
            tokio::time::sleep(answers.latency).await;
        }
        let response = format!(
            "HTTP/1.1 {status}\r\ncontent-type: {content_type}\r\ncontent-length: {}\r\n\r\n{payload}",
            payload.len()
        );
        write.write_all(response.as_bytes()).await?;
    }
}

/// The answer to request `n` on the Responses API.
fn responses_answer(
    n: u64,
    body: &[u8],
    counters: &Counters,
    answers: &Answers,
) -> (&'static str, &'static str, String) {
    // The id comes before the input: the head of the body holds it.
    let head = String::from_utf8_lossy(&body[..body.len().min(64 * 1024)]);
    let previous = head
        .split_once("\"previous_response_id\":\"resp_")
        .and_then(|(_, rest)| rest.split_once('"'))
        .map(|(id, _)| id.parse::<u64>().ok());
    let mut responses = counters.responses.lock();
    if let Some(id) = previous {
        if !id.is_some_and(|id| responses.contains(&id)) {
            let error = json!({"error": {"message": "Previous response not found.",
                "type": "invalid_request_error", "param": "previous_response_id",
                "code": "previous_response_not_found"}});
            return ("400 Bad Request", "application/json", error.to_string());
        }
    }
    responses.insert(n);
    drop(responses);
    let tail = &body[body.len().saturating_sub(64 * 1024)..];
    let tail = String::from_utf8_lossy(tail);
    let last_output = tail.rfind("{\"type\":\"function_call_output\"");
    let last_message = tail.rfind("{\"role\":");
    let answer = if last_output > last_message {
        &answers.responses_text
    } else {
        &answers.responses_call
    };
    let payload = answer
        .replace(RESPONSE_ID, &format!("resp_{n}"))
        .replace(CALL_ID, &format!("call_{n}"));
    ("200 OK", "text/event-stream", payload)
}

/// Whether the request's last message is a tool result. Looks at the tail
/// of the body only: parsing megabytes of history per request would make
/// the server, not pod, the bottleneck of a long session.
fn last_role_is_tool(body: &[u8]) -> bool {
    let tail = &body[body.len().saturating_sub(64 * 1024)..];
    let text = String::from_utf8_lossy(tail);
    // The messages array ends where the body's next key begins.
    let Some(messages_end) = text.rfind("],\"stream\":") else {
        return false;
    };
    let Some(start) = text[..messages_end].rfind("{\"role\":") else {
        return false;
    };
    text[start..].starts_with("{\"role\":\"tool\"")
}

/// How many tool results the conversation holds.
fn tool_results(body: &[u8]) -> usize {
    let text = String::from_utf8_lossy(body);
    text.matches("{\"role\":\"tool\"").count()
}

/// A running server process; killed when dropped.
pub struct Server {
    /// `host:port`.
    pub address: String,
    _child: Child,
    client: reqwest::Client,
}

/// Request counts the server saw.
#[derive(Clone, Copy, Debug, Default)]
pub struct Stats {
    /// Model requests answered.
    pub requests: u64,
    /// Request-body bytes received.
    pub bytes: u64,
}

impl Server {
    /// Starts `pod-bench loopback-server` answering tool calls whose text
    /// is `result_bytes` long.
    pub async fn start(result_bytes: usize) -> Result<Self, Box<dyn std::error::Error>> {
        Self::start_with(Options::new(result_bytes)).await
    }

    /// Starts the server answering as `options` say.
    pub async fn start_with(options: Options) -> Result<Self, Box<dyn std::error::Error>> {
        let mut child = Command::new(std::env::current_exe()?)
            .arg("loopback-server")
            .args(options.args())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .kill_on_drop(true)
            .spawn()?;
        let stdout = child.stdout.take().ok_or("no stdout from the server")?;
        let mut first = String::new();
        BufReader::new(stdout).read_line(&mut first).await?;
        let address = first.trim().to_string();
        if address.is_empty() {
            return Err("the loopback server printed no address".into());
        }
        Ok(Self {
            address,
            _child: child,
            client: reqwest::Client::new(),
        })
    }

    /// The base URL an `Endpoint` takes.
    pub fn base_url(&self) -> String {
        format!("http://{}/v1", self.address)
    }

    /// What the server has seen so far.
    pub async fn stats(&self) -> Result<Stats, Box<dyn std::error::Error>> {
        let stats: Value = self
            .client
            .get(format!("http://{}/stats", self.address))
            .send()
            .await?
            .json()
            .await?;
        Ok(Stats {
            requests: stats["requests"].as_u64().unwrap_or(0),
            bytes: stats["bytes"].as_u64().unwrap_or(0),
        })
    }
}
