//! Session logs written straight into a `POD_HOME`, for tests that need
//! many sessions in known states without running them (a thousand rows
//! for the dashboard): a header, then records, each line framed and
//! checksummed as the file store writes it
//! (`POD_HOME/sessions/<id>/log.jsonl`).
//!
//! ```no_run
//! # use pod_testkit::logs::SessionLog;
//! # let home = std::path::Path::new("/tmp/pod-home");
//! let log = SessionLog::new("mock-1", "/srv/app".as_ref())
//!     .prompt("Write the notes")
//!     .call("bash", serde_json::json!({"command": "cargo test"}), 1200, 40)
//!     .ask();
//! let path = log.write(home); // a session awaiting approval
//! ```

use pod::approval::ApprovalRequest;
use pod::log::{encode_line, LogRecord, QuestionRecord, SessionHeader, StoppedRecord};
use pod_llm::{Item, ItemKind, SystemKind, ToolCall, Usage};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::time::SystemTime;
use uuid::Uuid;

/// A session log being made.
#[derive(Debug, Clone)]
pub struct SessionLog {
    header: SessionHeader,
    records: Vec<LogRecord>,
    // Calls made so far: the next call's id.
    calls: usize,
    // The last call: what `result` and `ask` answer.
    last_call: Option<ToolCall>,
    updated: Option<SystemTime>,
}

impl SessionLog {
    /// A new session of `model` working in `workspace`.
    pub fn new(model: &str, workspace: &Path) -> Self {
        Self {
            header: SessionHeader::new(Uuid::new_v4(), model.into(), workspace.into()),
            records: Vec::new(),
            calls: 0,
            last_call: None,
            updated: None,
        }
    }

    /// Its id.
    pub fn id(&self) -> Uuid {
        self.header.session_id
    }

    /// How it was started (the header's `launch`: a profile's prices give
    /// the session a cost).
    pub fn launch(mut self, launch: Value) -> Self {
        self.header.launch = pod::log::LaunchJson::of(&launch).ok();
        self
    }

    /// The log's modification time once written: the session's
    /// `updated_at` (else the time it is written).
    pub fn updated(mut self, at: SystemTime) -> Self {
        self.updated = Some(at);
        self
    }

    /// Any record.
    pub fn record(mut self, record: LogRecord) -> Self {
        self.records.push(record);
        self
    }

    /// A prompt.
    pub fn prompt(self, text: &str) -> Self {
        self.record(LogRecord::Item(Item::user(text)))
    }

    /// A runtime message (a reminder, a notification, …).
    pub fn system(self, kind: SystemKind, text: &str) -> Self {
        self.record(LogRecord::Item(Item::system(kind, text)))
    }

    /// A final answer that used `prompt` and `completion` tokens.
    pub fn answer(self, text: &str, prompt: u64, completion: u64) -> Self {
        self.record(LogRecord::Item(assistant(
            text,
            Vec::new(),
            prompt,
            completion,
        )))
    }

    /// A call of `tool` with `arguments`, from an answer that used
    /// `prompt` and `completion` tokens; `result` or `ask` follows.
    pub fn call(mut self, tool: &str, arguments: Value, prompt: u64, completion: u64) -> Self {
        self.calls += 1;
        let call = ToolCall {
            id: format!("call_{}", self.calls),
            name: tool.into(),
            arguments: arguments.to_string(),
        };
        self.last_call = Some(call.clone());
        self.record(LogRecord::Item(assistant(
            "",
            vec![call],
            prompt,
            completion,
        )))
    }

    /// The last call's result.
    pub fn result(self, content: &str, is_error: bool) -> Self {
        let call = self.last_call.clone().expect("a call before its result");
        self.record(LogRecord::Item(Item::tool_result(
            call.id, content, is_error,
        )))
    }

    /// The plan (`todo_write` and its result): `(content, status)` with
    /// statuses `pending`, `in_progress` or `completed`.
    pub fn plan(self, todos: &[(&str, &str)]) -> Self {
        let todos: Vec<Value> = todos
            .iter()
            .enumerate()
            .map(|(i, (content, status))| {
                json!({"id": format!("t{}", i + 1), "content": content, "status": status})
            })
            .collect();
        let done = todos.iter().filter(|t| t["status"] == "completed").count();
        let total = todos.len();
        self.call("todo_write", json!({ "todos": todos }), 900, 60)
            .result(
                &format!("Todo list updated: {done}/{total} completed."),
                false,
            )
    }

