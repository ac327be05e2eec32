//! The readback the model sees after each `todo_write`, also used by
//! reminders and front ends.

use super::{TodoItem, TodoStatus};
use std::fmt::Write;

/// Renders a list in the readback form:
///
/// ```text
/// Todo list (1 of 3 completed):
/// [x] inventory: List every test file
/// [>] config: Add the config file
/// [ ] rewrite: Rewrite the mocks
/// ```
pub fn render_todos(todos: &[TodoItem]) -> String {
    if todos.is_empty() {
        return "Todo list is empty.".to_string();
    }
    let done = todos
        .iter()
        .filter(|t| t.status == TodoStatus::Completed)
        .count();
    let mut out = format!("Todo list ({done} of {} completed):", todos.len());
    for todo in todos {
        let marker = match todo.status {
            TodoStatus::Completed => "[x]",
            TodoStatus::InProgress => "[>]",
            TodoStatus::Pending => "[ ]",
        };
        // Writing to a String cannot fail.
        let _ = write!(out, "\n{marker} {}: {}", todo.id, todo.content);
    }
    out
}
