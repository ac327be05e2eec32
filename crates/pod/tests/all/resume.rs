//! Resume by replay: every crash point, replay rules, corruption.

use crate::support::{todo_args, todo_step, TestPod};
use pod::log::{parse_log, read_appended, LogRecord};
use pod::replay::{replay, INTERRUPTED_RESULT};
use pod::{Durability, Pod, PodError, LOG_FILE};
use pod_llm::{validate_history, Item, ItemKind, ScriptStep, ToolCall};
use pod_tools::{parse_todo_write, TodoItem};
use serde_json::json;
use std::collections::HashMap;
use std::path::Path;

fn list(items: &[(&str, &str, &str)]) -> Vec<TodoItem> {
    parse_todo_write(&todo_args(items).to_string()).expect("valid list")
}

/// A two-turn session with accepted, rejected, malformed and old-schema
/// `todo_write` calls, a parallel call and a notification.
fn recorded_script() -> Vec<ScriptStep> {
    vec![
        todo_step(&[
            ("a", "Write the parser", "pending"),
            ("b", "Test it", "pending"),
        ]),
        todo_step(&[
            ("a", "Write the parser", "in_progress"),
            ("b", "Test it", "in_progress"),
        ]),
        ScriptStep::default().and_raw_call("todo_write", r#"{"todos": [{"id": "a""#),
        ScriptStep::tool_call("echo", json!({"text": "parsed"})).and_call(
            "todo_write",
            todo_args(&[
                ("a", "Write the parser", "completed"),
                ("b", "Test it", "in_progress"),
            ]),
        ),
        ScriptStep::tool_call("todo_write", json!({"items": [{"id": "a"}]})),
        ScriptStep::text("Turn one done."),
        todo_step(&[
            ("a", "Write the parser", "completed"),
            ("b", "Test it", "completed"),
        ]),
        ScriptStep::text("All done."),
    ]
}

/// The accepted calls of `recorded_script`, by call id.
fn accepted_lists() -> HashMap<&'static str, Vec<TodoItem>> {
    HashMap::from([
        (
            "call_0_0",
            list(&[
                ("a", "Write the parser", "pending"),
                ("b", "Test it", "pending"),
            ]),
        ),
        (
            "call_3_1",
            list(&[
                ("a", "Write the parser", "completed"),
                ("b", "Test it", "in_progress"),
            ]),
        ),
        (
            "call_6_0",
            list(&[
                ("a", "Write the parser", "completed"),
                ("b", "Test it", "completed"),
            ]),
        ),
    ])
}

async fn record_session() -> (TestPod, uuid::Uuid, Vec<u8>) {
    let test = TestPod::new(recorded_script());
    let pod = test.spawn().await;
    pod.prompt("Plan and work").await.expect("turn one");
    pod.notify("The user is watching.").await.expect("notify");
    pod.prompt("Finish").await.expect("turn two");
    let id = pod.session_id();
    let todos = pod.get_todos().await.expect("todos");
    assert_eq!(todos, accepted_lists()["call_6_0"]);
    pod.shutdown().await.expect("shutdown");
    let bytes = std::fs::read(test.home().log_path(id)).expect("log");
    (test, id, bytes)
}

/// The items whose whole line (newline included) lies within `cut` bytes.
fn items_within(bytes: &[u8], cut: usize) -> Vec<Item> {
    let mut end = 0;
    let mut items = Vec::new();
    for (n, line) in bytes.split_inclusive(|&b| b == b'\n').enumerate() {
        end += line.len();
        if end > cut || !line.ends_with(b"\n") {
            break;
        }
        if n == 0 {
            continue; // the header
        }
        let value: serde_json::Value = serde_json::from_slice(line).expect("line is JSON");
        let item: Item = serde_json::from_value(value["rec"]["item"].clone()).expect("an item");
        items.push(item);
    }
    items
}

fn expected_todos(items: &[Item]) -> Vec<TodoItem> {
    let accepted = accepted_lists();
    let mut todos = Vec::new();
    for item in items {
        if let ItemKind::ToolResult { call_id, .. } = &item.kind {
            if let Some(list) = accepted.get(call_id.as_str()) {
                todos = list.clone();
            }
        }
    }
    todos
}

