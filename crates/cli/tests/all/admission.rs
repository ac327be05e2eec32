//! Admission, not failure: a worker whose open-file limit cannot hold its
//! `--workers` runs as many sessions as the limit serves and leaves the
//! rest queued, and a session whose model connection finds no descriptor
//! anyway goes back to the queue instead of failing. Real `pod serve`
//! children with a lowered `RLIMIT_NOFILE`, a real PostgreSQL, and a
//! loopback model server that answers every session at once (or one
//! speaking HTTP/2, whose streams share a connection).

use crate::fleet::{lines_of, Fleet, PATIENCE};
use crate::support::*;
use pod_testkit::h2server::{Behaviour, H2Server};
use pod_testkit::model::ModelServer;
use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Child, Stdio};
use std::sync::atomic::Ordering;
use std::sync::mpsc;
use std::time::Instant;

/// A profile on the loopback model; one attempt per request, so a
/// connection that finds no descriptor comes back at once (the retries'
/// backoff would only slow the test).
fn configure(fleet: &Fleet, model: &ModelServer, extra: &str) {
    fleet.env.config_file(&format!(
        "checkpoints = false\n{extra}\n[profiles.loop]\nkind = \"openai\"\nbase_url = \"{}\"\n\
         model = \"m\"\napi_key_env = \"LOOP_API_KEY\"\nmax_attempts = 1\n",
        model.base_url()
    ));
}

/// Queues `n` sessions on the loopback profile; returns their ids.
fn submit(fleet: &Fleet, n: usize) -> Vec<String> {
    let tasks = fleet.env.workspace().join("tasks.txt");
    let lines: Vec<String> = (0..n).map(|i| format!("Say done ({i})")).collect();
    std::fs::write(&tasks, lines.join("\n")).unwrap();
    let out = fleet
        .pod()
        .args(["submit", "--yes", "--profile", "loop", "--from"])
        .arg(&tasks)
        .arg("--workspace")
        .arg(fleet.env.workspace())
        .output()
        .unwrap();
    assert_success(&out);
    let ids: Vec<String> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(str::to_string)
        .collect();
    assert_eq!(ids.len(), n, "one id per line");
    ids
}

/// A worker allowed `files` open files with `taken` of them open at its
/// start; its stdout and stderr lines arrive on the receivers.
fn worker(
    fleet: &Fleet,
    files: u64,
    taken: u32,
    args: &[&str],
) -> (Child, mpsc::Receiver<String>, mpsc::Receiver<String>) {
    let mut cmd = fleet.env.pod_process();
    cmd.env("POD_STORE", fleet.pg.url())
        .env("LOOP_API_KEY", "loop")
        .arg("serve")
        .args(args)
        .args(["--db-connections", "2", "--exit-when-idle"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    pod_testkit::limits::open_files(&mut cmd, files, taken);
    let mut child = cmd.spawn().expect("start pod serve");
    let stdout = lines_of(&mut child);
    let stderr = child.stderr.take().unwrap();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                return;
            }
        }
    });
    (child, stdout, rx)
}

/// The first line `lines` delivers that contains `text`, within the guard.
fn line_with(lines: &mpsc::Receiver<String>, text: &str, seen: &mut Vec<String>) -> String {
    let deadline = Instant::now() + PATIENCE;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match lines.recv_timeout(left) {
            Ok(line) if line.contains(text) => return line,
            Ok(line) => seen.push(line),
            Err(_) => panic!("no line with {text:?}; saw {seen:#?}"),
        }
    }
}

