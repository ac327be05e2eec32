//! The provider trait: one request in, one stream of events out.

use crate::item::{Item, Usage};
use futures_util::stream::BoxStream;
use serde::{Deserialize, Serialize};
use std::sync::Arc;
use std::time::Duration;

/// Everything a model needs to produce its next step.
///
/// The history and the tool specs are shared, not copied: a request holds
/// the worker's own history (copy-on-write: an interceptor that edits it gets
/// its own copy, the history stays as it was) and the registry's specs, so
/// building a request costs the same whatever the history's length.
#[derive(Clone, Debug, PartialEq)]
pub struct ProviderRequest {
    /// The system prompt: shared, not copied, by every request of a
    /// session (a prompt with a project's instructions is kilobytes).
    pub system_prompt: Arc<str>,
    /// The conversation so far, oldest first.
    pub history: Arc<Vec<Item>>,
    /// The tools the model may call.
    pub tools: Arc<[ToolSpec]>,
    /// Names the conversation for the provider's prompt cache (a Pod uses
    /// its session id); servers that route by it keep one session's
    /// requests on one cache.
    pub cache_key: Option<Arc<str>>,
    /// Which committed history `history` is, when it is one unedited: the
    /// same id on every request of a history that has only grown since (its
    /// items are never changed, removed or reordered), a new id once the
    /// history is replaced (a compaction, a resume). `None` for a request
    /// an interceptor edited, or one not made of a committed history.
    /// Providers that keep the conversation on the server send only what
    /// follows it when the id matches (see [`HistoryId`]).
    pub history_id: Option<HistoryId>,
}

/// Names one append-only committed history for as long as the process
/// lives: ids are never reused, so a provider may rely on "same id, longer
/// history" meaning "the same items, and more after them".
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct HistoryId(u64);

impl HistoryId {
    /// An id no other history of this process has.
    pub fn fresh() -> Self {
        // A counter, not a random value: unique by construction.
        static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
        Self(NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed))
    }
}

/// A tool as the model sees it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ToolSpec {
    /// Tool name.
    pub name: String,
    /// What the tool does and how to use it.
    pub description: String,
    /// JSON Schema of the arguments object. Shared: a tool whose schema
    /// never changes hands every session the same value (see
    /// `pod_worker::schema!`).
    pub parameters: Arc<serde_json::Value>,
}

/// One event of a streamed response.
///
/// Tool calls are announced by `index` (their position in the response);
/// argument fragments for several calls may interleave.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum StreamEvent {
    /// A piece of visible text.
    TextDelta {
        /// The text.
        text: String,
    },
    /// A piece of reasoning text.
    ReasoningDelta {
        /// The text.
        text: String,
    },
    /// The signature of the reasoning (sent back verbatim on later requests).
    ReasoningSignature {
        /// The opaque signature.
        signature: String,
    },
    /// A tool call begins.
    ToolCallStart {
        /// Position of the call in this response.
        index: usize,
        /// Call id.
        id: String,
        /// Tool name.
        name: String,
    },
    /// A fragment of a call's JSON arguments.
    ToolCallArgs {
        /// Position of the call in this response.
        index: usize,
        /// The fragment, to be concatenated in order.
        fragment: String,
    },
    /// A tool call is complete.
    ToolCallEnd {
        /// Position of the call in this response.
        index: usize,
    },
    /// Token usage of the request.
    Usage {
        /// The usage.
        usage: Usage,
    },
    /// Why the model stopped.
    Finish {
        /// The reason.
        reason: FinishReason,
    },
}

/// Why a model stopped generating.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FinishReason {
    /// The model finished its answer.
    Stop,
    /// The model wants tools to run.
    ToolCalls,
    /// The output token limit was hit.
    Length,
    /// The provider refused or filtered the output.
    Refusal,
    /// A reason this runtime does not know, kept verbatim.
    Other(String),
}

/// A streamed response: events, or an error that ends it.
pub type EventStream = BoxStream<'static, Result<StreamEvent, ProviderError>>;

