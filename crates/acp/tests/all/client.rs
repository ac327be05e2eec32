//! A newline-delimited JSON-RPC client for driving an ACP agent over any
//! byte streams (a child's stdio or in-memory pipes), and a compact view of
//! `session/update`s for exact assertions.

use serde_json::{json, Value};
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader, Lines};

// A guard against a hung agent, not a timing assertion: every read that
// should succeed does so in milliseconds.
const READ_TIMEOUT: Duration = Duration::from_secs(30);

/// One side of an ACP conversation.
pub struct AcpClient<R, W> {
    lines: Lines<BufReader<R>>,
    writer: W,
    next_id: u64,
}

/// What came back for a request: the notifications before the response,
/// then the response itself.
#[derive(Debug)]
pub struct Reply {
    /// `session/update` params (and any other notifications), in order.
    pub notifications: Vec<Value>,
    /// The JSON-RPC response object.
    pub response: Value,
}

impl Reply {
    /// The `result`, panicking with the error if there is none.
    pub fn result(&self) -> &Value {
        match self.response.get("result") {
            Some(result) => result,
            None => panic!("expected a result, got {}", self.response),
        }
    }

    /// The `error`, panicking if the request succeeded.
    pub fn error(&self) -> &Value {
        match self.response.get("error") {
            Some(error) => error,
            None => panic!("expected an error, got {}", self.response),
        }
    }

    /// The updates as compact strings (see [`summarize`]).
    pub fn summary(&self) -> Vec<String> {
        self.notifications.iter().map(summarize).collect()
    }
}

impl<R: AsyncRead + Unpin, W: AsyncWrite + Unpin> AcpClient<R, W> {
    /// A client reading `reader` and writing `writer`.
    pub fn new(reader: R, writer: W) -> Self {
        Self {
            lines: BufReader::new(reader).lines(),
            writer,
            next_id: 1,
        }
    }

    /// Writes one raw line (a newline is added).
    pub async fn send_line(&mut self, line: &str) {
        self.writer.write_all(line.as_bytes()).await.unwrap();
        self.writer.write_all(b"\n").await.unwrap();
        self.writer.flush().await.unwrap();
    }

    /// Sends a request; returns its id.
    pub async fn send_request(&mut self, method: &str, params: Value) -> u64 {
        let id = self.next_id;
        self.next_id += 1;
        let message = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        self.send_line(&message.to_string()).await;
        id
    }

    /// Sends a notification.
    pub async fn notify(&mut self, method: &str, params: Value) {
        let message = json!({"jsonrpc": "2.0", "method": method, "params": params});
        self.send_line(&message.to_string()).await;
    }

    /// The next message, or `None` at end of stream.
    pub async fn next(&mut self) -> Option<Value> {
        let line = tokio::time::timeout(READ_TIMEOUT, self.lines.next_line())
            .await
            .expect("the agent did not answer in time")
            .expect("reading the agent's output failed")?;
        Some(serde_json::from_str(&line).unwrap_or_else(|e| panic!("bad line {line:?}: {e}")))
    }

    /// Reads until the response to `id`, collecting what came before.
    pub async fn reply_to(&mut self, id: u64) -> Reply {
        let mut notifications = Vec::new();
        loop {
            let message = self.next().await.expect("the agent closed its output");
            if message.get("id") == Some(&json!(id)) && message.get("method").is_none() {
                return Reply {
                    notifications,
                    response: message,
                };
            }
            notifications.push(message);
        }
    }

    /// Reads until the agent sends a request calling `method`, collecting
    /// what came before; returns those and the request.
    pub async fn request_from_agent(&mut self, method: &str) -> (Vec<Value>, Value) {
        let mut before = Vec::new();
        loop {
            let message = self.next().await.expect("the agent closed its output");
            if message["method"] == method && message.get("id").is_some() {
                return (before, message);
            }
            before.push(message);
        }
    }

    /// Answers the agent's request `request` with `result`.
    pub async fn respond(&mut self, request: &Value, result: Value) {
        let message = json!({"jsonrpc": "2.0", "id": request["id"], "result": result});
        self.send_line(&message.to_string()).await;
    }

