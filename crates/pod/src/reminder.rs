//! What the runtime says to remind the model of its plan. When it says it
//! is decided by the [`Reminders`](crate::interceptors::Reminders) and
//! [`UntilDone`](crate::interceptors::UntilDone) interceptors.

use pod_tools::{render_todos, TodoItem};

/// The reminder text for a list with unfinished items.
pub fn reminder_text(todos: &[TodoItem]) -> String {
    format!(
        "<system-reminder>\nYour todo list has unfinished items. Keep it current with \
         todo_write: mark the item you are working on in_progress and items completed as soon \
         as they are done. This is a reminder from the runtime, not a message from the user.\n\n\
         {}\n</system-reminder>",
        render_todos(todos)
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
