//! Many watchers of `pod serve --http`'s event streams (issue 31): the
//! watchers of a session share one reader of its log, those of the list one
//! reader of the list, and each still gets what it would alone: every
//! record once and in order, the backlog then live records, a line only
//! once it is whole. A reader ends with its last watcher (`GET /api/server`
//! counts readers and watchers).

use crate::http::{Events, Server, Sse};
use crate::support::*;
use pod::log::{encode_line, LogRecord};
use pod_llm::Item;
use pod_testkit::logs::{self, SessionLog};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};

fn note(n: usize) -> LogRecord {
    LogRecord::Item(Item::user(format!("note {n}")))
}

/// A finished session of one prompt in `env`'s home: its id and log.
fn session(env: &TestEnv) -> (String, PathBuf) {
    let log = SessionLog::new("mock-1", &env.workspace()).prompt("Watch me");
    let path = log.write(&env.pod_home());
    (log.id().to_string(), path)
}

fn start(env: &TestEnv) -> Server {
    Server::start(env, &json!({"steps": []}))
}

/// The record events up to the first `until` event, and that event.
async fn records_until(events: &mut Events, until: impl Fn(&Sse) -> bool) -> (Vec<Sse>, Sse) {
    let mut records = Vec::new();
    loop {
        let event = events.next().await;
        if until(&event) {
            return (records, event);
        }
        if event.event == "record" {
            records.push(event);
        }
    }
}

/// The next `n` record events (other events skipped).
async fn next_records(events: &mut Events, n: usize) -> Vec<Sse> {
    let mut records = Vec::with_capacity(n);
    while records.len() < n {
        let event = events.next().await;
        if event.event == "record" {
            records.push(event);
        }
    }
    records
}

/// Checks `got` are records `first..` of the log, once each, in order:
/// their ids, sequence numbers and contents.
fn assert_records(got: &[Sse], first: usize, want: &[LogRecord]) {
    let seqs: Vec<usize> = got
        .iter()
        .map(|e| e.data["seq"].as_u64().unwrap() as usize)
        .collect();
    let expected: Vec<usize> = (first..first + want.len()).collect();
    assert_eq!(seqs, expected);
    for (event, record) in got.iter().zip(want) {
        assert_eq!(event.id.as_deref(), Some(&*event.data["seq"].to_string()));
        assert_eq!(event.data["record"], serde_json::to_value(record).unwrap());
    }
}

fn is(name: &'static str) -> impl Fn(&Sse) -> bool {
    move |event| event.event == name
}

/// `GET /api/server`'s counts: readers of sessions, of the list; watchers
/// of sessions, of the list.
async fn counts(server: &Server) -> [u64; 4] {
    let body = server.get("/server").await;
    [
        &body["readers"]["sessions"],
        &body["readers"]["list"],
        &body["watchers"]["sessions"],
        &body["watchers"]["list"],
    ]
    .map(|n| n.as_u64().expect("a count"))
}

/// Asks until the counts are `want`: a watcher that leaves reaches the
/// server when its connection closes, which only the server sees.
async fn until_counts(server: &Server, want: [u64; 4]) {
    while counts(server).await != want {
        tokio::task::yield_now().await;
    }
}

#[tokio::test]
async fn two_watchers_of_a_session_share_one_reader_and_each_gets_every_record_once_in_order() {
    let env = TestEnv::new();
    let (id, log) = session(&env);
    let server = start(&env);
    let mut a = server.events(&id, None).await;
    let mut b = server.events(&id, None).await;
    for events in [&mut a, &mut b] {
        let (backlog, _) = records_until(events, is("status")).await;
        assert_eq!(backlog.len(), 1);
        assert_eq!(backlog[0].data["seq"], 1);
    }
    assert_eq!(
        counts(&server).await,
        [1, 0, 2, 0],
        "one reader, two watchers"
    );
    let notes: Vec<LogRecord> = (0..31).map(note).collect();
    let (last, notes) = notes.split_last().unwrap();
    // In bursts: a poll may find one record or many.
    for (n, burst) in notes.chunks(10).enumerate() {
        for record in burst {
            logs::append(&log, record);
        }
        for events in [&mut a, &mut b] {
            let got = next_records(events, burst.len()).await;
            assert_records(&got, 2 + 10 * n, burst);
        }
    }
    assert_eq!(counts(&server).await, [1, 0, 2, 0]);
    drop(a);
    until_counts(&server, [1, 0, 1, 0]).await;
    // The other watcher still gets what follows.
    logs::append(&log, last);
    assert_records(
        &next_records(&mut b, 1).await,
        32,
        std::slice::from_ref(last),
    );
    drop(b);
    until_counts(&server, [0, 0, 0, 0]).await;
    // A watcher after that starts a reader again, from the log.
    let mut c = server.events(&id, Some(31)).await;
    assert_records(
        &next_records(&mut c, 1).await,
        32,
        std::slice::from_ref(last),
    );
    assert_eq!(counts(&server).await, [1, 0, 1, 0]);
}

