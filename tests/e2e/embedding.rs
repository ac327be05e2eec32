//! The embedding example (`examples/embedded.rs`) as a user runs it: a real
//! child process, killed with SIGKILL while the model sits in a slow tool,
//! then resumed. The example's own tool state (an expense ledger) must come
//! back from the log alone, without the call the cap skipped, and the
//! killed call must be answered as interrupted.

use pod::log::{read_log, LogRecord};
use pod::{ItemKind, PodHome};
use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Command, Stdio};

/// The example binary, which Cargo builds before this package's tests.
fn example() -> PathBuf {
    let exe = std::env::current_exe().expect("test binary path");
    // target/<profile>/deps/e2e-<hash> → target/<profile>/examples/embedded
    let path = exe
        .parent()
        .and_then(|deps| deps.parent())
        .map(|profile| profile.join("examples").join("embedded"))
        .expect("target directory");
    assert!(
        path.is_file(),
        "{} is missing: build it with `cargo build -p pod-tests --example embedded`",
        path.display()
    );
    path
}

#[test]
fn the_ledger_survives_sigkill_and_resume() {
    let home = tempfile::tempdir().expect("temp dir");
    let home_arg = home.path().to_str().expect("utf-8 temp path");
    let mut child = Command::new(example())
        .args(["run", home_arg])
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("start the example");
    let stdout = child.stdout.take().expect("piped stdout");
    let mut lines = BufReader::new(stdout).lines();
    let mut before_kill = Vec::new();
    for line in lines.by_ref() {
        let line = line.expect("read a line");
        let waiting = line == "waiting";
        before_kill.push(line);
        if waiting {
            break;
        }
    }
    // SIGKILL: no destructor, no flush, no shutdown runs.
    child.kill().expect("kill the example");
    let status = child.wait().expect("reap the example");
    assert!(!status.success(), "killed, not finished: {before_kill:?}");
    assert_eq!(
        before_kill.last().map(String::as_str),
        Some("waiting"),
        "{before_kill:?}"
    );

    let id = before_kill[0]
        .strip_prefix("session ")
        .unwrap_or_else(|| panic!("first line names the session: {before_kill:?}"))
        .to_string();
    assert_eq!(
        before_kill[1..before_kill.len() - 1],
        [
            "record_expense: Recorded laptop (8000 cents). Ledger total: 8000 cents.",
            "record_expense: Refused by the spending cap: monitor would take the ledger from 8000 \
             to 11000 cents (cap 10000).",
            "record_expense: Recorded cable (500 cents). Ledger total: 8500 cents.",
        ]
    );

    let output = Command::new(example())
        .args(["resume", home_arg, &id])
        .output()
        .expect("run the example's resume");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "resume failed: {stdout}{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(
        lines,
        [
            "resumed",
            // Rebuilt from the log before any prompt: the skipped call is not in it.
            "ledger: laptop 8000",
            "ledger: cable 500",
            "total: 8500",
            "record_expense: Recorded mouse (1000 cents). Ledger total: 9500 cents.",
            "ledger: laptop 8000",
            "ledger: cable 500",
            "ledger: mouse 1000",
            "total: 9500",
        ]
    );

    // The killed call got exactly one result, the interrupted one.
    let log = read_log(&PodHome::new(home.path()).log_path(id.parse().expect("uuid")))
        .expect("read the log");
    let results: Vec<(String, bool)> = log
        .records
        .iter()
        .filter_map(|record| match record {
            LogRecord::Item(item) => match &item.kind {
                ItemKind::ToolResult {
                    content, is_error, ..
                } => Some((content.clone(), *is_error)),
                _ => None,
            },
            _ => None,
        })
        .collect();
    assert_eq!(results.len(), 5, "{results:?}");
    assert!(
        results[3].1 && results[3].0.starts_with("Interrupted"),
        "{results:?}"
    );
}
