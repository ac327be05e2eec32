//! One task per session turns the Pod's events into `session/update`s and
//! answers the session's prompts, so that every update of a turn reaches the
//! client before the turn's answer.

use crate::control::Control;
use crate::permission;
use crate::translate;
use crate::updates::Updates;
use agent_client_protocol::v1::schema::{
    ContentChunk, PromptResponse, SessionUpdate, ToolCallStatus,
};
use pod::{PodEvent, PodHandle};
use std::collections::{HashMap, HashSet, VecDeque};
use tokio::sync::broadcast::error::{RecvError, TryRecvError};
use tokio::sync::{broadcast, mpsc};

/// What the forwarder remembers between events.
struct Forwarder {
    updates: Updates,
    handle: PodHandle,
    // Calls announced with a `tool_call` whose result has not been sent.
    open_calls: HashSet<String>,
    // What each running subagent shows in its `task` call, by call id.
    subagents: HashMap<String, ChildView>,
}

/// A running subagent as its `task` call shows it.
#[derive(Default)]
struct ChildView {
    todos: Vec<pod::TodoItem>,
    // Its last few actions, oldest first.
    recent: VecDeque<String>,
}

/// Actions a subagent's call shows: enough to see it move, few enough to
/// read at a glance (its answer replaces them when it ends).
const RECENT_ACTIONS: usize = 5;

/// Runs until the session's control channel closes (the session was
/// removed and its Pod stopped).
pub async fn run(
    updates: Updates,
    handle: PodHandle,
    mut events: broadcast::Receiver<PodEvent>,
    mut control: mpsc::Receiver<Control>,
) {
    let mut forwarder = Forwarder {
        updates,
        handle,
        open_calls: HashSet::new(),
        subagents: HashMap::new(),
    };
    loop {
        tokio::select! {
            // Events first: a command waits until what came before it is out.
            biased;
            event = events.recv() => match event {
                Ok(event) => forwarder.forward(event),
                Err(RecvError::Lagged(missed)) => forwarder.lagged(missed).await,
                Err(RecvError::Closed) => break,
            },
            command = control.recv() => match command {
                Some(command) => {
                    forwarder.drain(&mut events).await;
                    forwarder.command(command);
                }
                None => break,
            },
        }
    }
    forwarder.drain(&mut events).await;
}

impl Forwarder {
    /// Forwards every event already emitted. Events a Pod emits before it
    /// answers a handle call are in the channel by the time the caller acts
    /// on the answer, so this puts them ahead of what the caller sends next.
    async fn drain(&mut self, events: &mut broadcast::Receiver<PodEvent>) {
        loop {
            match events.try_recv() {
                Ok(event) => self.forward(event),
                Err(TryRecvError::Lagged(missed)) => self.lagged(missed).await,
                Err(TryRecvError::Empty | TryRecvError::Closed) => return,
            }
        }
    }

    fn command(&mut self, command: Control) {
        match command {
            Control::Finish { answer, responder } => {
                let sent = match answer {
                    Ok(reason) => responder.respond(PromptResponse::new(reason)),
                    Err(err) => responder.respond_with_error(err),
                };
                if let Err(err) = sent {
                    tracing::debug!(%err, "prompt answer not sent: the connection is closing");
                }
            }
            Control::Permission(question) => {
                // A subagent's call is not one of this session's calls (its
                // progress shows in the parent's `task` call): it is only
                // in the question.
                if question.request.subagent.is_none() {
                    self.announce(&question.request);
                }
                permission::ask(&self.updates, question);
            }
        }
    }

    /// Shows a call waiting for permission as `pending`; when it starts,
    /// [`Self::call_started`] moves it to `in_progress`.
    fn announce(&mut self, request: &pod::ApprovalRequest) {
        if self.open_calls.insert(request.call_id.clone()) {
            self.updates
                .send(SessionUpdate::ToolCall(translate::tool_call(
                    &request.call_id,
                    &request.tool,
                    &request.arguments,
                    ToolCallStatus::Pending,
                )));
        }
    }

