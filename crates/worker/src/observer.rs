use pod_llm::{Item, ToolCall, Usage};

/// An observer could not persist an item; the turn stops. Says what kind
/// of failure it was, so the owner of the history knows what to do without
/// looking into the cause, and keeps the cause for people.
#[derive(Debug, thiserror::Error)]
#[error("{}", match .kind {
    PersistKind::Fenced => "could not persist history item: another writer owns the history now",
    PersistKind::Failed => "could not persist history item",
})]
pub struct PersistError {
    kind: PersistKind,
    #[source]
    source: Box<dyn std::error::Error + Send + Sync>,
}

/// What kind of persist failure it was.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PersistKind {
    /// The store fenced this writer off (another took the history over):
    /// nothing more may be written, ever.
    Fenced,
    /// Writing failed (IO, the database); the history in memory may hold an
    /// item the store does not, so it must be rebuilt from the store.
    Failed,
}

impl PersistError {
    /// A failure of `kind`, caused by `source`.
    pub fn new(kind: PersistKind, source: impl std::error::Error + Send + Sync + 'static) -> Self {
        Self {
            kind,
            source: Box::new(source),
        }
    }

    /// What kind of failure it was.
    pub fn kind(&self) -> PersistKind {
        self.kind
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
    /// The model started writing a call of this tool; its arguments are
    /// still streaming.
    CallStreaming {
        /// The tool.
        name: String,
    },
    /// The run was cancelled while the model's answer streamed: what had
    /// arrived of its text is committed as an answer that is not whole,
    /// and the calls it had started are not made.
    AnswerCut {
        /// The committed partial answer (none when no text had arrived).
        partial_answer: Option<uuid::Uuid>,
        /// The tools of the calls that were streaming.
        calls_not_made: Vec<String>,
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
