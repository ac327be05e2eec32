//! `pod serve --http`: the API over real HTTP on loopback, a real `pod`
//! process serving it: auth, every endpoint, bad input, approvals answered
//! over HTTP, and event streams resumed with `Last-Event-ID`.

use crate::support::*;
use futures_util::StreamExt;
use serde_json::{json, Value};
use std::io::BufRead;
use std::process::{Child, Stdio};
use std::time::Duration;

/// A running `pod serve --http 127.0.0.1:0` and a client for it.
pub struct Server {
    child: Child,
    /// `http://127.0.0.1:PORT`.
    pub base: String,
    /// The bearer token.
    pub token: String,
    /// What the server printed first (the token line among it).
    pub banner: Vec<String>,
    client: reqwest::Client,
}

impl Server {
    /// Starts the server on `script` (the model of sessions it creates).
    pub fn start(env: &TestEnv, script: &Value) -> Self {
        let path = env.script("serve-script.json", script);
        let mut command = env.pod_process();
        command.arg("--script").arg(path);
        Self::start_with(command, env)
    }

    /// Starts the server on `script` at `addr` (`127.0.0.1:PORT`): another
    /// server in the place of one that stopped.
    pub fn start_on(env: &TestEnv, script: &Value, addr: &str) -> Self {
        let path = env.script("serve-script.json", script);
        let mut command = env.pod_process();
        command.arg("--script").arg(path);
        Self::spawn(command, env, addr)
    }

    /// Starts `pod serve --http 127.0.0.1:0` with `command`'s environment
    /// and serve flags (it is `pod` plus flags after `serve`).
    pub fn start_with(command: std::process::Command, env: &TestEnv) -> Self {
        Self::spawn(command, env, "127.0.0.1:0")
    }

    fn spawn(command: std::process::Command, env: &TestEnv, addr: &str) -> Self {
        let mut full = env.pod_process();
        for (key, value) in command.get_envs() {
            match value {
                Some(value) => full.env(key, value),
                None => full.env_remove(key),
            };
        }
        full.args(["serve", "--http", addr])
            .args(command.get_args());
        let mut child = full
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("spawn pod serve");
        let mut lines = std::io::BufReader::new(child.stdout.take().unwrap()).lines();
        // A fleet worker may print its own lines around the server's.
        let mut banner = Vec::new();
        while !banner.iter().any(|l: &String| l.starts_with("dashboard:")) {
            banner.push(lines.next().expect("the server's banner").unwrap());
        }
        let base = banner
            .iter()
            .find_map(|line| line.split("HTTP API on http://").nth(1))
            .and_then(|rest| rest.strip_suffix("/api"))
            .map(|addr| format!("http://{addr}"))
            .unwrap_or_else(|| panic!("no address in {banner:?}"));
        // The rest of its output is not read; a thread drains it so the
        // server never blocks on a full pipe.
        std::thread::spawn(move || for _ in lines {});
        let token = std::fs::read_to_string(env.pod_home().join("http-token")).unwrap();
        Self {
            child,
            base,
            token,
            banner,
            client: reqwest::Client::new(),
        }
    }

    /// `GET /metrics` with the token: the exposition text.
    pub async fn metrics(&self) -> String {
        self.client
            .get(format!("{}/metrics", self.base))
            .bearer_auth(&self.token)
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap()
    }

    /// A request to `/api{path}` with the token.
    pub fn request(&self, method: reqwest::Method, path: &str) -> reqwest::RequestBuilder {
        self.client
            .request(method, format!("{}/api{path}", self.base))
            .bearer_auth(&self.token)
    }

