//! Notifications: messages sent to a running or idle Pod
//! (`PodHandle::notify`), committed as system items before the next request.

use async_trait::async_trait;
use parking_lot::Mutex;
use pod_llm::{Item, SystemKind};
use pod_worker::Interceptor;
use std::collections::VecDeque;
use std::sync::Arc;

/// The queue between the Pod (which adds) and the interceptor (which
/// delivers). Shared, so that notifications outlive a rebuild of the
/// interceptors after a crashed turn. Locked only to push or drain, never
/// across an await; unbounded because `notify` must not block and each
/// message is small and user-initiated.
#[derive(Clone, Default)]
pub struct NotificationQueue(Arc<Mutex<VecDeque<String>>>);

impl NotificationQueue {
    /// Queues `text` for the next request.
    pub fn push(&self, text: String) {
        self.0.lock().push_back(text);
    }

    fn drain(&self) -> Vec<String> {
        self.0.lock().drain(..).collect()
    }
}

/// Delivers queued notifications.
pub struct Notifications {
    queue: NotificationQueue,
}

impl Notifications {
    /// Delivers what `queue` holds.
    pub fn new(queue: NotificationQueue) -> Self {
        Self { queue }
    }
}

#[async_trait]
impl Interceptor for Notifications {
    async fn pending_history_appends(&mut self, _history: &[Item]) -> Vec<Item> {
        self.queue
            .drain()
            .into_iter()
            .map(|text| Item::system(SystemKind::Notification, text))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn delivers_each_notification_once_in_order() {
        let queue = NotificationQueue::default();
        let mut notifications = Notifications::new(queue.clone());
        queue.push("one".into());
        queue.push("two".into());
        let items = notifications.pending_history_appends(&[]).await;
        let texts: Vec<_> = items
            .iter()
            .map(|item| match &item.kind {
                pod_llm::ItemKind::System { text, kind } => {
                    assert_eq!(*kind, SystemKind::Notification);
                    text.clone()
                }
                other => panic!("{other:?}"),
            })
            .collect();
        assert_eq!(texts, ["one", "two"]);
        assert!(notifications.pending_history_appends(&[]).await.is_empty());
    }
}
