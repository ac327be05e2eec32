//! The open sessions of one connection.

use crate::control::Control;
use parking_lot::Mutex;
use pod::PodHandle;
use std::collections::HashMap;
use std::sync::Arc;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

/// One open session: its Pod, its forwarder and its running prompt.
#[derive(Clone)]
pub struct Session {
    /// The Pod.
    pub handle: PodHandle,
    /// The session's forwarder.
    pub control: mpsc::Sender<Control>,
    /// The running prompt.
    pub turn: TurnSlot,
    /// The editor's MCP servers for this session (stopped with it).
    pub mcp: std::sync::Arc<pod_mcp::McpServers>,
}

/// The cancellation token of a session's running prompt (`None` between
/// prompts): it marks the session busy, and `session/cancel` cancels it,
/// which cancels the Pod's run (and with it a pending permission question).
#[derive(Clone, Default)]
pub struct TurnSlot(
    // Shared by the session table and the prompt's task; held only to read
    // or swap the token, never across an await.
    Arc<Mutex<Option<CancellationToken>>>,
);

impl TurnSlot {
    /// The running prompt's token, if a prompt runs.
    pub fn current(&self) -> Option<CancellationToken> {
        self.0.lock().clone()
    }
}

/// Why a prompt cannot start.
#[derive(Debug, thiserror::Error)]
pub enum BeginError {
    /// No such session is open.
    #[error("no open session {0}")]
    Unknown(String),
    /// A prompt already runs in it.
    #[error("a prompt is already running in session {0}; cancel it or wait for its answer")]
    Busy(String),
}

/// Open sessions by id. Handlers, prompt tasks and shutdown all reach it;
/// the lock is held only to look up or swap an entry, never across an await.
#[derive(Clone, Default)]
pub struct Sessions(Arc<Mutex<HashMap<String, Session>>>);

impl Sessions {
    /// Adds an open session.
    pub fn insert(&self, id: String, session: Session) {
        self.0.lock().insert(id, session);
    }

    /// The open session `id`.
    pub fn get(&self, id: &str) -> Option<Session> {
        self.0.lock().get(id).cloned()
    }

    /// Marks a prompt as running in `id`; the token tells it to cancel.
    pub fn begin_turn(&self, id: &str) -> Result<(Session, CancellationToken), BeginError> {
        // Lock order: the table, then a slot (the approver takes only the slot).
        let map = self.0.lock();
        let session = map
            .get(id)
            .ok_or_else(|| BeginError::Unknown(id.to_string()))?;
        let mut turn = session.turn.0.lock();
        if turn.is_some() {
            return Err(BeginError::Busy(id.to_string()));
        }
        let token = CancellationToken::new();
        *turn = Some(token.clone());
        drop(turn);
        Ok((session.clone(), token))
    }

    /// The prompt of `id` has ended.
    pub fn end_turn(&self, id: &str) {
        if let Some(session) = self.0.lock().get(id) {
            session.turn.0.lock().take();
        }
    }

    /// Asks the running prompt of `id`, if any, to cancel.
    pub fn cancel(&self, id: &str) {
        if let Some(token) = self.0.lock().get(id).and_then(|s| s.turn.current()) {
            token.cancel();
        }
    }

    /// Removes every session, cancelling running prompts; returns them.
    pub fn drain(&self) -> Vec<Session> {
        self.0
            .lock()
            .drain()
            .map(|(_, session)| {
                if let Some(token) = session.turn.current() {
                    token.cancel();
                }
                session
            })
            .collect()
    }
}