fn unanswered(items: &[Item]) -> Vec<String> {
    let calls: Vec<&ToolCall> = items.iter().flat_map(|i| i.tool_calls()).collect();
    calls
        .into_iter()
        .filter(|c| {
            !items.iter().any(
                |i| matches!(&i.kind, ItemKind::ToolResult { call_id, .. } if *call_id == c.id),
            )
        })
        .map(|c| c.id.clone())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resume_after_every_crash_point() {
    let (_recorded, id, bytes) = record_session().await;
    assert!(bytes.len() > 1000, "the session should be sizeable");
    for cut in 0..=bytes.len() {
        let test = TestPod::new(vec![]);
        let mut test = test;
        test.durability = Durability::Never;
        let log = test.home().log_path(id);
        std::fs::create_dir_all(log.parent().expect("dir")).expect("mkdir");
        std::fs::write(&log, &bytes[..cut]).expect("write prefix");

        let pod = Pod::resume(id, test.config())
            .await
            .unwrap_or_else(|e| panic!("resume at byte {cut}: {e}"));
        let history = pod.get_history().await.expect("history");
        let todos = pod.get_todos().await.expect("todos");
        pod.shutdown().await.expect("shutdown");

        let written = items_within(&bytes, cut);
        let open = unanswered(&written);
        assert_eq!(
            history.len(),
            written.len() + open.len(),
            "item count at byte {cut}"
        );
        for (got, want) in history.iter().zip(&written) {
            assert_eq!(got, want, "item differs at byte {cut}");
        }
        for (got, call_id) in history[written.len()..].iter().zip(&open) {
            assert_eq!(
                got.kind,
                ItemKind::ToolResult {
                    call_id: call_id.clone(),
                    content: INTERRUPTED_RESULT.into(),
                    is_error: true,
                    meta: None,
                },
                "interrupted result at byte {cut}"
            );
        }
        validate_history(&history).unwrap_or_else(|e| panic!("history at byte {cut}: {e}"));
        assert_eq!(todos, expected_todos(&written), "todos at byte {cut}");
        // The repaired log reads back cleanly, without a torn tail.
        let repaired = parse_log(&log, &std::fs::read(&log).expect("read")).expect("parse");
        assert!(repaired.torn_tail.is_none(), "torn tail left at byte {cut}");
    }
}

/// A reader following a log as it is written (the file store's
/// `read_since`, what the HTTP server's one reader per watched session
/// uses) gets every record once, in order, and only once its line is
/// whole, however the bytes arrive.
#[tokio::test]
async fn a_log_followed_byte_by_byte_gives_each_record_once_and_only_when_whole() {
    let (recorded, id, bytes) = record_session().await;
    let whole = parse_log(Path::new("log"), &bytes).expect("parse").records;
    let header = bytes
        .iter()
        .position(|&b| b == b'\n')
        .expect("a header line")
        + 1;
    let log = recorded.home().path().join("followed.jsonl");
    std::fs::write(&log, &bytes[..header]).expect("write the header");
    let first = parse_log(&log, &bytes[..header]).expect("header");
    let mut cursor = first.cursor();
    let mut read = Vec::new();
    let mut file = std::fs::OpenOptions::new()
        .append(true)
        .open(&log)
        .expect("open");
    for cut in header..bytes.len() {
        std::io::Write::write_all(&mut file, &bytes[cut..cut + 1]).expect("append a byte");
        let (new, next) = read_appended(&log, cursor)
            .unwrap_or_else(|e| panic!("read after byte {cut} of {id}: {e}"));
        let is_line_end = bytes[cut] == b'\n';
        assert_eq!(new.len(), usize::from(is_line_end), "records at byte {cut}");
        read.extend(new);
        assert_eq!(next.records, read.len(), "records counted at byte {cut}");
        assert_eq!(
            next.bytes,
            if is_line_end {
                cut as u64 + 1
            } else {
                cursor.bytes
            }
        );
        cursor = next;
    }
    assert_eq!(read, whole);
    // Nothing new: nothing read, the cursor stays.
    assert_eq!(
        read_appended(&log, cursor).expect("read"),
        (Vec::new(), cursor)
    );
}

/// A whole line that fails its check is corruption once a line follows
/// it, not a record to skip; and a log shorter than what was read from it
/// is not the log that was read.
#[tokio::test]
async fn a_followed_log_that_is_corrupted_or_cut_is_an_error() {
    let (recorded, _id, bytes) = record_session().await;
    let ends: Vec<usize> = bytes
        .iter()
        .enumerate()
        .filter(|(_, &b)| b == b'\n')
        .map(|(i, _)| i + 1)
        .collect();
    let log = recorded.home().path().join("followed.jsonl");
    std::fs::write(&log, &bytes[..ends[1]]).expect("write two lines");
    let cursor = parse_log(&log, &bytes[..ends[1]]).expect("parse").cursor();
    // The third line with a flipped byte, alone: maybe still being
    // written, left unread.
    let mut flipped = bytes[ends[1]..ends[2]].to_vec();
    flipped[40] ^= 1;
    let mut grown = bytes[..ends[1]].to_vec();
    grown.extend_from_slice(&flipped);
    std::fs::write(&log, &grown).expect("write");
    assert_eq!(
        read_appended(&log, cursor).expect("read"),
        (Vec::new(), cursor)
    );
    // A line after it: corruption, naming the line.
    grown.extend_from_slice(&bytes[ends[2]..ends[3]]);
    std::fs::write(&log, &grown).expect("write");
    let err = read_appended(&log, cursor)
        .expect_err("corrupt")
        .to_string();
    assert!(err.contains(":3: corrupt session log"), "{err}");
    // Cut short of what was read.
    std::fs::write(&log, &bytes[..ends[0]]).expect("write");
    assert!(read_appended(&log, cursor).is_err());
}

#[tokio::test]
async fn resumed_session_continues_where_it_stopped() {
    let (recorded, id, _) = record_session().await;
    let mut test = TestPod::new(vec![ScriptStep::text("Nothing left to do.")]);
    test.dir = recorded.dir;
    let pod = test.resume(id).await;
    let before = pod.get_history().await.expect("history").len();
    pod.prompt("Anything else?").await.expect("turn");
    let requests = test.model.requests();
    // The model sees the whole resumed history plus the new prompt.
    assert_eq!(requests[0].history.len(), before + 1);
    assert_eq!(
        pod.get_todos().await.expect("todos"),
        accepted_lists()["call_6_0"]
    );
    pod.shutdown().await.expect("shutdown");
}

fn assistant(calls: &[(&str, &str, String)]) -> Item {
    Item::new(ItemKind::Assistant {
        text: String::new(),
        reasoning: None,
        tool_calls: calls
            .iter()
            .map(|(id, name, args)| ToolCall {
                id: (*id).into(),
                name: (*name).into(),
                arguments: args.clone(),
            })
            .collect(),
        usage: None,
    })
}

#[test]
fn replay_ignores_rejected_skipped_and_malformed_calls() {
    let good = todo_args(&[("a", "Keep me", "in_progress")]).to_string();
    let other = todo_args(&[("z", "Never accepted", "pending")]).to_string();
    let records: Vec<LogRecord> = vec![
        assistant(&[("c1", "todo_write", good.clone())]),
        Item::tool_result("c1", "Todo list (0 of 1 completed):", false),
        // Skipped or denied by an interceptor: an error result.
        assistant(&[("c2", "todo_write", other.clone())]),
        Item::tool_result(
            "c2",
            "Skipped: denied by policy. The tool did not run.",
            true,
        ),
        // Rejected by validation.
        assistant(&[("c3", "todo_write", other.replace("pending", "done"))]),
        Item::tool_result("c3", "todo_write rejected", true),
        // Not JSON, and an older schema the current validation refuses, both
        // logged with a success result as an older version might have.
        assistant(&[("c4", "todo_write", "{\"todos\": [".into())]),
        Item::tool_result("c4", "ok", false),
        assistant(&[("c5", "todo_write", json!({"todo_list": ["x"]}).to_string())]),
        Item::tool_result("c5", "ok", false),
        // A call of another tool with todo-like arguments changes nothing.
        assistant(&[("c6", "echo", other)]),
        Item::tool_result("c6", "ok", false),
    ]
    .into_iter()
    .map(LogRecord::Item)
    .collect();
    let replayed = replay(&records);
    assert_eq!(replayed.todos, list(&[("a", "Keep me", "in_progress")]));
    assert!(replayed.interrupted.is_empty());
}

#[tokio::test]
async fn corrupt_middle_line_is_an_error_naming_file_and_line() {
    let (test, id, bytes) = record_session().await;
    let log = test.home().log_path(id);
    // Flip one byte inside the third line.
    let third_line_start = bytes
        .iter()
        .enumerate()
        .filter(|(_, &b)| b == b'\n')
        .nth(1)
        .map(|(i, _)| i + 1)
        .expect("three lines");
    let mut damaged = bytes.clone();
    damaged[third_line_start + 40] ^= 0x20;
    std::fs::write(&log, &damaged).expect("write");
    let err = Pod::resume(id, test.config())
        .await
        .expect_err("must refuse");
    match err {
        PodError::CorruptLog { path, line, .. } => {
            assert_eq!(path, log);
            assert_eq!(line, 3);
        }
        other => panic!("unexpected error: {other}"),
    }
    assert!(err_message_names_file(
        &Pod::resume(id, test.config()).await,
        &log
    ));
}

fn err_message_names_file(result: &Result<pod::PodHandle, PodError>, log: &Path) -> bool {
    match result {
        Err(err) => {
            let text = err.to_string();
            text.contains(&log.display().to_string())
                && text.contains(":3:")
                && log.ends_with(LOG_FILE)
        }
        Ok(_) => false,
    }
}

#[tokio::test]
async fn resume_of_a_missing_session_is_a_clear_error() {
    let test = TestPod::new(vec![]);
    let err = Pod::resume(uuid::Uuid::new_v4(), test.config())
        .await
        .expect_err("no such session");
    assert!(matches!(err, PodError::NoSuchSession { .. }), "{err}");
}

#[tokio::test]
async fn a_log_in_another_sessions_directory_is_refused() {
    let (test, id, bytes) = record_session().await;
    let other = uuid::Uuid::new_v4();
    let log = test.home().log_path(other);
    std::fs::create_dir_all(log.parent().expect("dir")).expect("mkdir");
    std::fs::write(&log, &bytes).expect("copy");
    let err = Pod::resume(other, test.config())
        .await
        .expect_err("wrong id");
    match err {
        PodError::CorruptLog { line, reason, .. } => {
            assert_eq!(line, 1);
            assert!(reason.contains(&id.to_string()), "{reason}");
        }
        other => panic!("unexpected error: {other}"),
    }
}
