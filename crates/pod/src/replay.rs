//! Rebuilding a session's state from its log: the active context, and the
//! state of every stateful tool.
//!
//! Tool state is not stored anywhere else: each stateful tool's
//! [`ToolState`] is fed the tool's own logged calls and results, in log
//! order, through the same [`ToolStates`] the live worker uses when it
//! commits a result. The todos are the last `todo_write` call the tool
//! accepted (an error or a skipped call changed nothing), checked by the
//! same validation, so arguments from an older schema are ignored; the
//! [`FileTracker`] records the stamps the file tools attach to successful
//! results. A compaction boundary tells every state (the tracker marks
//! every known file "read required", as the live compaction did).

use crate::log::LogRecord;
use pod_llm::{Item, ItemKind};
use pod_tools::{
    FileTracker, TodoItem, TodoState, TodoStore, EDIT_FILE, READ_FILE, TODO_WRITE, WRITE_FILE,
};
use pod_worker::{ToolState, ToolStates};
use std::sync::Arc;

/// The result a resumed session commits for a call that never finished.
pub const INTERRUPTED_RESULT: &str =
    "Interrupted: the session stopped before this tool finished. Its effects are unknown; \
     check the state before you retry.";

/// The active context rebuilt from a log.
#[derive(Debug, Default)]
pub struct ActiveContext {
    /// Every item since the last compaction boundary (starting with that
    /// boundary's summary, tail and carry-over).
    pub history: Vec<Item>,
    /// Results to commit for calls the crash left unanswered, in call order.
    pub interrupted: Vec<Item>,
}

/// Replays records it owns into the active context, moving items instead of
/// copying them, and rebuilds `states` (cleared first) from the tools'
/// logged calls.
pub fn replay_into(
    records: impl IntoIterator<Item = LogRecord>,
    states: &mut ToolStates,
) -> ActiveContext {
    states.clear();
    // The plan is its last accepted `todo_write`: only that one is checked.
    states.defer_latest();
    let records = records.into_iter();
    let mut history = Vec::with_capacity(records.size_hint().0);
    for record in records {
        match record {
            LogRecord::Item(item) => {
                states.observe(&item);
                history.push(item);
            }
            LogRecord::Compaction(boundary) => {
                // The active context restarts here; no call spans a boundary.
                history = boundary.into_context();
                states.compacted();
            }
            LogRecord::Header(_)
            | LogRecord::Stopped(_)
            | LogRecord::Question(_)
            | LogRecord::Answer(_)
            | LogRecord::Ended(_)
            | LogRecord::Hook(_)
            | LogRecord::Checkpoint(_)
            | LogRecord::Trace(_)
            | LogRecord::Limits(_)
            | LogRecord::Verify(_) => {}
        }
    }
    states.finish_replay();
    let interrupted = unanswered_calls(&history)
        .into_iter()
        .map(|id| Item::tool_result(id, INTERRUPTED_RESULT, true))
        .collect();
    ActiveContext {
        history,
        interrupted,
    }
}

/// A session as a reader sees it: the active context and the state of the
/// Pod's own stateful tools, rebuilt without a Pod.
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

/// Replays records into the history, the todos and the file tracker, through
/// the same [`ToolState`]s a Pod registers.
pub fn replay(records: &[LogRecord]) -> Replayed {
    let todos = TodoStore::new();
    let files = FileTracker::new();
    let mut states = ToolStates::new();
    states.insert(TODO_WRITE, Arc::new(TodoState(todos.clone())));
    let tracker: Arc<dyn ToolState> = Arc::new(files.clone());
    for name in [READ_FILE, WRITE_FILE, EDIT_FILE] {
        states.insert(name, tracker.clone());
    }
    let context = replay_into(records.iter().cloned(), &mut states);
    Replayed {
        history: context.history,
        todos: todos.snapshot(),
        files,
        interrupted: context.interrupted,
    }
}

/// The todos of a log taken record by record, as [`replay`] rebuilds them,
/// without keeping the records: what a watcher of a growing log needs to
/// tell the plan after each new record without replaying the whole log.
pub struct TodoReplay {
    todos: TodoStore,
    states: ToolStates,
}

impl Default for TodoReplay {
    fn default() -> Self {
        let todos = TodoStore::new();
        let mut states = ToolStates::new();
        states.insert(TODO_WRITE, Arc::new(TodoState(todos.clone())));
        Self { todos, states }
    }
}

impl TodoReplay {
    /// Takes the next record of the log into account.
    pub fn observe(&mut self, record: &LogRecord) {
        // As `replay_into` does: items feed the states, a boundary tells them.
        match record {
            LogRecord::Item(item) => self.states.observe(item),
            LogRecord::Compaction(_) => self.states.compacted(),
            LogRecord::Header(_)
            | LogRecord::Stopped(_)
            | LogRecord::Question(_)
            | LogRecord::Answer(_)
            | LogRecord::Ended(_)
            | LogRecord::Hook(_)
            | LogRecord::Checkpoint(_)
            | LogRecord::Trace(_)
            | LogRecord::Limits(_)
            | LogRecord::Verify(_) => {}
        }
    }

    /// The todos after the records observed so far.
    pub fn todos(&self) -> Vec<TodoItem> {
        self.todos.snapshot()
    }
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
            LogRecord::Header(_)
            | LogRecord::Stopped(_)
            | LogRecord::Question(_)
            | LogRecord::Answer(_)
            | LogRecord::Ended(_)
            | LogRecord::Hook(_)
            | LogRecord::Checkpoint(_)
            | LogRecord::Trace(_)
            | LogRecord::Limits(_)
            | LogRecord::Verify(_) => {}
        }
    }
    items
}

/// Ids of calls without a result, in call order.
pub fn unanswered_calls(history: &[Item]) -> Vec<String> {
    // Borrowed while looking: only the few left open are copied (a copy of
    // every call id was an allocation per call on every resume).
    let mut open: Vec<&str> = Vec::new();
    for item in history {
        match &item.kind {
            ItemKind::Assistant { tool_calls, .. } => {
                open.extend(tool_calls.iter().map(|c| c.id.as_str()))
            }
            ItemKind::ToolResult { call_id, .. } => open.retain(|id| id != call_id),
            _ => {}
        }
    }
    open.into_iter().map(str::to_string).collect()
}
