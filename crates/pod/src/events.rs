//! Events a Pod broadcasts to its front ends.

use pod_llm::Usage;
use pod_tools::TodoItem;
use pod_worker::TurnEndReason;
use serde::{Deserialize, Serialize};
use std::sync::{Arc, OnceLock};
use tokio::sync::broadcast;
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
    /// A model request was answered: the tokens its provider reported.
    Usage {
        /// The answer's usage.
        usage: Usage,
    },
    /// The model started writing a tool call (its arguments are still
    /// streaming; `ToolCallStarted` follows when it runs).
    ToolCallStreaming {
        /// The tool.
        name: String,
    },
    /// A turn failed with an error (its caller gets the error too); the
    /// log records it (`ended`, `failed`).
    TurnFailed {
        /// The error and its causes.
        message: String,
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
    /// A tool call was refused before it ran: who refused it and why (its
    /// result, an error saying so, follows as `ToolCallFinished`).
    CallNotRun {
        /// Call id.
        call_id: String,
        /// Tool name.
        name: String,
        /// Raw JSON arguments.
        arguments: String,
        /// What refused it.
        by: NotRunBy,
        /// Why, in words (a hook's reason; the approval's rule).
        reason: String,
    },
    /// The todo list changed (the whole list).
    TodosChanged {
        /// The new list.
        todos: Vec<TodoItem>,
    },
    /// A tool call waits for a person's answer: the question is in the log.
    QuestionAsked {
        /// The question (boxed, like the answer: a subscribed Pod's channel
        /// keeps `event_capacity` slots the size of the largest variant).
        question: Box<crate::log::QuestionRecord>,
    },
    /// A question was answered (and the answer recorded).
    QuestionAnswered {
        /// The answer.
        answer: Box<crate::log::AnswerRecord>,
    },
    /// An operator's hook has something to tell the user: it failed
    /// (and the agent went on, or it blocked), or it printed a
    /// `systemMessage`.
    Hook {
        /// The event it ran at (`PreToolUse`, `Stop`, …).
        hook_event: String,
        /// What to show.
        message: String,
        /// Whether it is about a failure.
        failed: bool,
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
    /// The model ended its turn and the operator's checks start
    /// ([`crate::verify`]).
    VerifyStarted {
        /// Which round since the last prompt.
        round: u32,
        /// How many checks it has.
        checks: usize,
    },
    /// A verification round is over (and recorded): its checks, the
    /// grader's verdict, whether it passed.
    Verified {
        /// The round (boxed: see `QuestionAsked`).
        record: Box<crate::log::VerifyRecord>,
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

/// What refused a tool call before it ran.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum NotRunBy {
    /// An operator's `PreToolUse` hook blocked it.
    Hook,
    /// The approval policy denies the tool.
    Policy,
    /// A person refused it when asked.
    Person,
    /// It needs a person's approval and nobody can give it here (no
    /// terminal, no API, no `--yes`).
    NobodyToAsk,
    /// Nobody answered its question in time.
    Timeout,
}

impl NotRunBy {
    /// What changes it, for a person reading an end line.
    pub fn remedy(self) -> &'static str {
        match self {
            NotRunBy::Hook => "the operator's PreToolUse hook blocked it (see its reason; change the hook or --hooks)",
            NotRunBy::Policy => "the approval policy denies it ([approval.tools] or --deny)",
            NotRunBy::Person => "refused when asked",
            NotRunBy::NobodyToAsk => "nobody could approve it here: allow tools with --yes or --allow TOOL",
            NotRunBy::Timeout => "nobody answered its question in time ([approval] timeout_secs)",
        }
    }
}

/// Where a Pod's events go: a broadcast channel made when the first
/// subscriber asks for it. Until then there is nobody to tell, and an
/// event sent to a channel without receivers is dropped anyway, so waiting
/// changes nothing a subscriber sees (a new receiver only ever sees later
/// events) but saves an idle Pod nobody watches its buffer: `capacity`
/// slots of a [`PodEvent`] each, most of an idle Pod's memory.
#[derive(Clone, Debug)]
pub(crate) struct EventBus {
    channel: Arc<OnceLock<broadcast::Sender<PodEvent>>>,
    capacity: usize,
}

impl EventBus {
    /// A bus whose channel will hold `capacity` events for a slow receiver.
    pub fn new(capacity: usize) -> Self {
        Self {
            channel: Arc::default(),
            capacity: capacity.max(1),
        }
    }

    /// Sends `event` to every current subscriber (none: dropped).
    pub fn send(&self, event: PodEvent) {
        if let Some(channel) = self.channel.get() {
            let _ = channel.send(event);
        }
    }

    /// A receiver of every event sent from now on.
    pub fn subscribe(&self) -> broadcast::Receiver<PodEvent> {
        self.channel
            .get_or_init(|| broadcast::channel(self.capacity).0)
            .subscribe()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn note(text: &str) -> PodEvent {
        PodEvent::NotificationDelivered { text: text.into() }
    }

    #[test]
    fn the_channel_is_made_by_the_first_subscriber_and_shared_by_clones() {
        let bus = EventBus::new(4);
        // Nobody listens: nothing is buffered, nothing is allocated.
        bus.send(note("unheard"));
        assert!(bus.channel.get().is_none());
        let clone = bus.clone();
        let mut first = bus.subscribe();
        let mut second = clone.subscribe();
        clone.send(note("heard"));
        for receiver in [&mut first, &mut second] {
            assert!(matches!(
                receiver.try_recv(),
                Ok(PodEvent::NotificationDelivered { text }) if text == "heard"
            ));
            assert!(receiver.try_recv().is_err());
        }
    }
}