    /// GET, expecting 200; the JSON body.
    pub async fn get(&self, path: &str) -> Value {
        let response = self
            .request(reqwest::Method::GET, path)
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 200, "GET {path}");
        response.json().await.unwrap()
    }

    /// POST `body`; the status and JSON body.
    pub async fn post(&self, path: &str, body: &str) -> (u16, Value) {
        let response = self
            .request(reqwest::Method::POST, path)
            .header("content-type", "application/json")
            .body(body.to_string())
            .send()
            .await
            .unwrap();
        let status = response.status().as_u16();
        (status, response.json().await.unwrap_or(Value::Null))
    }

    /// Asks for session `id` until it is neither live here nor held
    /// (failing after a minute: a guard against a hang).
    pub async fn until_let_go(&self, id: &str) {
        for _ in 0..1_200 {
            let one = self.get(&format!("/sessions/{id}")).await;
            if one["live"] == false && one["session"]["holder"].is_null() {
                return;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!("session {id} is still held");
    }

    /// Creates a session on `task` in the test's workspace.
    pub async fn create(&self, env: &TestEnv, task: &str) -> String {
        let body = json!({"task": task, "workspace": env.workspace()}).to_string();
        let (status, body) = self.post("/sessions", &body).await;
        assert_eq!(status, 201, "{body}");
        body["session_id"].as_str().unwrap().to_string()
    }

    /// A session's event stream from `after`.
    pub async fn events(&self, id: &str, last_event_id: Option<usize>) -> Events {
        let mut request = self.request(reqwest::Method::GET, &format!("/sessions/{id}/events"));
        if let Some(last) = last_event_id {
            request = request.header("Last-Event-ID", last.to_string());
        }
        Self::stream(request).await
    }

    /// The list's event stream (`/api/events`).
    pub async fn list_events(&self) -> Events {
        Self::stream(self.request(reqwest::Method::GET, "/events")).await
    }

    async fn stream(request: reqwest::RequestBuilder) -> Events {
        let response = request.send().await.unwrap();
        assert_eq!(response.status(), 200);
        assert_eq!(response.headers()["content-type"], "text/event-stream");
        Events {
            stream: Box::pin(response.bytes_stream()),
            buffer: String::new(),
        }
    }
}

impl Server {
    /// SIGKILLs the server and waits for it to be gone.
    pub fn kill(&mut self) {
        self.child.kill().expect("kill the server");
        self.child.wait().expect("reap the server");
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn uuid_nil() -> String {
    "00000000-0000-0000-0000-000000000000".into()
}

/// One Server-Sent Event.
#[derive(Debug, Clone)]
pub struct Sse {
    pub event: String,
    pub id: Option<String>,
    pub data: Value,
}

/// An event stream being read.
pub struct Events {
    stream:
        std::pin::Pin<Box<dyn futures_util::Stream<Item = reqwest::Result<bytes::Bytes>> + Send>>,
    buffer: String,
}

impl Events {
    /// The next event (keep-alive comments skipped).
    pub async fn next(&mut self) -> Sse {
        loop {
            if let Some(end) = self.buffer.find("\n\n") {
                let block: String = self.buffer.drain(..end + 2).collect();
                let mut event = Sse {
                    event: "message".into(),
                    id: None,
                    data: Value::Null,
                };
                let mut data = String::new();
                for line in block.lines() {
                    if let Some(v) = line.strip_prefix("event: ") {
                        event.event = v.to_string();
                    } else if let Some(v) = line.strip_prefix("id: ") {
                        event.id = Some(v.to_string());
                    } else if let Some(v) = line.strip_prefix("data: ") {
                        data.push_str(v);
                    }
                }
                if data.is_empty() {
                    continue;
                }
                event.data = serde_json::from_str(&data).unwrap();
                return event;
            }
            let chunk = self.stream.next().await.expect("stream open").unwrap();
            self.buffer.push_str(&String::from_utf8_lossy(&chunk));
        }
    }

    /// Reads until an event matches `pred`; returns it. A stream that says
    /// nothing matching for a minute fails the test with what it said
    /// (a guard against a hang, not a measure of time).
    pub async fn until(&mut self, pred: impl Fn(&Sse) -> bool) -> Sse {
        let mut seen = Vec::new();
        let found = tokio::time::timeout(Duration::from_secs(60), async {
            loop {
                let event = self.next().await;
                if pred(&event) {
                    return event;
                }
                seen.push(format!("{} {}", event.event, event.data));
            }
        })
        .await;
        match found {
            Ok(event) => event,
            Err(_) => panic!("no matching event; the stream said:\n{}", seen.join("\n")),
        }
    }
}

fn plan(status: &str) -> Value {
    json!({"todos": [{"id": "notes", "content": "Write the notes", "status": status}]})
}

/// A plan, a write that asks, the plan completed, an answer; then one more
/// answer for a later prompt.
pub fn writing_script() -> Value {
    json!({"steps": [
        {"text": "Planning.", "tool_calls": [{"name": "todo_write", "arguments": plan("in_progress")}]},
        {"tool_calls": [{"name": "write_file", "arguments": {"path": "notes.md", "content": "n\n"}}]},
        {"tool_calls": [{"name": "todo_write", "arguments": plan("completed")}]},
        {"text": "Notes written."},
        {"text": "Second answer."}
    ]})
}

pub fn is_record_text(event: &Sse, text: &str) -> bool {
    event.event == "record" && event.data["record"]["item"]["text"] == text
}

#[tokio::test]
async fn the_api_needs_the_token_and_says_so_in_json() {
    let env = TestEnv::new();
    let server = Server::start(&env, &writing_script());
    assert!(
        server.banner[1].contains(&server.token),
        "printed once: {:?}",
        server.banner
    );
    let client = reqwest::Client::new();
    for token in [None, Some("wrong-token-wrong-token")] {
        let mut request = client.get(format!("{}/api/sessions", server.base));
        if let Some(token) = token {
            request = request.bearer_auth(token);
        }
        let response = request.send().await.unwrap();
        assert_eq!(response.status(), 401);
        let body: Value = response.json().await.unwrap();
        assert!(body["error"].as_str().unwrap().contains("token"), "{body}");
    }
    // The query form is for event streams (GET) only.
    let url = format!("{}/api/sessions?access_token={}", server.base, server.token);
    assert_eq!(client.get(&url).send().await.unwrap().status(), 200);
    assert_eq!(
        client.post(&url).body("{}").send().await.unwrap().status(),
        401
    );
    // The dashboard's files need none and hold no data.
    let page = client.get(&server.base).send().await.unwrap();
    assert_eq!(page.status(), 200);
    assert!(!page.text().await.unwrap().contains(&server.token));
    assert_eq!(
        client
            .get(format!("{}/assets/app.js", server.base))
            .send()
            .await
            .unwrap()
            .status(),
        200
    );
}

#[tokio::test]
async fn a_session_created_over_http_asks_there_and_every_endpoint_answers() {
    let env = TestEnv::new();
    let server = Server::start(&env, &writing_script());
    let id = server.create(&env, "Write the notes").await;
    let mut events = server.events(&id, None).await;
    // The write waits for an answer, listed by the API and the stream.
    let asked = events
        .until(|e| e.event == "approvals" && !e.data["approvals"].as_array().unwrap().is_empty())
        .await;
    let approval = &asked.data["approvals"][0];
    assert_eq!(approval["request"]["tool"], "write_file");
    let listed = server.get("/approvals").await;
    assert_eq!(listed["approvals"][0]["id"], approval["id"]);
    let approval_id = approval["id"].as_str().unwrap();
    // Bad answers change nothing.
    let (status, body) = server
        .post(
            &format!("/approvals/{approval_id}"),
            r#"{"decision": "maybe"}"#,
        )
        .await;
    assert_eq!(status, 400, "{body}");
    let (status, _) = server
        .post(
            &format!("/approvals/{approval_id}"),
            r#"{"decision": "cancelled"}"#,
        )
        .await;
    assert_eq!(status, 400);
    assert!(!std::path::Path::new(&env.workspace().join("notes.md")).exists());
    // An answer bound to another call or session lands nowhere.
    for wrong in [
        json!({"decision": "allow_once", "call_id": "call_other"}),
        json!({"decision": "allow_once", "session_id": uuid_nil()}),
    ] {
        let (status, body) = server
            .post(&format!("/approvals/{approval_id}"), &wrong.to_string())
            .await;
        assert_eq!(status, 409, "{body}");
        assert!(!std::path::Path::new(&env.workspace().join("notes.md")).exists());
    }
    let bound = json!({
        "decision": "allow_once",
        "session_id": id,
        "call_id": approval["request"]["call_id"],
    });
    let (status, _) = server
        .post(&format!("/approvals/{approval_id}"), &bound.to_string())
        .await;
    assert_eq!(status, 200);
    let (status, body) = server
        .post(
            &format!("/approvals/{approval_id}"),
            r#"{"decision": "allow_once"}"#,
        )
        .await;
    assert_eq!(status, 409, "answered already: {body}");
    events.until(|e| is_record_text(e, "Notes written.")).await;
    assert!(env.workspace().join("notes.md").exists());
    // The stream's status is sampled: parked, continued and finished within
    // one poll read the same as parked, so the API is asked until the
    // session is let go.
    server.until_let_go(&id).await;

    // The list and the session.
    let list = server.get("/sessions").await;
    let row = list["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["id"] == id.as_str())
        .unwrap()
        .clone();
    assert_eq!(row["status"], "done");
    assert_eq!(row["todos"], json!({"completed": 1, "total": 1}));
    let one = server.get(&format!("/sessions/{}", &id[..8])).await;
    assert_eq!(one["session"]["id"], id.as_str());
    assert_eq!(one["todos"][0]["status"], "completed");
    let total = one["records"].as_u64().unwrap() as usize;
    // History, page by page: every record once, in order.
    let mut seqs = Vec::new();
    let mut after = 0;
    loop {
        let page = server
            .get(&format!("/sessions/{id}/history?after={after}&limit=3"))
            .await;
        for record in page["records"].as_array().unwrap() {
            seqs.push(record["seq"].as_u64().unwrap() as usize);
        }
        match page["next"].as_u64() {
            Some(next) => after = next as usize,
            None => break,
        }
    }
    assert_eq!(seqs, (1..=total).collect::<Vec<_>>());

    // Notify and cancel need the session running here; a prompt resumes it.
    let (status, body) = server
        .post(&format!("/sessions/{id}/notify"), r#"{"text": "hi"}"#)
        .await;
    assert_eq!(status, 409, "{body}");
    assert!(body["error"].as_str().unwrap().contains("not running"));
    let (status, _) = server.post(&format!("/sessions/{id}/cancel"), "{}").await;
    assert_eq!(status, 409);
    let (status, body) = server
        .post(
            &format!("/sessions/{id}/prompt"),
            r#"{"text": "Once more"}"#,
        )
        .await;
    assert_eq!(status, 202, "{body}");
    events.until(|e| is_record_text(e, "Second answer.")).await;

    // Bad input: each a 4xx with a JSON error, nothing changed.
    let (status, body) = server.post("/sessions", "{not json").await;
    assert_eq!(status, 400);
    assert!(body["error"].as_str().unwrap().contains("invalid JSON"));
    let (status, body) = server
        .post("/sessions", r#"{"task": "x", "workspace": "/no/such/dir"}"#)
        .await;
    assert_eq!(status, 400, "{body}");
    let (status, _) = server
        .post("/sessions", r#"{"task": "x", "colour": "red"}"#)
        .await;
    assert_eq!(status, 400);
    let missing = uuid::Uuid::new_v4();
    let (status, body) = server
        .post(&format!("/sessions/{missing}/prompt"), r#"{"text": "x"}"#)
        .await;
    assert_eq!(status, 404, "{body}");
    let response = server
        .request(reqwest::Method::GET, &format!("/sessions/{missing}"))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 404);
    let (status, _) = server
        .post(&format!("/sessions/{id}/prompt"), r#"{"text": ""}"#)
        .await;
    assert_eq!(status, 400);
    assert_eq!(
        server.get("/sessions").await["sessions"]
            .as_array()
            .unwrap()
            .len(),
        1
    );
}

#[tokio::test]
async fn a_watcher_that_reconnects_with_last_event_id_misses_nothing() {
    let env = TestEnv::new();
    let server = Server::start(&env, &writing_script());
    let id = server.create(&env, "Write the notes").await;
    // Two watchers at once see the same records.
    let mut first = server.events(&id, None).await;
    let mut second = server.events(&id, None).await;
    let a = first
        .until(|e| e.event == "record" && e.id.as_deref() == Some("3"))
        .await;
    let b = second
        .until(|e| e.event == "record" && e.id.as_deref() == Some("3"))
        .await;
    assert_eq!(a.data, b.data);
    drop(first);
    // The write waits: answer it, then reconnect from record 3. The
    // question comes after record 3 (the model has not yet asked to
    // write), so wait for the stream to say it is asked.
    let asked = second
        .until(|e| e.event == "approvals" && !e.data["approvals"].as_array().unwrap().is_empty())
        .await;
    let approval_id = asked.data["approvals"][0]["id"].as_str().unwrap();
    server
        .post(
            &format!("/approvals/{approval_id}"),
            r#"{"decision": "allow_once"}"#,
        )
        .await;
    second.until(|e| is_record_text(e, "Notes written.")).await;
    let mut again = server.events(&id, Some(3)).await;
    let mut seqs = Vec::new();
    loop {
        let event = again.next().await;
        if event.event == "record" {
            let seq = event.data["seq"].as_u64().unwrap();
            assert_eq!(event.id.as_deref(), Some(seq.to_string().as_str()));
            seqs.push(seq);
            if is_record_text(&event, "Notes written.") {
                break;
            }
        }
    }
    assert_eq!(seqs.first(), Some(&4), "resumes after the last id seen");
    assert!(seqs.windows(2).all(|w| w[1] == w[0] + 1), "{seqs:?}");
}

#[tokio::test]
async fn a_prompt_to_a_session_running_elsewhere_is_refused() {
    let env = TestEnv::new();
    // `pod run` holds a session while its model thinks for ten minutes.
    let script = env.script(
        "slow.json",
        &json!({"steps": [{"text": "slow", "delay_ms": 600_000}]}),
    );
    let mut run = env
        .pod_process()
        .args(["run", "--json", "--script"])
        .arg(&script)
        .arg("Think")
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = std::io::BufReader::new(run.stdout.take().unwrap()).lines();
    let started: Value = serde_json::from_str(&lines.next().unwrap().unwrap()).unwrap();
    let id = started["session_id"].as_str().unwrap().to_string();
    let server = Server::start(&env, &writing_script());
    let (status, body) = server
        .post(&format!("/sessions/{id}/prompt"), r#"{"text": "Me too"}"#)
        .await;
    assert_eq!(status, 409, "{body}");
    assert!(
        body["error"]
            .as_str()
            .unwrap()
            .contains("running elsewhere"),
        "{body}"
    );
    let row = server.get(&format!("/sessions/{id}")).await;
    assert_eq!(row["session"]["status"], "running");
    run.kill().unwrap();
    run.wait().unwrap();
}

#[test]
fn a_non_loopback_address_needs_a_token_file() {
    let env = TestEnv::new();
    let out = env
        .pod()
        .args([
            "serve",
            "--http",
            "0.0.0.0:0",
            "--provider",
            "scripted",
            "--script",
            "x.json",
        ])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("--token-file"), "{stderr}");
    assert!(
        !env.pod_home().join("http-token").exists(),
        "no token made for a refused start"
    );
}

/// With a PostgreSQL store the server lists the fleet's sessions and its
/// worker's sessions ask through the API.
#[tokio::test]
async fn a_fleet_session_parks_on_its_question_and_the_api_answers_it() {
    let pg = pod_testkit::postgres::Postgres::start();
    let env = TestEnv::new();
    let script = env.script("fleet.json", &writing_script());
    let out = env
        .pod()
        .env("POD_STORE", pg.url())
        .args(["submit", "--script"])
        .arg(&script)
        .arg("--workspace")
        .arg(env.workspace())
        .arg("Write the notes")
        .output()
        .unwrap();
    assert_success(&out);
    let id = String::from_utf8_lossy(&out.stdout).trim().to_string();
    let mut serve = env.pod_process();
    serve
        .env("POD_STORE", pg.url())
        .args(["--workers", "1", "--script"])
        .arg(&script);
    let server = Server::start_with(serve, &env);
    let mut events = server.events(&id, None).await;
    // The question is in the log a moment before the worker lets the
    // session go: a watcher may first see it asked and not yet parked.
    let asked = events
        .until(|e| e.event == "approvals" && e.data["approvals"][0]["parked"] == true)
        .await;
    // The worker parked it on its question: it says so, and a prompt
    // waits for the answer.
    let row = server.get(&format!("/sessions/{id}")).await;
    assert_eq!(row["session"]["status"], "awaiting_approval");
    assert_eq!(
        row["session"]["question"]["id"], asked.data["approvals"][0]["id"],
        "{row}"
    );
    assert!(row["session"]["holder"].is_null(), "{row}");
    let (status, body) = server
        .post(&format!("/sessions/{id}/prompt"), r#"{"text": "x"}"#)
        .await;
    assert_eq!(status, 409, "{body}");
    assert!(
        body["error"].as_str().unwrap().contains("answer it first"),
        "{body}"
    );
    let approval = asked.data["approvals"][0]["id"].as_str().unwrap();
    let (status, _) = server
        .post(
            &format!("/approvals/{approval}"),
            r#"{"decision": "allow_once"}"#,
        )
        .await;
    assert_eq!(status, 200);
    events.until(|e| is_record_text(e, "Notes written.")).await;
    assert!(env.workspace().join("notes.md").exists());
}

/// Regression: a note sent while the turn's last request ran was accepted
/// and then lost when the idle session was shut down.
#[tokio::test]
async fn a_note_sent_during_the_last_request_is_read_in_one_more() {
    let env = TestEnv::new();
    let script = json!({"steps": [
        {"text": "Thinking slowly.", "delay_ms": 1500},
        {"text": "Read your note."}
    ]});
    let server = Server::start(&env, &script);
    let id = server.create(&env, "Think").await;
    let mut events = server.events(&id, None).await;
    events
        .until(|e| e.event == "status" && e.data["live"] == true)
        .await;
    let (status, body) = server
        .post(
            &format!("/sessions/{id}/notify"),
            r#"{"text": "use the blue pen"}"#,
        )
        .await;
    assert_eq!(status, 202, "{body}");
    let note = events
        .until(|e| e.event == "record" && e.data["record"]["item"]["type"] == "system")
        .await;
    assert!(note.data["record"]["item"]["text"]
        .as_str()
        .unwrap()
        .contains("use the blue pen"));
    events.until(|e| is_record_text(e, "Read your note.")).await;
}

#[tokio::test]
async fn wrong_methods_ids_and_queries_get_json_errors() {
    let env = TestEnv::new();
    let server = Server::start(&env, &writing_script());
    let id = server.create(&env, "Write the notes").await;
    let cases = [
        (reqwest::Method::DELETE, "/sessions".to_string(), 405),
        (reqwest::Method::POST, "/approvals/seven".to_string(), 400),
        (
            reqwest::Method::GET,
            format!("/sessions/{id}/history?after=minus"),
            400,
        ),
        (reqwest::Method::GET, "/no/such/endpoint".to_string(), 404),
    ];
    for (method, path, expected) in cases {
        let response = server
            .request(method.clone(), &path)
            .body("{}")
            .send()
            .await
            .unwrap();
        assert_eq!(response.status().as_u16(), expected, "{method} {path}");
        let body: Value = response.json().await.unwrap_or(Value::Null);
        assert!(
            body["error"].as_str().is_some_and(|e| !e.is_empty()),
            "{method} {path}: {body}"
        );
    }
    // A well-formed answer to a question nobody asks (or one asked before
    // a restart) is a conflict.
    let (status, body) = server
        .post(
            "/approvals/8f9a4cd2-6f55-4b8e-9a51-2b6e1f0d3c77",
            r#"{"decision": "allow_once"}"#,
        )
        .await;
    assert_eq!(status, 409, "{body}");
    assert!(
        body["error"].as_str().unwrap().contains("not waiting"),
        "{body}"
    );
}

/// Regression: an open event stream (a dashboard tab) kept `pod serve`
/// from stopping on SIGTERM.
#[tokio::test]
async fn sigterm_stops_the_server_with_watchers_connected() {
    let env = TestEnv::new();
    let mut server = Server::start(&env, &writing_script());
    let id = server.create(&env, "Write the notes").await;
    let mut watcher = server.events(&id, None).await;
    watcher.until(|e| e.event == "record").await;
    let pid = server.child.id();
    // SAFETY: a plain kill(2) of our own child.
    assert_eq!(unsafe { libc::kill(pid as i32, libc::SIGTERM) }, 0);
    // A hang guard, not a timing assertion.
    let exited = tokio::task::spawn_blocking(move || {
        let start = std::time::Instant::now();
        loop {
            if let Some(status) = server.child.try_wait().unwrap() {
                return Some(status);
            }
            if start.elapsed() > std::time::Duration::from_secs(60) {
                return None;
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    })
    .await
    .unwrap();
    assert!(
        exited.is_some(),
        "pod serve did not stop with a watcher connected"
    );
}

#[tokio::test]
async fn a_watcher_sees_the_answer_stream_as_it_comes() {
    let env = TestEnv::new();
    let streamed = "Streamed in pieces for whoever watches.";
    let script = json!({"steps": [{"text": "First answer."}, {"text": streamed}]});
    let server = Server::start(&env, &script);
    let id = server.create(&env, "Answer twice").await;
    let mut events = server.events(&id, None).await;
    // Subscribed since its first event; the first turn is over.
    events.until(|e| is_record_text(e, "First answer.")).await;
    events
        .until(|e| e.event == "status" && e.data["live"] == false)
        .await;
    let (status, body) = server
        .post(&format!("/sessions/{id}/prompt"), r#"{"text": "Again"}"#)
        .await;
    assert_eq!(status, 202, "{body}");
    let mut pieces = Vec::new();
    let mut recorded = false;
    // Until the record and every piece are in (a piece the server had not
    // yet passed on when it read the record follows it); a lost piece
    // fails the test instead of hanging it.
    let read = async {
        while !(recorded && pieces.concat() == streamed) {
            let event = events.next().await;
            match event.event.as_str() {
                "delta" => {
                    assert_eq!(event.data["kind"], "text", "{:?}", event.data);
                    pieces.push(event.data["text"].as_str().unwrap().to_string());
                }
                "record" if is_record_text(&event, streamed) => recorded = true,
                _ => {}
            }
        }
    };
    if tokio::time::timeout(std::time::Duration::from_secs(60), read)
        .await
        .is_err()
    {
        panic!("not every piece arrived: {pieces:?} (record seen: {recorded})");
    }
    assert!(pieces.len() > 1, "streamed in pieces: {pieces:?}");
    assert_eq!(pieces.concat(), streamed);
}

#[tokio::test]
async fn a_session_created_with_a_budget_stops_at_it() {
    let env = TestEnv::new();
    let server = Server::start(&env, &writing_script());
    // Out of range or unknown budget fields are refused before anything runs.
    for bad in [
        json!({"max_run_requests": 0}),
        json!({"max_requests": 0}),
        json!({"max_tokens": 5}),
    ] {
        let body = json!({"task": "x", "workspace": env.workspace(), "budget": bad});
        let (status, answer) = server.post("/sessions", &body.to_string()).await;
        assert_eq!(status, 400, "{bad}: {answer}");
    }
    let body = json!({
        "task": "Write the notes",
        "workspace": env.workspace(),
        "network": false,
        "budget": {"max_run_requests": 1},
    });
    let (status, created) = server.post("/sessions", &body.to_string()).await;
    assert_eq!(status, 201, "{created}");
    let id = created["session_id"].as_str().unwrap().to_string();
    let mut events = server.events(&id, None).await;
    events
        .until(|e| e.event == "status" && e.data["live"] == false)
        .await;
    let session = server.get(&format!("/sessions/{id}")).await;
    assert_eq!(
        session["session"]["stopped_by"],
        json!({"run_requests": 1}),
        "{session}"
    );
    assert!(
        !env.workspace().join("notes.md").exists(),
        "the write's request was never sent"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_is_queued_for_the_fleet_all_or_none() {
    let pg = pod_testkit::postgres::Postgres::start();
    let env = TestEnv::new();
    let script = env.script("batch.json", &json!({"steps": [{"text": "Done."}]}));
    let mut serve = env.pod_process();
    serve
        .env("POD_STORE", pg.url())
        .args(["--workers", "50", "--yes", "--script"])
        .arg(&script);
    let server = Server::start_with(serve, &env);
    let workspace = env.workspace().canonicalize().unwrap();
    let sessions: Vec<Value> = (0..100)
        .map(|i| json!({"task": format!("task {i}"), "workspace": workspace}))
        .collect();
    let (status, body) = server
        .post(
            "/sessions/batch",
            &json!({ "sessions": sessions }).to_string(),
        )
        .await;
    assert_eq!(status, 202, "{body}");
    let ids: Vec<String> = body["session_ids"]
        .as_array()
        .unwrap()
        .iter()
        .map(|id| id.as_str().unwrap().to_string())
        .collect();
    assert_eq!(ids.len(), 100);
    // The server's fleet worker runs them all: each answers its own task.
    let deadline = std::time::Instant::now() + Duration::from_secs(120);
    for (i, id) in ids.iter().enumerate() {
        loop {
            let row = server.get(&format!("/sessions/{id}")).await;
            if row["session"]["status"] == "done" {
                let history = server.get(&format!("/sessions/{id}/history")).await;
                let text = history.to_string();
                assert!(text.contains(&format!("task {i}")), "{text}");
                break;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "session {i} never finished: {row}"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    // Every record the worker appended went through its group commit:
    // all but each session's header and task (queued by the batch). Read
    // until the two agree: a session's last records may still be on their
    // way when its status reads done.
    let metric = |metrics: &str, name: &str| -> f64 {
        metrics
            .lines()
            .find_map(|line| line.strip_prefix(&format!("{name} ")))
            .and_then(|value| value.parse().ok())
            .unwrap_or_else(|| panic!("no {name} in {metrics}"))
    };
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    loop {
        let mut appended = 0.0;
        for id in &ids {
            let row = server.get(&format!("/sessions/{id}")).await;
            appended += row["records"].as_f64().unwrap() - 1.0;
        }
        let metrics = server.metrics().await;
        let committed = metric(&metrics, "pod_store_committed_records_total");
        let commits = metric(&metrics, "pod_store_commits_total");
        if committed == appended {
            assert!(commits >= 1.0 && commits <= committed, "{metrics}");
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "{committed} records committed, {appended} appended: {metrics}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    // One session asking for more than the server allows queues none.
    let outside = tempfile::tempdir().unwrap();
    let bad = json!({"sessions": [
        {"task": "fine", "workspace": workspace},
        {"task": "outside", "workspace": outside.path()},
    ]});
    let (status, body) = server.post("/sessions/batch", &bad.to_string()).await;
    assert_eq!(status, 403, "{body}");
    assert!(
        body["error"].as_str().unwrap().starts_with("sessions[1]: "),
        "{body}"
    );
    let listed = server.get("/sessions").await;
    assert_eq!(
        listed["sessions"].as_array().unwrap().len(),
        100,
        "nothing more queued"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_needs_a_fleet() {
    let env = TestEnv::new();
    let server = Server::start(&env, &json!({"steps": [{"text": "Done."}]}));
    let (status, body) = server
        .post(
            "/sessions/batch",
            &json!({"sessions": [{"task": "t"}]}).to_string(),
        )
        .await;
    assert_eq!(status, 409, "{body}");
    assert!(
        body["error"].as_str().unwrap().contains("PostgreSQL"),
        "{body}"
    );
}
