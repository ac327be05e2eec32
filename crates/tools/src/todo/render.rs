//! The readback the model sees after each `todo_write`, also used by
//! reminders and front ends.

use super::{TodoItem, TodoStatus};
use std::fmt::Write;

/// Renders only the unfinished items of a list, with the count of those
/// done, for reminders (the model has the whole list from its last
/// `todo_write`; the finished items only cost tokens here):
///
/// ```text
/// Todo list: 1 of 3 completed; unfinished:
/// [>] config: Add the config file
/// [ ] rewrite: Rewrite the mocks
/// ```
pub fn render_unfinished(todos: &[TodoItem]) -> String {
    let done = todos
        .iter()
        .filter(|t| t.status == TodoStatus::Completed)
        .count();
    let mut out = format!(
        "Todo list: {done} of {} completed; unfinished:",
        todos.len()
    );
    for todo in todos.iter().filter(|t| t.status.is_unfinished()) {
        let marker = match todo.status {
            TodoStatus::InProgress => "[>]",
            _ => "[ ]",
        };
        // Writing to a String cannot fail.
        let _ = write!(out, "\n{marker} {}: {}", todo.id, todo.content);
    }
    out
}

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

#[cfg(test)]
mod unfinished_tests {
    use super::*;

    fn item(id: &str, status: TodoStatus) -> TodoItem {
        TodoItem {
            id: id.into(),
            content: format!("Do {id}"),
            status,
        }
    }

    #[test]
    fn only_unfinished_items_are_named() {
        let todos = [
            item("a", TodoStatus::Completed),
            item("b", TodoStatus::InProgress),
            item("c", TodoStatus::Pending),
        ];
        assert_eq!(
            render_unfinished(&todos),
            "Todo list: 1 of 3 completed; unfinished:\n[>] b: Do b\n[ ] c: Do c"
        );
    }
}
