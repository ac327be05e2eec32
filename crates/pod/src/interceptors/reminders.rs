//! Todo reminders: when the plan has unfinished items, remind the model of
//! it at the start of a run and again after `every` requests in which it
//! did not touch the plan. The rule (also in `tickets/todo-reminders.md`):
//!
//! 1. Only while the list has an unfinished (`pending` or `in_progress`) item.
//! 2. At the first request of a run.
//! 3. Later, once the model has answered `every` requests since the last
//!    `todo_write` call, reminder or compaction carry-over, whichever is
//!    latest.
//! 4. Never when the last reminder has had no model response yet.
//!
//! Everything but rule 2 is read from the committed history, so the
//! interceptor keeps no count that could drift from the log.

use crate::reminder::reminder_text;
use async_trait::async_trait;
use pod_llm::{Item, ItemKind, SystemKind};
use pod_tools::{TodoStore, TODO_WRITE};
use pod_worker::{Interceptor, RunStart};

/// Reminds the model of its unfinished plan.
pub struct Reminders {
    todos: TodoStore,
    every: u32,
    run_start: bool,
}

impl Reminders {
    /// Reminders of `todos`, again after `every` requests without the plan.
    pub fn new(todos: TodoStore, every: u32) -> Self {
        Self {
            todos,
            every: every.max(1),
            run_start: false,
        }
    }
}

#[async_trait]
impl Interceptor for Reminders {
    async fn on_run_start(&mut self, _run: &RunStart<'_>) {
        self.run_start = true;
    }

    async fn pending_history_appends(&mut self, history: &[Item]) -> Vec<Item> {
        let due = std::mem::take(&mut self.run_start) || answered_since_plan(history, self.every);
        if !due || last_reminder_unanswered(history) {
            return Vec::new();
        }
        let todos = self.todos.snapshot();
        if !pod_tools::has_unfinished(&todos) {
            return Vec::new();
        }
        vec![Item::system(SystemKind::Reminder, reminder_text(&todos))]
    }
}

/// Whether the model answered at least `every` requests since it last saw
/// or touched its plan (a `todo_write` call, a reminder, a carry-over).
/// Reads back at most `every` answers.
pub fn answered_since_plan(history: &[Item], every: u32) -> bool {
    let mut answers = 0;
    for item in history.iter().rev() {
        match &item.kind {
            ItemKind::Assistant { tool_calls, .. } => {
                if tool_calls.iter().any(|call| call.name == TODO_WRITE) {
                    return answers >= every;
                }
                answers += 1;
                if answers >= every {
                    return true;
                }
            }
            ItemKind::System {
                kind: SystemKind::Reminder | SystemKind::CarryOver,
                ..
            } => return answers >= every,
            _ => {}
        }
    }
    // Never reminded and never planned: only the run start reminds.
    false
}

/// Whether the history's last reminder has no model response after it.
pub fn last_reminder_unanswered(history: &[Item]) -> bool {
    for item in history.iter().rev() {
        match &item.kind {
            ItemKind::Assistant { .. } => return false,
            ItemKind::System {
                kind: SystemKind::Reminder,
                ..
            } => return true,
            _ => {}
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;
    use pod_llm::ToolCall;
    use pod_tools::{TodoItem, TodoStatus};

    fn answer(calls: &[&str]) -> Item {
        Item::new(ItemKind::Assistant {
            text: String::new(),
            reasoning: None,
            tool_calls: calls
                .iter()
                .enumerate()
                .map(|(i, name)| ToolCall {
                    id: format!("c{i}"),
                    name: (*name).into(),
                    arguments: "{}".into(),
                })
                .collect(),
            usage: None,
        })
    }

    fn unfinished() -> TodoStore {
        let store = TodoStore::new();
        store.replace(vec![TodoItem {
            id: "a".into(),
            content: "A".into(),
            status: TodoStatus::InProgress,
        }]);
        store
    }

    /// Plays `runs` (requests per run) and marks the requests whose answer
    /// calls todo_write; returns the indices of reminded requests.
    async fn play(every: u32, runs: &[usize], writes: &[usize]) -> Vec<usize> {
        let mut reminders = Reminders::new(unfinished(), every);
        let mut history = vec![Item::user("go")];
        let mut reminded = Vec::new();
        let mut n = 0;
        let cancel = tokio_util::sync::CancellationToken::new();
        for &len in runs {
            reminders
                .on_run_start(&RunStart {
                    history: &history,
                    prompt: None,
                    cancel: &cancel,
                })
                .await;
            for _ in 0..len {
                let appended = reminders.pending_history_appends(&history).await;
                if !appended.is_empty() {
                    reminded.push(n);
                }
                history.extend(appended);
                let calls: &[&str] = if writes.contains(&n) {
                    &[TODO_WRITE]
                } else {
                    &["x"]
                };
                history.push(answer(calls));
                n += 1;
            }
        }
        reminded
    }

    #[tokio::test]
    async fn reminds_at_run_start_then_every_n_requests_without_the_plan() {
        assert_eq!(play(5, &[12], &[]).await, vec![0, 5, 10]);
        assert_eq!(play(5, &[12], &[3]).await, vec![0, 9]);
        assert_eq!(play(5, &[3, 3], &[]).await, vec![0, 3]);
    }

    #[tokio::test]
    async fn nothing_without_unfinished_items_or_next_to_an_unanswered_reminder() {
        let cancel = tokio_util::sync::CancellationToken::new();
        let mut done = Reminders::new(TodoStore::new(), 1);
        let history = vec![Item::user("go")];
        let run = RunStart {
            history: &history,
            prompt: None,
            cancel: &cancel,
        };
        done.on_run_start(&run).await;
        assert!(done.pending_history_appends(&history).await.is_empty());

        let mut reminders = Reminders::new(unfinished(), 1);
        let pending = vec![Item::user("go"), Item::system(SystemKind::Reminder, "plan")];
        let run = RunStart {
            history: &pending,
            prompt: None,
            cancel: &cancel,
        };
        reminders.on_run_start(&run).await;
        assert!(reminders.pending_history_appends(&pending).await.is_empty());
        let mut answered = pending.clone();
        answered.push(answer(&["x"]));
        assert_eq!(reminders.pending_history_appends(&answered).await.len(), 1);
    }

    #[test]
    fn a_carry_over_or_continuation_counts_as_seeing_the_plan() {
        let mut history = vec![Item::user("go"), answer(&["x"]), answer(&["x"])];
        assert!(answered_since_plan(&history, 2));
        history.push(Item::system(SystemKind::CarryOver, "plan"));
        assert!(!answered_since_plan(&history, 2));
        history.push(answer(&["x"]));
        history.push(Item::system(SystemKind::Reminder, "continue"));
        history.push(answer(&["x"]));
        assert!(!answered_since_plan(&history, 2));
        history.push(answer(&["x"]));
        assert!(answered_since_plan(&history, 2));
    }
}