#[tokio::test]
async fn a_watcher_joining_mid_stream_gets_the_backlog_then_live_records() {
    let env = TestEnv::new();
    let (id, log) = session(&env);
    let server = start(&env);
    let mut first = server.events(&id, None).await;
    records_until(&mut first, is("status")).await;
    let notes: Vec<LogRecord> = (0..10).map(note).collect();
    for record in &notes[..5] {
        logs::append(&log, record);
    }
    assert_records(&next_records(&mut first, 5).await, 2, &notes[..5]);
    // Joins the running reader: the whole backlog from the log, then the
    // plan and the status, then what the reader reads next.
    let mut late = server.events(&id, None).await;
    let mut resumed = server.events(&id, Some(3)).await;
    let (backlog, _) = records_until(&mut late, is("status")).await;
    assert_eq!(backlog[0].data["seq"], 1);
    assert_eq!(backlog[0].data["record"]["item"]["text"], "Watch me");
    assert_records(&backlog[1..], 2, &notes[..5]);
    let (backlog, _) = records_until(&mut resumed, is("status")).await;
    assert_records(&backlog, 4, &notes[2..5]);
    assert_eq!(
        counts(&server).await,
        [1, 0, 3, 0],
        "one reader, three watchers"
    );
    for record in &notes[5..] {
        logs::append(&log, record);
    }
    for events in [&mut first, &mut late, &mut resumed] {
        assert_records(&next_records(events, 5).await, 7, &notes[5..]);
    }
}

/// Appends the first half of `record`'s line; returns the rest.
fn half_line(log: &Path, record: &LogRecord) -> Vec<u8> {
    let line = encode_line(record).unwrap();
    let (head, rest) = line.split_at(line.len() / 2);
    logs::append_bytes(log, head);
    rest.to_vec()
}

#[tokio::test]
async fn a_line_being_written_reaches_watchers_only_once_it_is_whole() {
    let env = TestEnv::new();
    let (id, log) = session(&env);
    // Half a line when the reader starts: not a record yet.
    let notes: Vec<LogRecord> = (0..3).map(note).collect();
    let rest = half_line(&log, &notes[0]);
    let server = start(&env);
    let mut events = server.events(&id, None).await;
    let (backlog, status) = records_until(&mut events, is("status")).await;
    assert_eq!(backlog.len(), 1, "{backlog:?}");
    assert_eq!(status.data["holder"], Value::Null);
    logs::append_bytes(&log, &rest);
    assert_records(&next_records(&mut events, 1).await, 2, &notes[..1]);
    // Half a line while it runs: the poll that sees the session held (its
    // status says so) reads the log with the half line in it.
    let rest = half_line(&log, &notes[1]);
    let _held = logs::hold(&log);
    let (read, status) = records_until(&mut events, |e| {
        e.event == "status" && !e.data["holder"].is_null()
    })
    .await;
    assert!(read.is_empty(), "{read:?}");
    assert!(!status.data["holder"].is_null());
    logs::append_bytes(&log, &rest);
    logs::append(&log, &notes[2]);
    assert_records(&next_records(&mut events, 2).await, 3, &notes[1..]);
}

#[tokio::test]
async fn list_watchers_share_one_reader_and_each_sees_sessions_come_and_go() {
    let env = TestEnv::new();
    let (known, _) = session(&env);
    let server = start(&env);
    let mut a = server.list_events().await;
    let mut b = server.list_events().await;
    for events in [&mut a, &mut b] {
        let row = events.until(is("session")).await;
        assert_eq!(row.data["id"], known);
        events.until(is("ready")).await;
    }
    assert_eq!(
        counts(&server).await,
        [0, 1, 0, 2],
        "one reader, two watchers"
    );
    let (added, log) = session(&env);
    for events in [&mut a, &mut b] {
        let row = events.until(is("session")).await;
        assert_eq!(row.data["id"], added);
    }
    std::fs::remove_dir_all(log.parent().unwrap()).unwrap();
    for events in [&mut a, &mut b] {
        let gone = events.until(is("removed")).await;
        assert_eq!(gone.data["id"], added);
    }
    drop(a);
    drop(b);
    until_counts(&server, [0, 0, 0, 0]).await;
}

