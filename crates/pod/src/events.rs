//! Events a Pod broadcasts to its front ends.

use pod_llm::Usage;
use pod_tools::TodoItem;
use pod_worker::TurnEndReason;
use serde::{Deserialize, Serialize};
use uuid::Uuid;

/// Something a front end may show. Serializable for `--json` output.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum PodEvent {
    /// A turn began.
    TurnStarted {
        /// The prompt, if the turn has one.
        prompt: Option<String>,
    },
    /// A turn ended.
    TurnEnded {
        /// Why.
        reason: TurnEndReason,
        /// Tokens summed over the turn's requests.
        usage: Usage,
        /// Model requests made.
        requests: u32,
    },
    /// Streamed text.
    TextDelta {
        /// The text.
        text: String,
    },
    /// Streamed reasoning.
    ReasoningDelta {
        /// The text.
        text: String,
    },
    /// A request's stream dropped midway and the request is sent again; text
    /// shown from the failed attempt is void.
    RequestRetried {
        /// Retry number (1 for the first retry).
        attempt: u32,
        /// Why the stream failed.
        error: String,
    },
    /// A tool call starts.
    ToolCallStarted {
        /// Call id.
        call_id: String,
        /// Tool name.
        name: String,
        /// Raw JSON arguments.
        arguments: String,
    },
    /// A tool call finished.
    ToolCallFinished {
        /// Call id.
        call_id: String,
        /// Tool name.
        name: String,
        /// Result text.
        content: String,
        /// Whether it failed.
        is_error: bool,
    },
    /// The todo list changed (the whole list).
    TodosChanged {
        /// The new list.
        todos: Vec<TodoItem>,
    },
    /// A todo reminder was committed.
    ReminderInjected {
        /// Its text.
        text: String,
    },
    /// A notification was committed.
    NotificationDelivered {
        /// Its text.
        text: String,
    },
    /// A compaction began (a summary is being written).
    CompactionStarted,
    /// The history was compacted.
    Compacted {
        /// Estimated tokens before.
        tokens_before: u64,
        /// Estimated tokens after.
        tokens_after: u64,
        /// Length of the summary in characters.
        summary_chars: usize,
    },
    /// A compaction failed; the history is unchanged.
    CompactionFailed {
        /// Why.
        reason: String,
    },
    /// A turn or the Pod hit an error.
    Error {
        /// What went wrong.
        message: String,
    },
    /// An event of a subagent this session's `task` call started (a
    /// grandchild's arrive wrapped twice, the outer tag naming the child).
    Subagent {
        /// The subagent's session.
        session_id: Uuid,
        /// This session's `task` call that runs it.
        call_id: String,
        /// The task's short description.
        description: String,
        /// What happened in the subagent.
        inner: Box<PodEvent>,
    },
}
