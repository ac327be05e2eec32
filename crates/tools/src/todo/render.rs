//! The readback the model sees after each `todo_write`, also used by
//! reminders and front ends.

use super::{TodoItem, TodoStatus};
use std::fmt::Write;

/// Where the plan stands, in one line, for reminders: the counts, the item
/// in progress (or, when none is, the next one) and nothing else. The model
/// has the whole list in its last `todo_write` result (or in a compaction's
/// carry-over); what it loses over a long stretch of tool calls is where it
/// is, and every reminder stays in every later request, so each word here
/// is paid for again and again.
///
/// ```text
/// Plan: 1 of 3 done, 1 pending. Now: config "Add the config file".
/// ```
pub fn render_progress(todos: &[TodoItem]) -> String {
    let count = |status| todos.iter().filter(|t| t.status == status).count();
    let (done, pending) = (count(TodoStatus::Completed), count(TodoStatus::Pending));
    let mut out = format!("Plan: {done} of {} done, {pending} pending.", todos.len());
    let named = |out: &mut String, label: &str, items: &mut dyn Iterator<Item = &TodoItem>| {
        for (n, todo) in items.enumerate() {
            let sep = if n == 0 { label } else { "," };
            // Writing to a String cannot fail.
            // One line, whatever the content holds.
            let content = todo.content.replace(['\n', '\r'], " ");
            let _ = write!(out, "{sep} {} \"{content}\"", todo.id);
        }
    };
    let mut working = todos
        .iter()
        .filter(|t| t.status == TodoStatus::InProgress)
        .peekable();
    if working.peek().is_some() {
        named(&mut out, " Now:", &mut working);
    } else {
        let mut next = todos
            .iter()
            .filter(|t| t.status == TodoStatus::Pending)
            .take(1);
        named(&mut out, " Next:", &mut next);
    }
    if out.ends_with('"') {
        out.push('.');
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
mod progress_tests {
    use super::*;

    fn item(id: &str, status: TodoStatus) -> TodoItem {
        TodoItem {
            id: id.into(),
            content: format!("Do {id}"),
            status,
        }
    }

    #[test]
    fn the_counts_and_the_item_in_progress_are_named() {
        use TodoStatus::*;
        let todos = [
            item("a", Completed),
            item("b", InProgress),
            item("c", Pending),
        ];
        assert_eq!(
            render_progress(&todos),
            "Plan: 1 of 3 done, 1 pending. Now: b \"Do b\"."
        );
        let two = [
            item("a", InProgress),
            item("b", InProgress),
            item("c", Pending),
        ];
        assert_eq!(
            render_progress(&two),
            "Plan: 0 of 3 done, 1 pending. Now: a \"Do a\", b \"Do b\"."
        );
    }

    #[test]
    fn with_nothing_in_progress_the_next_item_is_named() {
        use TodoStatus::*;
        let todos = [item("a", Completed), item("b", Pending), item("c", Pending)];
        assert_eq!(
            render_progress(&todos),
            "Plan: 1 of 3 done, 2 pending. Next: b \"Do b\"."
        );
        assert_eq!(
            render_progress(&[item("a", Completed)]),
            "Plan: 1 of 1 done, 0 pending."
        );
        let mut multiline = item("m", InProgress);
        multiline.content = "Fix\nthe bug".into();
        assert_eq!(
            render_progress(&[multiline]),
            "Plan: 0 of 1 done, 0 pending. Now: m \"Fix the bug\"."
        );
    }
}