/// A stream read over a socket with a small receive buffer, so a client
/// that stops reading holds the server back at once (reqwest's sockets
/// grow their buffers to megabytes): HTTP/1.0, so the body is the events
/// as they are, without chunks.
struct SlowClient {
    socket: tokio::net::TcpStream,
    buffer: Vec<u8>,
}

impl SlowClient {
    async fn connect(server: &Server, path: &str) -> Self {
        use tokio::io::AsyncWriteExt;
        let addr: std::net::SocketAddr = server.base.trim_start_matches("http://").parse().unwrap();
        let socket = tokio::net::TcpSocket::new_v4().unwrap();
        socket.set_recv_buffer_size(4096).unwrap();
        let mut socket = socket.connect(addr).await.unwrap();
        let request = format!(
            "GET /api{path} HTTP/1.0\r\nHost: {addr}\r\nAuthorization: Bearer {}\r\n\r\n",
            server.token.trim()
        );
        socket.write_all(request.as_bytes()).await.unwrap();
        let mut client = Self {
            socket,
            buffer: Vec::new(),
        };
        let head = client.until(b"\r\n\r\n").await;
        let head = String::from_utf8_lossy(&head);
        assert!(
            head.starts_with("HTTP/1.0 200") || head.starts_with("HTTP/1.1 200"),
            "{head}"
        );
        client
    }

    /// The bytes up to and including `end`.
    async fn until(&mut self, end: &[u8]) -> Vec<u8> {
        use tokio::io::AsyncReadExt;
        loop {
            if let Some(at) = self.buffer.windows(end.len()).position(|w| w == end) {
                return self.buffer.drain(..at + end.len()).collect();
            }
            let mut chunk = [0u8; 4096];
            let n = self.socket.read(&mut chunk).await.unwrap();
            assert!(n > 0, "the stream ended");
            self.buffer.extend_from_slice(&chunk[..n]);
        }
    }

    /// The next event's name and data (keep-alive comments skipped).
    async fn next(&mut self) -> (String, Value) {
        loop {
            let block = String::from_utf8(self.until(b"\n\n").await).unwrap();
            let mut name = "message".to_string();
            let mut data = String::new();
            for line in block.lines() {
                if let Some(v) = line.strip_prefix("event: ") {
                    name = v.to_string();
                } else if let Some(v) = line.strip_prefix("data: ") {
                    data.push_str(v);
                }
            }
            if !data.is_empty() {
                return (name, serde_json::from_str(&data).unwrap());
            }
        }
    }
}

#[tokio::test]
async fn a_watcher_too_slow_for_the_shared_reader_catches_up_from_the_log_missing_nothing() {
    let env = TestEnv::new();
    let (id, log) = session(&env);
    let server = start(&env);
    let mut slow = SlowClient::connect(&server, &format!("/sessions/{id}/events")).await;
    while slow.next().await.0 != "status" {}
    let mut fast = server.events(&id, None).await;
    records_until(&mut fast, is("status")).await;
    // Megabytes the slow client does not read, then more records than the
    // reader keeps for a watcher behind (256 frames).
    let big = "x".repeat(512 * 1024);
    let mut notes: Vec<LogRecord> = (0..24)
        .map(|n| LogRecord::Item(Item::user(format!("{n} {big}"))))
        .collect();
    notes.extend((0..300).map(note));
    for record in &notes {
        logs::append(&log, record);
    }
    // The reader has published them all once the fast watcher has them.
    assert_records(&next_records(&mut fast, notes.len()).await, 2, &notes);
    let mut seqs = Vec::new();
    while seqs.len() < notes.len() {
        let (name, data) = slow.next().await;
        if name == "record" {
            let seq = data["seq"].as_u64().unwrap() as usize;
            assert_eq!(
                data["record"],
                serde_json::to_value(&notes[seq - 2]).unwrap()
            );
            seqs.push(seq);
        }
    }
    assert_eq!(seqs, (2..2 + notes.len()).collect::<Vec<_>>());
    let body = server.get("/server").await;
    assert!(body["resynced"].as_u64().unwrap() >= 1, "{body}");
}
