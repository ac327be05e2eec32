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
//! A connection that opens with HTTP/2's preface (a client with prior
//! knowledge) is served over HTTP/2, up to [`H2_STREAMS`] streams at once.

use serde_json::{json, Value};
use std::process::Stdio;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::net::TcpListener;
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
    /// Also speak TLS, with a certificate made for 127.0.0.1 whose PEM is
    /// written to `cert.pem` in this directory (a profile's `ca_file`).
    pub tls: Option<std::path::PathBuf>,
    /// Over TLS, offer only HTTP/1.1 in ALPN (a server without HTTP/2).
    pub http1_only: bool,
}

impl Options {
    /// Answers at once, calling `echo` with `result_bytes` of text.
    pub fn new(result_bytes: usize) -> Self {
        Self {
            result_bytes,
            latency: std::time::Duration::ZERO,
            call: None,
            rounds: None,
            tls: None,
            http1_only: false,
        }
    }

    /// Reads `--result-bytes=N`, `--latency-ms=N`, `--tool=NAME`,
    /// `--arguments=JSON`, `--rounds=N`, `--tls=DIR` and `--http1-only`.
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
        options.tls = value("--tls=").map(std::path::PathBuf::from);
        options.http1_only = args.iter().any(|a| a == "--http1-only");
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
        if let Some(dir) = &self.tls {
            args.push(format!("--tls={}", dir.display()));
        }
        if self.http1_only {
            args.push("--http1-only".into());
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
    let tls = match &options.tls {
        Some(dir) => Some(tls_acceptor(dir, options.http1_only)?),
        None => None,
    };
    let accept = async {
        while let Ok((stream, _)) = listener.accept().await {
            let (counters, answers) = (counters.clone(), answers.clone());
            let tls = tls.clone();
            tokio::spawn(async move {
                let _ = stream.set_nodelay(true);
                // TLS begins with a handshake record (0x16), HTTP/2 with
                // prior knowledge with its preface; anything else is
                // HTTP/1.1 in the clear (as `GET /stats` always is).
                let mut first = [0u8; 3];
                let Ok(3) = stream.peek(&mut first).await else {
                    return;
                };
                match (&tls, first) {
                    (Some(acceptor), [0x16, ..]) => {
                        let Ok(stream) = acceptor.accept(stream).await else {
                            return;
                        };
                        if stream.get_ref().1.alpn_protocol() == Some(b"h2") {
                            let _ = connection_h2(stream, counters, answers).await;
                        } else {
                            let _ = connection(stream, &counters, &answers).await;
                        }
                    }
                    (_, [b'P', b'R', b'I']) => {
                        let _ = connection_h2(stream, counters, answers).await;
                    }
                    _ => {
                        let _ = connection(stream, &counters, &answers).await;
                    }
                }
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
async fn connection<S: AsyncRead + AsyncWrite + Unpin>(
    stream: S,
    counters: &Counters,
    answers: &Answers,
) -> std::io::Result<()> {
    let (read, mut write) = tokio::io::split(stream);
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
        let kind = if stats {
            Asked::Stats
        } else if responses_api {
            Asked::Responses
        } else {
            Asked::Chat
        };
        let (status, content_type, payload) = answer(kind, &body, counters, answers);
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

/// A TLS acceptor with a new self-signed certificate for 127.0.0.1,
/// written as `cert.pem` in `dir`; ALPN offers `h2` unless `http1_only`.
fn tls_acceptor(
    dir: &std::path::Path,
    http1_only: bool,
) -> Result<tokio_rustls::TlsAcceptor, Box<dyn std::error::Error>> {
    use tokio_rustls::rustls;
    let certified = rcgen::generate_simple_self_signed(vec!["127.0.0.1".into()])?;
    std::fs::write(dir.join("cert.pem"), certified.cert.pem())?;
    let key = rustls::pki_types::PrivateKeyDer::Pkcs8(rustls::pki_types::PrivatePkcs8KeyDer::from(
        certified.key_pair.serialize_der(),
    ));
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .with_no_client_auth()
        .with_single_cert(vec![certified.cert.der().clone()], key)?;
    config.alpn_protocols = if http1_only {
        vec![b"http/1.1".to_vec()]
    } else {
        vec![b"h2".to_vec(), b"http/1.1".to_vec()]
    };
    Ok(tokio_rustls::TlsAcceptor::from(Arc::new(config)))
}

/// What a request asks for.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Asked {
    /// `GET /stats`.
    Stats,
    /// `POST /v1/responses`.
    Responses,
    /// `POST /v1/chat/completions`.
    Chat,
}

/// The status, content type and body answering a request with `body`.
fn answer(
    kind: Asked,
    body: &[u8],
    counters: &Counters,
    answers: &Answers,
) -> (&'static str, &'static str, String) {
    if kind == Asked::Stats {
        let stats = json!({
            "requests": counters.requests.load(Ordering::Relaxed),
            "bytes": counters.bytes.load(Ordering::Relaxed),
        });
        return ("200 OK", "application/json", stats.to_string());
    }
    let n = counters.requests.fetch_add(1, Ordering::Relaxed);
    counters
        .bytes
        .fetch_add(body.len() as u64, Ordering::Relaxed);
    if kind == Asked::Responses {
        return responses_answer(n, body, counters, answers);
    }
    let done = match answers.rounds {
        Some(rounds) => tool_results(body) >= rounds,
        None => last_role_is_tool(body),
    };
    let payload = if done {
        answers.text.clone()
    } else {
        format!("{}call_{n}{}", answers.call_prefix, answers.call_suffix)
    };
    ("200 OK", "text/event-stream", payload)
}

/// Streams an HTTP/2 client may have open at once on one connection: what
/// most servers and gateways send (nginx's and Envoy's default is 128 and
/// 100; the RFC asks for at least 100).
const H2_STREAMS: u32 = 100;

/// Serves one HTTP/2 connection (a client with prior knowledge): each
/// stream answered as a request on HTTP/1.1 would be, in one DATA frame.
async fn connection_h2<S: AsyncRead + AsyncWrite + Unpin>(
    stream: S,
    counters: Arc<Counters>,
    answers: Arc<Answers>,
) -> Result<(), h2::Error> {
    let mut conn = h2::server::Builder::new()
        .max_concurrent_streams(H2_STREAMS)
        .handshake::<_, bytes::Bytes>(stream)
        .await?;
    while let Some(accepted) = conn.accept().await {
        let (request, respond) = accepted?;
        let (counters, answers) = (counters.clone(), answers.clone());
        tokio::spawn(async move {
            let _ = stream_h2(request, respond, &counters, &answers).await;
        });
    }
    Ok(())
}

async fn stream_h2(
    request: http::Request<h2::RecvStream>,
    mut respond: h2::server::SendResponse<bytes::Bytes>,
    counters: &Counters,
    answers: &Answers,
) -> Result<(), h2::Error> {
    let kind = match request.uri().path() {
        "/stats" => Asked::Stats,
        "/v1/responses" => Asked::Responses,
        _ => Asked::Chat,
    };
    let mut recv = request.into_body();
    let mut body = Vec::new();
    while let Some(data) = recv.data().await {
        let data = data?;
        let _ = recv.flow_control().release_capacity(data.len());
        body.extend_from_slice(&data);
    }
    let (status, content_type, payload) = answer(kind, &body, counters, answers);
    if kind != Asked::Stats && !answers.latency.is_zero() {
        tokio::time::sleep(answers.latency).await;
    }
    let code: u16 = status[..3].parse().unwrap_or(500);
    let head = http::Response::builder()
        .status(code)
        .header("content-type", content_type)
        .header("content-length", payload.len())
        .body(())
        .unwrap_or_default();
    let mut send = respond.send_response(head, false)?;
    send.send_data(bytes::Bytes::from(payload), true)
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
    /// Where the certificate of a TLS server is (`cert.pem`).
    tls: Option<std::path::PathBuf>,
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
            tls: options.tls.clone(),
            _child: child,
            client: reqwest::Client::new(),
        })
    }

    /// The base URL an `Endpoint` takes.
    pub fn base_url(&self) -> String {
        let scheme = if self.tls.is_some() { "https" } else { "http" };
        format!("{scheme}://{}/v1", self.address)
    }

    /// The PEM file of a TLS server's certificate (a profile's `ca_file`).
    pub fn ca_file(&self) -> Option<std::path::PathBuf> {
        self.tls.as_ref().map(|dir| dir.join("cert.pem"))
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
