//! The checks run on a session log after every kill.

use crate::ack::{self, Ack};
use crate::oracle::last_accepted_todos;
use pod::log::{parse_log, LogRecord};
use pod::replay::{full_history, replay};
use pod_llm::{validate_history, Item};
use pod_tools::{TodoItem, TodoStatus};
use std::path::Path;

/// What a log looked like after a kill, for the next check.
#[derive(Debug, Clone, Default)]
pub struct LogState {
    /// Records after the header (the verified prefix).
    pub records: Vec<LogRecord>,
    /// The session id in the header.
    pub session_id: Option<String>,
    /// Whether the last line was torn (cut or failing its checksum).
    pub torn_tail: bool,
    /// The replayed todos.
    pub todos: Vec<TodoItem>,
    /// Calls the kill left without a result (resume answers them
    /// "interrupted").
    pub unanswered: usize,
}

impl LogState {
    /// Whether the task is done: a non-empty plan, every item completed.
    pub fn complete(&self) -> bool {
        !self.todos.is_empty() && self.todos.iter().all(|t| t.status == TodoStatus::Completed)
    }

    /// Assistant items in the full history: where a resumed script goes on.
    pub fn assistant_items(&self) -> usize {
        full_history(&self.records)
            .iter()
            .filter(|i| matches!(i.kind, pod_llm::ItemKind::Assistant { .. }))
            .count()
    }
}

/// Reads and checks the log at `path`:
/// 1. it parses (a torn last line is allowed and reported);
/// 2. the replayed active context and the full history are valid once the
///    calls a resume would answer "interrupted" are answered;
/// 3. the previous state's records are a prefix of these (nothing committed
///    earlier was lost or rewritten by a resume);
/// 4. everything the killed process acknowledged is there (see [`ack`]);
/// 5. the replayed todos equal the last accepted `todo_write`, computed
///    independently by [`crate::oracle`].
///
/// Returns the new state, or every violation found.
pub fn check_log(path: &Path, previous: &LogState, acks: &[Ack]) -> Result<LogState, Vec<String>> {
    let bytes = std::fs::read(path).map_err(|e| vec![format!("cannot read the log: {e}")])?;
    let contents =
        parse_log(path, &bytes).map_err(|e| vec![format!("the log does not parse: {e}")])?;
    let mut problems = Vec::new();
    let session_id = contents.header.as_ref().map(|h| h.session_id.to_string());
    if session_id.is_none() {
        problems.push("the log has no header".to_string());
    }
    let records = contents.records;
    let replayed = replay(&records);
    let mut active = replayed.history.clone();
    active.extend(replayed.interrupted.iter().cloned());
    if let Err(err) = validate_history(&active) {
        problems.push(format!("replayed active context is invalid: {err}"));
    }
    let mut full: Vec<Item> = full_history(&records);
    full.extend(replayed.interrupted.iter().cloned());
    if let Err(err) = validate_history(&full) {
        problems.push(format!("full history is invalid: {err}"));
    }
    let base = previous.records.len();
    if records.len() < base || records[..base] != previous.records[..] {
        let same = previous
            .records
            .iter()
            .zip(&records)
            .take_while(|(a, b)| a == b)
            .count();
        problems.push(format!(
            "records committed before this process started were lost or changed: \
             {base} before, {} now, first difference at record {same}",
            records.len()
        ));
    }
    problems.extend(ack::missing(acks, session_id.as_deref(), &records, base));
    let oracle = last_accepted_todos(&records);
    if replayed.todos != oracle {
        problems.push(format!(
            "replayed todos differ from the last accepted todo_write: replay {:?}, oracle {:?}",
            replayed.todos, oracle
        ));
    }
    if !problems.is_empty() {
        return Err(problems);
    }
    Ok(LogState {
        records,
        session_id,
        torn_tail: contents.torn_tail.is_some(),
        todos: replayed.todos,
        unanswered: replayed.interrupted.len(),
    })
}