/// Waits for `child` to exit successfully, within the guard.
fn wait_exit(child: &mut Child, what: impl Fn() -> String) {
    let deadline = Instant::now() + PATIENCE;
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            assert!(status.success(), "the worker exited with {status}");
            return;
        }
        assert!(
            Instant::now() < deadline,
            "the worker never exited: {}",
            what()
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

/// Every session ended `done`, with the model's answer.
fn check_done(fleet: &Fleet, ids: &[String]) {
    for id in ids {
        let shown = fleet.show(id);
        assert_eq!(shown["session"]["status"], "done", "{shown}");
        let history = shown["history"].as_array().unwrap();
        assert_eq!(history.last().unwrap()["text"], "Done.", "{shown}");
    }
}

/// `GET /metrics` of the API at `addr` (`127.0.0.1:PORT`).
fn scrape(addr: &str, token: &str) -> String {
    let mut socket = std::net::TcpStream::connect(addr).unwrap();
    write!(
        socket,
        "GET /metrics HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {token}\r\n\
         Connection: close\r\n\r\n"
    )
    .unwrap();
    let mut response = String::new();
    socket.read_to_string(&mut response).unwrap();
    assert!(response.starts_with("HTTP/1.1 200"), "{response}");
    response
}

/// The value of the sample whose line starts with `name` (labels included).
fn sample(metrics: &str, name: &str) -> Option<f64> {
    metrics
        .lines()
        .find_map(|line| line.strip_prefix(&format!("{name} ")))
        .and_then(|value| value.trim().parse().ok())
}

#[test]
fn a_worker_with_too_few_files_runs_what_they_serve_and_queues_the_rest() {
    let fleet = Fleet::new();
    // Every answer held until the test lets them go: the requests waiting
    // at the model are the sessions the worker runs at once.
    let model = ModelServer::start("Done.", true);
    // The API's connections (8, and its listener) come off the limit too.
    configure(&fleet, &model, "[http]\nmax_connections = 8");
    let ids = submit(&fleet, 60);
    // 96 files: far fewer than 60 sessions want beside the worker's own.
    let (mut child, stdout, stderr) =
        worker(&fleet, 96, 0, &["--workers", "60", "--http", "127.0.0.1:0"]);
    let mut seen = Vec::new();
    let clamped = line_with(&stderr, "--workers 60 clamped to ", &mut seen);
    let admitted: usize = clamped
        .split("clamped to ")
        .nth(1)
        .and_then(|rest| rest.split(':').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("{clamped}"));
    assert!((1..60).contains(&admitted), "{clamped}");
    assert!(clamped.contains("may open 96 files"), "{clamped}");
    let api = line_with(&stdout, "HTTP API on http://", &mut seen);
    let addr = api
        .split("http://")
        .nth(1)
        .and_then(|rest| rest.strip_suffix("/api"))
        .unwrap()
        .to_string();
    let token_line = line_with(&stdout, "shown only now): ", &mut seen);
    let token = token_line.rsplit(' ').next().unwrap().to_string();

    let deadline = Instant::now() + PATIENCE;
    while model.waiting() < admitted {
        assert!(
            Instant::now() < deadline,
            "{} of {admitted} sessions reached the model",
            model.waiting()
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let metrics = scrape(&addr, &token);
    let running = sample(&metrics, r#"pod_fleet_sessions{state="running"}"#);
    let queued = sample(&metrics, r#"pod_fleet_sessions{state="queued"}"#);
    let capacity = sample(&metrics, "pod_fleet_capacity");
    assert_eq!(running, Some(admitted as f64), "{metrics}");
    assert_eq!(queued, Some((60 - admitted) as f64), "{metrics}");
    assert_eq!(capacity, Some(admitted as f64), "{metrics}");

    model.release();
    wait_exit(&mut child, || format!("{} answered", model.answered()));
    let lines: Vec<String> = stdout.try_iter().collect();
    assert!(
        !lines
            .iter()
            .any(|l| l.starts_with("dropped") || l.contains("queued again")),
        "{lines:#?}"
    );
    assert_eq!(model.answered(), 60);
    assert!(
        model.peak() <= admitted,
        "{} sessions at the model at once, {admitted} admitted",
        model.peak()
    );
    check_done(&fleet, &ids);
}

#[test]
fn a_session_that_finds_no_descriptor_goes_back_to_the_queue() {
    let fleet = Fleet::new();
    // Held: every session it starts waits at the model with its
    // connection open, until the test has seen the files run out.
    let model = ModelServer::start("Done.", true);
    configure(&fleet, &model, "");
    let ids = submit(&fleet, 40);
    // 128 files, 100 of them taken before the worker starts: it reckons
    // with 46 sessions (it runs the 31 asked for), and the files run out
    // long before.
    let (mut child, stdout, _stderr) = worker(&fleet, 128, 100, &["--workers", "31"]);
    let mut seen = Vec::new();
    let narrowed = line_with(&stdout, "runs at most", &mut seen);
    model.release();
    wait_exit(&mut child, || format!("{} answered", model.answered()));
    let lines: Vec<String> = seen.into_iter().chain(stdout.try_iter()).collect();
    assert!(
        lines.iter().any(|l| l.contains("queued again")),
        "{lines:#?}"
    );
    assert!(narrowed.contains("ran out of open files"), "{narrowed}");
    assert_eq!(model.answered(), 40);
    assert!(
        !lines.iter().any(|l| l.starts_with("dropped")),
        "{lines:#?}"
    );
    check_done(&fleet, &ids);
    let sessions: Vec<Value> = fleet
        .pod()
        .args(["sessions", "--json"])
        .output()
        .map(|out| serde_json::from_slice(&out.stdout).unwrap())
        .unwrap();
    assert_eq!(sessions.len(), 40);
}

#[test]
fn sessions_sharing_http2_connections_are_admitted_past_the_reckoning() {
    let fleet = Fleet::new();
    // The model speaks HTTP/2 (prior knowledge) and holds its first 50
    // answers until all 50 are open at once: the worker gets there only
    // by running more sessions than two descriptors each would allow.
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let model = runtime.block_on(H2Server::plain(Behaviour {
        hold_until: Some(50),
        ..Behaviour::default()
    }));
    fleet.env.config_file(&format!(
        "checkpoints = false\n[profiles.loop]\nkind = \"openai\"\nbase_url = \"{}\"\n\
         model = \"m\"\napi_key_env = \"LOOP_API_KEY\"\nmax_attempts = 1\n\
         http2 = \"prior-knowledge\"\n",
        model.base
    ));
    let ids = submit(&fleet, 50);
    // 128 files: 46 sessions at one each after 64 for the process, 2 for
    // its database connections and 16 for its tools; on one shared
    // connection, 61.
    let (mut child, stdout, stderr) = worker(&fleet, 128, 0, &["--workers", "50"]);
    let mut seen = Vec::new();
    let clamped = line_with(&stderr, "--workers 50 clamped to 46:", &mut seen);
    assert!(clamped.contains("shared HTTP/2 connection"), "{clamped}");
    wait_exit(&mut child, || {
        format!(
            "{} answered, {} streams at once",
            model.stats.answered.lock().len(),
            model.stats.most_streams.load(Ordering::SeqCst)
        )
    });
    let lines: Vec<String> = seen.into_iter().chain(stdout.try_iter()).collect();
    assert!(
        !lines
            .iter()
            .any(|l| l.starts_with("dropped") || l.contains("queued again")),
        "{lines:#?}"
    );
    assert_eq!(model.stats.most_streams.load(Ordering::SeqCst), 50);
    assert_eq!(model.connections(), 1);
    for id in &ids {
        let shown = fleet.show(id);
        assert_eq!(shown["session"]["status"], "done", "{shown}");
        let history = shown["history"].as_array().unwrap();
        let answer = history.last().unwrap()["text"].as_str().unwrap_or_default();
        assert!(answer.starts_with("you said Say done ("), "{shown}");
    }
}

#[test]
fn commands_past_the_tools_share_of_files_wait_instead_of_failing() {
    let fleet = Fleet::new();
    configure(&fleet, &ModelServer::start("Done.", false), "");
    // Twenty scripted sessions, each running one command that notes when
    // it starts and ends in a log of the shared workspace.
    let command = "echo start >> runs.log; sleep 0.3; echo end >> runs.log; echo ran";
    let steps = script(vec![
        call("bash", json!({ "command": command })),
        say("Done."),
    ]);
    let path = fleet.env.script("bash.json", &steps);
    let ids: Vec<String> = (0..20)
        .map(|n| {
            let out = fleet
                .pod()
                .args(["submit", "--yes", "--script"])
                .arg(&path)
                .arg(format!("Run it ({n})"))
                .output()
                .unwrap();
            assert_success(&out);
            String::from_utf8(out.stdout).unwrap().trim().to_string()
        })
        .collect();
    // 110 files: 16 for tools (two commands at their peak), and room for
    // all 20 sessions beside them, so nothing but the tools' share holds
    // the commands back. Unheld, 20 commands' pipes would not fit.
    let (mut child, stdout, _stderr) = worker(&fleet, 110, 0, &["--workers", "20"]);
    wait_exit(&mut child, || "commands still running".into());
    let lines: Vec<String> = stdout.try_iter().collect();
    assert!(
        !lines
            .iter()
            .any(|l| l.starts_with("dropped") || l.contains("queued again")),
        "{lines:#?}"
    );
    for id in &ids {
        let shown = fleet.show(id);
        assert_eq!(shown["session"]["status"], "done", "{shown}");
        let result = shown["history"]
            .as_array()
            .unwrap()
            .iter()
            .find(|item| item["type"] == "tool_result")
            .unwrap_or_else(|| panic!("{shown}"));
        assert!(
            result["content"]
                .as_str()
                .unwrap_or_default()
                .contains("ran"),
            "{shown}"
        );
    }
    let runs = std::fs::read_to_string(fleet.env.workspace().join("runs.log")).unwrap();
    let (mut now, mut peak, mut started) = (0, 0, 0);
    for line in runs.lines() {
        if line == "start" {
            now += 1;
            started += 1;
            peak = peak.max(now);
        } else {
            now -= 1;
        }
    }
    assert_eq!(started, 20, "{runs}");
    assert!(peak <= 2, "{peak} commands ran at once: {runs}");
}
