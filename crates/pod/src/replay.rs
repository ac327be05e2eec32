//! Rebuilding a session's state from its log: the history, the todos and
//! the workspace tools' file tracker.
//!
//! Todos are not stored anywhere else: the list is the last `todo_write`
//! call that the tool accepted, decided from the logged result (an error or a
//! skipped call changed nothing) and from the very same validation the tool
//! runs, so arguments from an older schema are ignored.
//!
//! The [`FileTracker`] is rebuilt the same way, from the stamps the file
//! tools attach to successful results (`FileTracker::observe`); a
//! compaction boundary marks every known file "read required", as the live
//! compaction did.

use crate::log::LogRecord;
use pod_llm::{Item, ItemKind};
use pod_tools::{parse_todo_write, FileTracker, TodoItem, TODO_WRITE};
use std::collections::HashMap;

/// The result a resumed session commits for a call that never finished.
pub const INTERRUPTED_RESULT: &str =
    "Interrupted: the session stopped before this tool finished. Its effects are unknown; \
     check the state before you retry.";

/// Follows committed items and reports each accepted `todo_write`.
#[derive(Debug, Default, Clone)]
pub struct TodoTracker {
    // Arguments of todo_write calls whose result has not been seen yet.
    open_calls: HashMap<String, String>,
}

impl TodoTracker {
    /// A tracker that has seen nothing.
    pub fn new() -> Self {
        Self::default()
    }

    /// Observes one committed item; returns the new list when the item is
    /// the successful result of a valid `todo_write` call.
    pub fn observe(&mut self, item: &Item) -> Option<Vec<TodoItem>> {
        self.observe_unparsed(item)
            .and_then(|arguments| parse_todo_write(&arguments).ok())
    }

    /// Like [`observe`](Self::observe) but returns the call's raw arguments
    /// without validating them, so replay can validate only the last ones.
    pub fn observe_unparsed(&mut self, item: &Item) -> Option<String> {
        match &item.kind {
            ItemKind::Assistant { tool_calls, .. } => {
                for call in tool_calls.iter().filter(|c| c.name == TODO_WRITE) {
                    self.open_calls
                        .insert(call.id.clone(), call.arguments.clone());
                }
                None
            }
            ItemKind::ToolResult {
                call_id, is_error, ..
            } => {
                let arguments = self.open_calls.remove(call_id)?;
                (!*is_error).then_some(arguments)
            }
            _ => None,
        }
    }
}

/// State rebuilt from a log.
#[derive(Debug, Default)]
pub struct Replayed {
    /// The active context: every item since the last compaction boundary
    /// (starting with that boundary's summary, tail and carry-over).
    pub history: Vec<Item>,
    /// The todos after the last accepted `todo_write`.
    pub todos: Vec<TodoItem>,
    /// The files the model has read or written, as it knows them.
    pub files: FileTracker,
    /// Results to commit for calls the crash left unanswered, in call order.
    pub interrupted: Vec<Item>,
}

/// Replays records into history and todos.
pub fn replay(records: &[LogRecord]) -> Replayed {
    replay_owned(records.iter().cloned())
}

/// Replays records it owns, moving items into the history instead of
/// copying them (the resume path).
pub fn replay_owned(records: impl IntoIterator<Item = LogRecord>) -> Replayed {
    let records = records.into_iter();
    let mut out = Replayed {
        history: Vec::with_capacity(records.size_hint().0),
        ..Replayed::default()
    };
    let mut tracker = TodoTracker::new();
    // Arguments of todo_write calls with a successful result since the last
    // boundary. Only the last valid one decides the list, so validation runs
    // backwards at the end instead of on every call.
    let mut candidates: Vec<String> = Vec::new();
    for record in records {
        match record {
            LogRecord::Item(item) => {
                if let Some(arguments) = tracker.observe_unparsed(&item) {
                    candidates.push(arguments);
                }
                out.files.observe(&item);
                out.history.push(item);
            }
            LogRecord::Compaction(mut boundary) => {
                // The active context restarts here; no call spans a boundary.
                out.todos = std::mem::take(&mut boundary.todos);
                out.history = boundary.into_context();
                candidates.clear();
                tracker = TodoTracker::new();
                out.files.mark_read_required();
            }
            LogRecord::Header(_) | LogRecord::Stopped(_) => {}
        }
    }
    if let Some(todos) = candidates
        .iter()
        .rev()
        .find_map(|arguments| parse_todo_write(arguments).ok())
    {
        out.todos = todos;
    }
    out.interrupted = unanswered_calls(&out.history)
        .into_iter()
        .map(|id| Item::tool_result(id, INTERRUPTED_RESULT, true))
        .collect();
    out
}

/// The full history for audit and display: every logged item, with each
/// compaction's summary and carry-over items at its boundary (the kept tail
/// is not repeated).
pub fn full_history(records: &[LogRecord]) -> Vec<Item> {
    let mut items = Vec::new();
    for record in records {
        match record {
            LogRecord::Item(item) => items.push(item.clone()),
            LogRecord::Compaction(boundary) => {
                items.push(boundary.summary.clone());
                items.extend(boundary.carry_over.iter().cloned());
            }
            LogRecord::Header(_) | LogRecord::Stopped(_) => {}
        }
    }
    items
}

/// Ids of calls without a result, in call order.
pub fn unanswered_calls(history: &[Item]) -> Vec<String> {
    let mut open: Vec<String> = Vec::new();
    for item in history {
        match &item.kind {
            ItemKind::Assistant { tool_calls, .. } => {
                open.extend(tool_calls.iter().map(|c| c.id.clone()))
            }
            ItemKind::ToolResult { call_id, .. } => open.retain(|id| id != call_id),
            _ => {}
        }
    }
    open
}
