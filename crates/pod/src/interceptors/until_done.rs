//! Until-done mode: a turn that ends with unfinished todos is continued
//! with a reminder, until the plan is done or a continuation makes no
//! progress. How often it may continue is the run's budget
//! ([`Budget::continuations`](pod_worker::Budget::continuations)), which the
//! worker enforces.

use crate::reminder::continue_text;
use async_trait::async_trait;
use pod_llm::{Item, SystemKind};
use pod_tools::TodoStore;
use pod_worker::{Interceptor, PostToolAction, RunStart, ToolResultInfo, TurnEndAction};

/// Continues turns while the plan has unfinished items.
pub struct UntilDone {
    todos: TodoStore,
    continued: bool,
    tools_ran_since_continue: bool,
}

impl UntilDone {
    /// Until-done on the plan in `todos`.
    pub fn new(todos: TodoStore) -> Self {
        Self {
            todos,
            continued: false,
            tools_ran_since_continue: false,
        }
    }
}

#[async_trait]
impl Interceptor for UntilDone {
    async fn on_run_start(&mut self, _run: &RunStart<'_>) {
        self.continued = false;
        self.tools_ran_since_continue = false;
    }

    async fn post_tool_call(&mut self, _result: &mut ToolResultInfo) -> PostToolAction {
        self.tools_ran_since_continue = true;
        PostToolAction::Continue
    }

    async fn on_turn_end(&mut self, _turn: &[Item]) -> TurnEndAction {
        let todos = self.todos.snapshot();
        if !pod_tools::has_unfinished(&todos) {
            return TurnEndAction::Finish;
        }
        // A continuation answered without any tool call made no progress: the
        // model is done or blocked, and asking again would loop.
        if self.continued && !self.tools_ran_since_continue {
            return TurnEndAction::Stall;
        }
        self.continued = true;
        self.tools_ran_since_continue = false;
        TurnEndAction::ContinueWithMessages(vec![Item::system(
            SystemKind::Reminder,
            continue_text(&todos),
        )])
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pod_tools::{TodoItem, TodoStatus};

    fn result() -> ToolResultInfo {
        ToolResultInfo {
            call_id: "c".into(),
            name: "x".into(),
            arguments: "{}".into(),
            content: String::new(),
            is_error: false,
            meta: None,
        }
    }

    #[tokio::test]
    async fn continues_while_unfinished_and_stops_when_a_continuation_stalls() {
        let store = TodoStore::new();
        store.replace(vec![TodoItem {
            id: "a".into(),
            content: "A".into(),
            status: TodoStatus::InProgress,
        }]);
        let mut until = UntilDone::new(store.clone());
        assert!(matches!(
            until.on_turn_end(&[]).await,
            TurnEndAction::ContinueWithMessages(_)
        ));
        until.post_tool_call(&mut result()).await;
        assert!(matches!(
            until.on_turn_end(&[]).await,
            TurnEndAction::ContinueWithMessages(_)
        ));
        // No tool call since the last continuation: stalled.
        assert_eq!(until.on_turn_end(&[]).await, TurnEndAction::Stall);

        let cancel = tokio_util::sync::CancellationToken::new();
        until
            .on_run_start(&RunStart {
                history: &[],
                prompt: None,
                cancel: &cancel,
            })
            .await;
        store.replace(Vec::new());
        assert_eq!(until.on_turn_end(&[]).await, TurnEndAction::Finish);
    }
}