/// A model behind some API.
///
/// Implementations must not retry behind the caller's back once events have
/// been yielded: an error ends the stream and nothing of it may be kept.
#[async_trait::async_trait]
pub trait Provider: Send + Sync {
    /// Starts a request and returns its event stream.
    async fn stream(&self, request: &ProviderRequest) -> Result<EventStream, ProviderError>;

    /// The model's context window in tokens, when known.
    fn context_window(&self) -> Option<u64> {
        None
    }

    /// A short name for logs and session headers (e.g. the model id).
    fn model_name(&self) -> String;
}

/// Why a provider request failed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ProviderError {
    /// The API answered with an error status.
    #[error("provider returned HTTP {status}: {message}")]
    Http {
        /// HTTP status code.
        status: u16,
        /// The provider's own message.
        message: String,
        /// How long the provider asked us to wait before retrying.
        retry_after: Option<Duration>,
    },
    /// The provider sent an error inside the stream (e.g. `overloaded_error`).
    #[error("provider error {kind}: {message}")]
    Api {
        /// The provider's error type.
        kind: String,
        /// The provider's message.
        message: String,
        /// Whether the same request may succeed later.
        retryable: bool,
    },
    /// The model server could not be reached: no connection was made.
    #[error("cannot reach the model server at {url} ({why})")]
    Unreachable {
        /// The server's base URL, as configured.
        url: String,
        /// Why, in a few words (`connection refused`, the resolver's error).
        why: String,
    },
    /// This process may open no more files (`EMFILE`, or the system's
    /// table is full: `ENFILE`), so no connection was made and nothing was
    /// sent. Not the server's fault and not the request's: it may go
    /// through once other connections close, and a fleet worker gives the
    /// session back to the queue rather than failing it.
    #[error(
        "no connection to the model server at {url}: this process may open no more files ({why})"
    )]
    OutOfFiles {
        /// The server's base URL, as configured.
        url: String,
        /// The system's words (`Too many open files (os error 24)`).
        why: String,
    },
    /// The connection failed or dropped before the response finished.
    #[error("connection failed: {0}")]
    Transport(String),
    /// No bytes arrived for too long.
    #[error("no data from the provider for {0:?}")]
    IdleTimeout(Duration),
    /// The response could not be understood.
    #[error("malformed response: {0}")]
    Malformed(String),
    /// A scripted failure or an exhausted script.
    #[error("scripted provider: {0}")]
    Scripted(String),
}

impl ProviderError {
    /// Whether sending the same request again may succeed.
    pub fn is_retryable(&self) -> bool {
        match self {
            ProviderError::Http { status, .. } => {
                matches!(status, 408 | 409 | 429 | 500..=599)
            }
            ProviderError::Api { retryable, .. } => *retryable,
            ProviderError::Unreachable { .. }
            | ProviderError::OutOfFiles { .. }
            | ProviderError::Transport(_)
            | ProviderError::IdleTimeout(_) => true,
            ProviderError::Malformed(_) | ProviderError::Scripted(_) => false,
        }
    }

    /// A short, fixed name for the kind of failure (a metric's label):
    /// `rate_limited`, `http_4xx`, `http_5xx`, `api`, `unreachable`,
    /// `out_of_files`, `transport`, `idle_timeout`, `malformed` or
    /// `scripted`.
    pub fn kind(&self) -> &'static str {
        match self {
            ProviderError::Http { status: 429, .. } => "rate_limited",
            ProviderError::Http { status, .. } if *status >= 500 => "http_5xx",
            ProviderError::Http { .. } => "http_4xx",
            ProviderError::Api { .. } => "api",
            ProviderError::Unreachable { .. } => "unreachable",
            ProviderError::OutOfFiles { .. } => "out_of_files",
            ProviderError::Transport(_) => "transport",
            ProviderError::IdleTimeout(_) => "idle_timeout",
            ProviderError::Malformed(_) => "malformed",
            ProviderError::Scripted(_) => "scripted",
        }
    }
}