    /// Answers the agent's request `request` with a JSON-RPC error.
    pub async fn respond_error(&mut self, request: &Value, code: i64, message: &str) {
        let message = json!({"jsonrpc": "2.0", "id": request["id"],
                             "error": {"code": code, "message": message}});
        self.send_line(&message.to_string()).await;
    }

    /// Sends a request and waits for its reply.
    pub async fn call(&mut self, method: &str, params: Value) -> Reply {
        let id = self.send_request(method, params).await;
        self.reply_to(id).await
    }

    /// `initialize` with protocol version 1.
    pub async fn initialize(&mut self) -> Value {
        let reply = self
            .call(
                "initialize",
                json!({"protocolVersion": 1, "clientCapabilities": {},
                       "clientInfo": {"name": "pod-tests", "version": "0"}}),
            )
            .await;
        reply.result().clone()
    }

    /// `session/new` in `cwd`; returns the session id.
    pub async fn new_session(&mut self, cwd: &std::path::Path) -> String {
        let reply = self
            .call("session/new", json!({"cwd": cwd, "mcpServers": []}))
            .await;
        reply.result()["sessionId"]
            .as_str()
            .expect("a session id")
            .to_string()
    }

    /// `session/prompt` with one text block; returns the whole reply.
    pub async fn prompt(&mut self, session: &str, text: &str) -> Reply {
        let id = self.send_prompt(session, text).await;
        self.reply_to(id).await
    }

    /// Sends `session/prompt` without waiting; returns its id.
    pub async fn send_prompt(&mut self, session: &str, text: &str) -> u64 {
        self.send_request(
            "session/prompt",
            json!({"sessionId": session, "prompt": [{"type": "text", "text": text}]}),
        )
        .await
    }
}

/// A one-line view of a notification, e.g. `plan [pending:Read]`,
/// `tool_call call_0_0 todo_write think in_progress`, `message Hel`.
pub fn summarize(message: &Value) -> String {
    let Some(update) = message.pointer("/params/update") else {
        return format!(
            "{} {}",
            message["method"].as_str().unwrap_or("?"),
            message["params"]
        );
    };
    let text = |u: &Value| {
        u.pointer("/content/text")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string()
    };
    match update["sessionUpdate"].as_str().unwrap_or("?") {
        "agent_message_chunk" => format!("message {}", text(update)),
        "agent_thought_chunk" => format!("thought {}", text(update)),
        "user_message_chunk" => format!("user {}", text(update)),
        "tool_call" => format!(
            "tool_call {} {} {} {}",
            update["toolCallId"].as_str().unwrap_or("?"),
            update["title"].as_str().unwrap_or("?"),
            update["kind"].as_str().unwrap_or("other"),
            update["status"].as_str().unwrap_or("pending"),
        ),
        "tool_call_update" => format!(
            "tool_call_update {} {}",
            update["toolCallId"].as_str().unwrap_or("?"),
            update["status"].as_str().unwrap_or("-"),
        ),
        "plan" => {
            let entries: Vec<String> = update["entries"]
                .as_array()
                .map(|entries| {
                    entries
                        .iter()
                        .map(|e| {
                            format!(
                                "{}:{}",
                                e["status"].as_str().unwrap_or("?"),
                                e["content"].as_str().unwrap_or("?")
                            )
                        })
                        .collect()
                })
                .unwrap_or_default();
            format!("plan [{}]", entries.join(", "))
        }
        other => format!("{other} {update}"),
    }
}

/// Joins consecutive chunks of the same kind (`message`, `thought`, `user`),
/// since how a stream is split is not part of the contract.
pub fn join_chunks(summary: Vec<String>) -> Vec<String> {
    let mut joined: Vec<String> = Vec::new();
    for line in summary {
        let (kind, text) = line.split_once(' ').unwrap_or((line.as_str(), ""));
        let chunky = matches!(kind, "message" | "thought" | "user");
        if let Some(last) = joined.last_mut() {
            if chunky && last.split_once(' ').map(|(k, _)| k) == Some(kind) {
                last.push_str(text);
                continue;
            }
        }
        joined.push(line);
    }
    joined
}
