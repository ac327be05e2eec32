//! The HTTP API and dashboard at scale: a store of 1,000 sessions (each
//! with a plan) and one session of 10,000 items, served by a real `pod
//! serve --http` process (the `pod` binary next to this one), read the way
//! the dashboard reads them: the sessions list (first, with the summary
//! cache cold, then warm), the all-sessions event stream's first snapshot,
//! a big session's summary, its last page of history, and its event
//! stream from that page. Then what watchers cost ([`crate::watchers`]).

use crate::support::fmt_duration;
use pod::log::{LogRecord, SessionHeader};
use pod::{Durability, FileStore, Item, PodHome, SessionStore};
use serde_json::{json, Value};
use std::io::BufRead;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

type Error = Box<dyn std::error::Error>;

/// Runs the benchmark and prints its tables (`--watchers`: only the
/// watchers' table).
pub async fn run(quick: bool) -> Result<(), Error> {
    if !std::env::args().any(|a| a == "--watchers") {
        requests(quick).await?;
    }
    crate::watchers::run(quick).await
}

/// The dashboard's requests, timed.
async fn requests(quick: bool) -> Result<(), Error> {
    let (sessions, items) = if quick { (100, 1_000) } else { (1_000, 10_000) };
    let dir = tempfile::tempdir()?;
    let home = PodHome::new(dir.path().join("home"));
    let store = FileStore::new(home.clone());
    for n in 0..sessions {
        write_session(&store, n, 6).await?;
    }
    let big = write_session(&store, sessions, items).await?;
    let server = Server::start(&dir.path().join("home"))?;
    let client = reqwest::Client::new();
    let get = |path: String| {
        let request = client
            .get(format!("{}/api{path}", server.base))
            .bearer_auth(&server.token);
        async move {
            let start = Instant::now();
            let body: Value = request.send().await?.json().await?;
            Ok::<(Duration, Value), Error>((start.elapsed(), body))
        }
    };
    println!("\n### HTTP API: {sessions} sessions, one of {items} items\n");
    println!("| request | time |");
    println!("|---|---|");
    let (cold, list) = get("/sessions".into()).await?;
    let listed = list["sessions"].as_array().map_or(0, Vec::len);
    println!(
        "| GET /api/sessions ({listed} rows), cold cache | {} |",
        fmt_duration(cold)
    );
    let (warm, _) = get("/sessions".into()).await?;
    println!("| GET /api/sessions, warm cache | {} |", fmt_duration(warm));
    let snapshot = stream_until(&client, &server, "/events", "session", listed).await?;
    println!(
        "| GET /api/events until all {listed} `session` events | {} |",
        fmt_duration(snapshot)
    );
    let (one, summary) = get(format!("/sessions/{big}")).await?;
    println!(
        "| GET /api/sessions/BIG (summary, plan, children) | {} |",
        fmt_duration(one)
    );
    let records = summary["records"].as_u64().unwrap_or(0) as usize;
    let after = records.saturating_sub(400);
    let (page, body) = get(format!("/sessions/{big}/history?after={after}&limit=400")).await?;
    let got = body["records"].as_array().map_or(0, Vec::len);
    println!(
        "| GET history, last page ({got} records) | {} |",
        fmt_duration(page)
    );
    let events = stream_until(
        &client,
        &server,
        &format!("/sessions/{big}/events?after={after}"),
        "record",
        records - after,
    )
    .await?;
    println!(
        "| GET /api/sessions/BIG/events from that page until its {} records | {} |",
        records - after,
        fmt_duration(events)
    );
    drop(server);
    Ok(())
}

/// A session with a three-item plan and `items` more items of ~200 bytes.
pub async fn write_session(store: &FileStore, n: usize, items: usize) -> Result<uuid::Uuid, Error> {
    let id = uuid::Uuid::new_v4();
    let header = SessionHeader::new(id, "bench".into(), PathBuf::from("/tmp"));
    let log = store.create(&header, Durability::Never).await?;
    log.append(&LogRecord::Item(Item::user(format!("Task {n}"))), false)
        .await?;
    let plan = json!({"todos": [
        {"id": "a", "content": "First", "status": "completed"},
        {"id": "b", "content": "Second", "status": "in_progress"},
        {"id": "c", "content": "Third", "status": "pending"}
    ]});
    let call = pod_llm::ToolCall {
        id: "plan".into(),
        name: "todo_write".into(),
        arguments: plan.to_string(),
    };
    log.append(
        &LogRecord::Item(Item::new(pod::ItemKind::Assistant {
            text: String::new(),
            reasoning: None,
            tool_calls: vec![call],
            usage: None,
        })),
        false,
    )
    .await?;
    log.append(
        &LogRecord::Item(Item::tool_result("plan", "ok", false)),
        false,
    )
    .await?;
    let text = "x".repeat(200);
    for _ in 0..items {
        log.append(&LogRecord::Item(Item::user(text.clone())), false)
            .await?;
    }
    log.shutdown().await?;
    Ok(id)
}

/// Reads an event stream until `count` events named `name` arrived.
async fn stream_until(
    client: &reqwest::Client,
    server: &Server,
    path: &str,
    name: &str,
    count: usize,
) -> Result<Duration, Error> {
    let start = Instant::now();
    let mut response = client
        .get(format!("{}/api{path}", server.base))
        .bearer_auth(&server.token)
        .send()
        .await?;
    let marker = format!("event: {name}\n");
    let mut seen = 0;
    let mut text = String::new();
    while seen < count {
        let Some(chunk) = response.chunk().await? else {
            return Err("the stream ended early".into());
        };
        text.push_str(&String::from_utf8_lossy(&chunk));
        seen += text.matches(&marker).count();
        // Keep the tail, which may hold half a marker.
        let keep = text.len().saturating_sub(marker.len());
        text = text.split_off(keep);
    }
    Ok(start.elapsed())
}

pub struct Server {
    pub child: Child,
    pub base: String,
    pub token: String,
}

impl Server {
    pub fn start(home: &Path) -> Result<Self, Error> {
        let pod = crate::support::pod_binary()?;
        let script = home.join("empty-script.json");
        std::fs::write(&script, r#"{"steps": []}"#)?;
        let mut child = Command::new(pod)
            .env("POD_HOME", home)
            .args(["serve", "--http", "127.0.0.1:0", "--script"])
            .arg(&script)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()?;
        let stdout = child.stdout.take().ok_or("no stdout")?;
        let mut lines = std::io::BufReader::new(stdout).lines();
        let first = lines.next().ok_or("no banner")??;
        let base = first
            .split("http://")
            .nth(1)
            .and_then(|rest| rest.strip_suffix("/api"))
            .map(|addr| format!("http://{addr}"))
            .ok_or("no address in the banner")?;
        std::thread::spawn(move || for _ in lines {});
        let token = std::fs::read_to_string(home.join("http-token"))?;
        Ok(Self { child, base, token })
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
