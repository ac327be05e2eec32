use pod_llm::{Item, ToolCall, Usage};

/// An observer could not persist an item; the turn stops. Keeps the cause
/// (for a Pod, the log's `PodError`), so callers can tell what failed.
#[derive(Debug, thiserror::Error)]
#[error("could not persist history item")]
pub struct PersistError(#[source] pub Box<dyn std::error::Error + Send + Sync>);

impl PersistError {
    /// A failure caused by `source`.
    pub fn new(source: impl std::error::Error + Send + Sync + 'static) -> Self {
        Self(Box::new(source))
    }
}

/// What happens during a turn, for display. Committed items go through
/// [`TurnObserver::on_history_append`] instead.
#[derive(Debug, Clone, PartialEq)]
pub enum WorkerEvent {
    /// A model request is about to be sent (1-based within the turn).
    RequestStarted {
        /// Request number within the turn.
        number: u32,
    },
    /// Streamed visible text.
    TextDelta(String),
    /// Streamed reasoning text.
    ReasoningDelta(String),
    /// A tool call starts executing.
    ToolCallStarted(ToolCall),
    /// A tool call finished and its result is committed.
    ToolCallFinished {
        /// The call.
        call: ToolCall,
        /// The result content.
        content: String,
        /// Whether it failed.
        is_error: bool,
    },
    /// Usage reported for one request.
    Usage(Usage),
    /// A request's stream failed after it started and is sent again; what
    /// was streamed of the failed attempt is void.
    RequestRetried {
        /// Retry number (1 for the first retry).
        attempt: u32,
        /// Why the stream failed.
        error: String,
    },
}

/// Watches a turn. `on_history_append` is awaited before the turn moves on,
/// so an implementation that writes to disk makes each item durable in order.
#[async_trait::async_trait]
pub trait TurnObserver: Send {
    /// An item is being committed to history. An error stops the turn and the
    /// item is not added.
    async fn on_history_append(&mut self, item: &Item) -> Result<(), PersistError>;

    /// Something happened that a front end may show.
    fn on_event(&mut self, _event: WorkerEvent) {}
}

/// An observer that keeps nothing.
#[derive(Debug, Default)]
pub struct NullObserver;

#[async_trait::async_trait]
impl TurnObserver for NullObserver {
    async fn on_history_append(&mut self, _item: &Item) -> Result<(), PersistError> {
        Ok(())
    }
}
