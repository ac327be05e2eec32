//! What the runtime says to remind the model of its plan. When it says it
//! is decided by the [`Reminders`](crate::interceptors::Reminders) and
//! [`UntilDone`](crate::interceptors::UntilDone) interceptors.

use pod_tools::{render_progress, render_todos, TodoItem};

/// The reminder text for a list with unfinished items: where the plan
/// stands (see [`render_progress`]; the whole list is in the model's last
/// `todo_write` result, or in a compaction's carry-over, which stays
/// complete) and what to do about it.
pub fn reminder_text(todos: &[TodoItem]) -> String {
    format!(
        "<system-reminder>{} Update it with todo_write.</system-reminder>",
        render_progress(todos)
    )
}

/// The message that continues a turn in until-done mode.
pub fn continue_text(todos: &[TodoItem]) -> String {
    format!(
        "<system-reminder>\nYou ended your turn but your todo list still has unfinished items. \
         Continue with the next one now. If you cannot go on, explain what blocks you and stop \
         without calling tools.\n\n{}\n</system-reminder>",
        render_todos(todos)
    )
}