    fn forward(&mut self, event: PodEvent) {
        let update = match event {
            PodEvent::TextDelta { text } => {
                SessionUpdate::AgentMessageChunk(ContentChunk::new(translate::text(&text)))
            }
            PodEvent::ReasoningDelta { text } => {
                SessionUpdate::AgentThoughtChunk(ContentChunk::new(translate::text(&text)))
            }
            PodEvent::ToolCallStarted {
                call_id,
                name,
                arguments,
            } => self.call_started(call_id, &name, &arguments),
            PodEvent::ToolCallFinished {
                call_id,
                name,
                content,
                is_error,
            } => {
                self.subagents.remove(&call_id);
                if !self.open_calls.remove(&call_id) {
                    // It never started (skipped, cancelled): announce it so
                    // the result has a call to update.
                    self.updates
                        .send(SessionUpdate::ToolCall(translate::tool_call(
                            &call_id,
                            &name,
                            "{}",
                            ToolCallStatus::Pending,
                        )));
                }
                SessionUpdate::ToolCallUpdate(translate::tool_result(&call_id, &content, is_error))
            }
            PodEvent::TodosChanged { todos } => SessionUpdate::Plan(translate::plan(&todos)),
            PodEvent::RequestRetried { attempt, error } => {
                // ACP cannot take back streamed text: say that what follows
                // replaces it.
                tracing::warn!(attempt, %error, "model stream retried");
                SessionUpdate::AgentMessageChunk(ContentChunk::new(translate::text(&format!(
                    "\n\n[the model's stream broke ({error}); retrying, the answer starts over]\n\n"
                ))))
            }
            PodEvent::Error { message } | PodEvent::TurnFailed { message } => {
                tracing::warn!(%message, "pod error");
                return;
            }
            PodEvent::Subagent { call_id, inner, .. } => match self.subagent(&call_id, *inner) {
                Some(update) => update,
                None => return,
            },
            other => {
                tracing::trace!(?other, "pod event not shown over ACP");
                return;
            }
        };
        self.updates.send(update);
    }

    /// A call starts running: announce it, or move an already announced
    /// one (it waited for permission) to `in_progress`.
    fn call_started(&mut self, call_id: String, name: &str, arguments: &str) -> SessionUpdate {
        if self.open_calls.contains(&call_id) {
            return SessionUpdate::ToolCallUpdate(translate::tool_status(
                &call_id,
                ToolCallStatus::InProgress,
            ));
        }
        let call = translate::tool_call(&call_id, name, arguments, ToolCallStatus::InProgress);
        self.open_calls.insert(call_id);
        SessionUpdate::ToolCall(call)
    }

    /// A subagent's event: its `task` call (the parent's, however deep the
    /// subagent is) shows the child's plan and latest actions.
    fn subagent(&mut self, call_id: &str, event: PodEvent) -> Option<SessionUpdate> {
        let view = self.subagents.entry(call_id.to_string()).or_default();
        let mut event = event;
        let mut path = Vec::new();
        while let PodEvent::Subagent {
            description, inner, ..
        } = event
        {
            path.push(description);
            event = *inner;
        }
        let action = match event {
            // A grandchild's plan is its own; the call shows the child's.
            PodEvent::TodosChanged { todos } if path.is_empty() => {
                view.todos = todos;
                None
            }
            PodEvent::ToolCallStarted {
                name, arguments, ..
            } if name != pod_tools::TODO_WRITE => Some(format!(
                "→ {}",
                translate::tool_title(&name, &translate::raw_input(&arguments))
            )),
            PodEvent::ToolCallFinished {
                name,
                is_error: true,
                ..
            } => Some(format!("✗ {name} failed")),
            PodEvent::Compacted { .. } => Some("⇣ compacted its context".to_string()),
            _ => return None,
        };
        if let Some(action) = action {
            let who = match path.is_empty() {
                true => String::new(),
                false => format!("[{}] ", path.join(" › ")),
            };
            view.recent.push_back(format!("{who}{action}"));
            if view.recent.len() > RECENT_ACTIONS {
                view.recent.pop_front();
            }
        }
        let recent: Vec<String> = view.recent.iter().cloned().collect();
        Some(SessionUpdate::ToolCallUpdate(translate::subagent_progress(
            call_id,
            &view.todos,
            &recent,
        )))
    }

    /// Some events were lost (the client reads too slowly). Text is gone,
    /// but the plan is state: send it again so the client's copy is right.
    async fn lagged(&mut self, missed: u64) {
        tracing::warn!(missed, "ACP session fell behind its pod's events");
        match self.handle.get_todos().await {
            Ok(todos) => self
                .updates
                .send(SessionUpdate::Plan(translate::plan(&todos))),
            Err(err) => tracing::warn!(%err, "cannot resend the plan"),
        }
    }
}
