//! The session plan: [`TodoItem`]s in a shared [`TodoStore`], written whole
//! by the `todo_write` tool.

mod render;
mod tool;
mod validate;

pub use render::{render_progress, render_todos};
pub use tool::{TodoState, TodoWriteTool, TODO_WRITE};
pub use validate::{parse_todo_write, validate_todos, TodoError, MAX_CONTENT_CHARS, MAX_TODOS};

use parking_lot::Mutex;
use serde::{Deserialize, Serialize};
use std::sync::Arc;

/// Where a todo stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TodoStatus {
    /// Not started.
    Pending,
    /// Being worked on (at most one at a time).
    InProgress,
    /// Done.
    Completed,
}

impl TodoStatus {
    /// The wire name (`pending`, `in_progress`, `completed`).
    pub fn as_str(self) -> &'static str {
        match self {
            TodoStatus::Pending => "pending",
            TodoStatus::InProgress => "in_progress",
            TodoStatus::Completed => "completed",
        }
    }

    /// Whether work remains on an item with this status.
    pub fn is_unfinished(self) -> bool {
        !matches!(self, TodoStatus::Completed)
    }
}

/// One item of the plan.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TodoItem {
    /// Model-chosen id, unique in the list; it names the item across writes.
    pub id: String,
    /// What to do.
    pub content: String,
    /// Where it stands.
    pub status: TodoStatus,
}

/// Whether work remains on `todos`: some item is not completed. The one
/// definition every crate uses (until-done, reminders, compaction's
/// carry-over, status, front ends).
pub fn has_unfinished(todos: &[TodoItem]) -> bool {
    todos.iter().any(|t| t.status.is_unfinished())
}

/// How many items the raw arguments of a `todo_write` call hold, for a
/// front end's one-line title of the call (`None` when they do not parse;
/// the tool itself says why to the model).
pub fn items_in_call(arguments: &str) -> Option<usize> {
    let value: serde_json::Value = serde_json::from_str(arguments).ok()?;
    value.get("todos")?.as_array().map(Vec::len)
}

/// The session's plan, shared between the `todo_write` tool, the interceptors
/// that read it and the session owner. In a session its one writer is
/// [`TodoState`], when a `todo_write` result is committed. The lock is held
/// only to copy or swap the list.
#[derive(Clone, Debug, Default)]
pub struct TodoStore(Arc<Mutex<Vec<TodoItem>>>);

impl TodoStore {
    /// An empty store.
    pub fn new() -> Self {
        Self::default()
    }

    /// A copy of the current list.
    pub fn snapshot(&self) -> Vec<TodoItem> {
        self.0.lock().clone()
    }

    /// Whether any item is not completed.
    pub fn has_unfinished(&self) -> bool {
        has_unfinished(&self.0.lock())
    }

    /// Replaces the list, returning the old one. Callers validate first; in
    /// a session only [`TodoState`] calls this.
    pub fn replace(&self, todos: Vec<TodoItem>) -> Vec<TodoItem> {
        std::mem::replace(&mut *self.0.lock(), todos)
    }
}