    /// A question about the last call, unanswered: the session is parked
    /// awaiting approval.
    pub fn ask(self) -> Self {
        let call = self.last_call.clone().expect("a call to ask about");
        let request = ApprovalRequest::new(&call.id, &call.name, &call.arguments);
        self.record(LogRecord::Question(QuestionRecord {
            id: Uuid::new_v4(),
            request,
            asked_at: chrono::Utc::now(),
            expires_at: None,
        }))
    }

    /// A budget stop: the run ended at `limit`.
    pub fn stopped(self, limit: pod_worker::Limit) -> Self {
        self.record(LogRecord::Stopped(StoppedRecord {
            limit,
            requests: 0,
            tokens: 0,
            at: chrono::Utc::now(),
        }))
    }

    /// A run that did not finish: failed, cancelled or interrupted, with
    /// `reason`.
    pub fn ended(self, how: pod::log::EndedHow, reason: Option<&str>) -> Self {
        self.record(LogRecord::Ended(pod::log::EndedRecord {
            how,
            reason: reason.map(String::from),
            partial_answer: None,
            calls_not_made: Vec::new(),
            at: chrono::Utc::now(),
        }))
    }

    /// Writes the log into `pod_home`'s sessions; returns its path.
    pub fn write(&self, pod_home: &Path) -> PathBuf {
        let dir = pod_home.join("sessions").join(self.id().to_string());
        std::fs::create_dir_all(&dir).expect("session dir");
        let mut bytes = encode_line(&LogRecord::Header(self.header.clone())).expect("header");
        for record in &self.records {
            bytes.extend(encode_line(record).expect("record"));
        }
        let path = dir.join(pod::LOG_FILE);
        std::fs::write(&path, bytes).expect("write the log");
        if let Some(at) = self.updated {
            let file = std::fs::File::options()
                .write(true)
                .open(&path)
                .expect("open the log");
            file.set_modified(at).expect("set its time");
        }
        path
    }
}

/// Damages the log at `path` as a bad disk would: one byte of its third
/// line changes, so its checksum no longer holds.
pub fn damage(path: &Path) {
    damage_line(path, 3);
}

/// Changes one byte of line `line` (1-based, not the first or the last)
/// of the log at `path`, keeping its modification time.
pub fn damage_line(path: &Path, line: usize) {
    let mut bytes = std::fs::read(path).expect("read the log");
    let at = bytes
        .iter()
        .enumerate()
        .filter(|(_, b)| **b == b'\n')
        .nth(line - 2)
        .map(|(at, _)| at + 10)
        .expect("a line that long");
    bytes[at] = if bytes[at] == b'x' { b'y' } else { b'x' };
    let modified = std::fs::metadata(path).and_then(|m| m.modified()).ok();
    std::fs::write(path, bytes).expect("write the log");
    if let Some(at) = modified {
        if let Ok(file) = std::fs::File::options().write(true).open(path) {
            let _ = file.set_modified(at);
        }
    }
}

/// Appends `record` to the log at `path` as a running session's writer
/// does: one whole line.
pub fn append(path: &Path, record: &LogRecord) {
    append_bytes(path, &encode_line(record).expect("a line"));
}

/// Appends `bytes` to the log at `path`: part of a line, as a reader may
/// find a line its writer is still writing.
pub fn append_bytes(path: &Path, bytes: &[u8]) {
    use std::io::Write;
    let mut file = std::fs::File::options()
        .append(true)
        .open(path)
        .expect("open the log");
    file.write_all(bytes).expect("append to the log");
}

/// Holds the log at `path` as a running `pod` process would (its lock):
/// the session is `running` until the file is dropped.
pub fn hold(path: &Path) -> std::fs::File {
    let file = std::fs::File::open(path).expect("open the log");
    file.lock().expect("lock the log");
    file
}

fn assistant(text: &str, tool_calls: Vec<ToolCall>, prompt: u64, completion: u64) -> Item {
    Item::new(ItemKind::Assistant {
        text: text.into(),
        reasoning: None,
        tool_calls,
        usage: Some(Usage {
            prompt_tokens: prompt,
            completion_tokens: completion,
            ..Usage::default()
        }),
    })
}
