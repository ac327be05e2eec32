//! When to remind the model of its unfinished plan, and what to say.
//!
//! The rule (also in `tickets/todo-reminders.md`):
//! 1. Only while the list has an unfinished (`pending` or `in_progress`) item.
//! 2. At the first request of a turn.
//! 3. Later in a turn, once the model has made `every` requests since the
//!    last `todo_write` call or the last reminder, whichever is later.
//! 4. Never when the last reminder has had no model response yet.

use pod_tools::{render_todos, TodoItem};

/// The reminder cadence; pure state, fed by the Pod's interceptor.
#[derive(Debug, Clone)]
pub struct ReminderCadence {
    every: u32,
    requests_without_todo_write: u32,
    turn_start: bool,
    reminder_unanswered: bool,
}

impl ReminderCadence {
    /// A cadence reminding again after `every` requests without `todo_write`.
    pub fn new(every: u32) -> Self {
        Self {
            every: every.max(1),
            requests_without_todo_write: 0,
            turn_start: false,
            reminder_unanswered: false,
        }
    }

    /// A turn begins. `reminder_unanswered`: the history's last reminder has
    /// no model response after it (for example the previous turn was
    /// cancelled right after it).
    pub fn begin_turn(&mut self, reminder_unanswered: bool) {
        self.turn_start = true;
        self.reminder_unanswered = reminder_unanswered;
    }

    /// The model called `todo_write`.
    pub fn saw_todo_write(&mut self) {
        self.requests_without_todo_write = 0;
    }

    /// Something else just reminded the model (a continuation or a
    /// compaction's carry-over): the count restarts.
    pub fn reminded_now(&mut self) {
        self.requests_without_todo_write = 0;
    }

    /// A request is about to be sent; returns whether to remind first.
    pub fn before_request(&mut self, has_unfinished: bool) -> bool {
        let due = self.turn_start || self.requests_without_todo_write >= self.every;
        let remind = has_unfinished && due && !self.reminder_unanswered;
        if remind {
            self.requests_without_todo_write = 0;
        }
        // Within a turn every later request follows a committed response, so
        // whatever was injected now is answered before the next decision.
        self.turn_start = false;
        self.reminder_unanswered = false;
        self.requests_without_todo_write += 1;
        remind
    }
}

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

#[cfg(test)]
mod tests {
    use super::*;

    /// Simulates requests; `writes` marks the requests whose response calls
    /// todo_write. Returns the indices of reminded requests.
    fn run(every: u32, turn_lengths: &[usize], writes: &[usize]) -> Vec<usize> {
        let mut cadence = ReminderCadence::new(every);
        let mut reminded = Vec::new();
        let mut n = 0;
        for &len in turn_lengths {
            cadence.begin_turn(false);
            for _ in 0..len {
                if cadence.before_request(true) {
                    reminded.push(n);
                }
                if writes.contains(&n) {
                    cadence.saw_todo_write();
                }
                n += 1;
            }
        }
        reminded
    }

    #[test]
    fn reminds_at_turn_start_then_every_n_requests_without_todo_write() {
        assert_eq!(run(5, &[12], &[]), vec![0, 5, 10]);
        assert_eq!(run(5, &[12], &[3]), vec![0, 9]);
        assert_eq!(run(5, &[3, 3], &[]), vec![0, 3]);
    }

    #[test]
    fn nothing_without_unfinished_items_or_next_to_an_unanswered_reminder() {
        let mut cadence = ReminderCadence::new(1);
        cadence.begin_turn(false);
        assert!(!cadence.before_request(false));
        cadence.begin_turn(true);
        assert!(!cadence.before_request(true));
        assert!(cadence.before_request(true));
    }
}
