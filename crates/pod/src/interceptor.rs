//! The Pod's interceptor: todo reminders and notifications, both committed
//! through `pending_history_appends`.

use crate::reminder::{reminder_text, ReminderCadence};
use pod_llm::{Item, SystemKind};
use pod_tools::{TodoStore, TODO_WRITE};
use pod_worker::{Interceptor, PostToolAction, ToolResultInfo};
use tokio::sync::mpsc;

/// Steers the Pod's turns.
pub struct PodInterceptor {
    todos: TodoStore,
    cadence: ReminderCadence,
    // Notifications sent while a turn runs or while the Pod is idle wait here
    // until the next request; unbounded because `notify` must not block and
    // each message is small and user-initiated.
    notifications: mpsc::UnboundedReceiver<String>,
}

impl PodInterceptor {
    /// An interceptor reminding every `remind_every` requests.
    pub fn new(
        todos: TodoStore,
        remind_every: u32,
        notifications: mpsc::UnboundedReceiver<String>,
    ) -> Self {
        Self {
            todos,
            cadence: ReminderCadence::new(remind_every),
            notifications,
        }
    }

    /// A turn begins; see [`ReminderCadence::begin_turn`].
    pub fn begin_turn(&mut self, reminder_unanswered: bool) {
        self.cadence.begin_turn(reminder_unanswered);
    }
}

#[async_trait::async_trait]
impl Interceptor for PodInterceptor {
    async fn pending_history_appends(&mut self) -> Vec<Item> {
        let mut items = Vec::new();
        while let Ok(text) = self.notifications.try_recv() {
            items.push(Item::system(SystemKind::Notification, text));
        }
        let todos = self.todos.snapshot();
        let unfinished = todos.iter().any(|t| t.status.is_unfinished());
        if self.cadence.before_request(unfinished) {
            items.push(Item::system(SystemKind::Reminder, reminder_text(&todos)));
        }
        items
    }

    async fn post_tool_call(&mut self, result: &mut ToolResultInfo) -> PostToolAction {
        if result.name == TODO_WRITE {
            self.cadence.saw_todo_write();
        }
        PostToolAction::Continue
    }
}
