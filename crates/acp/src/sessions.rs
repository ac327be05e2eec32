//! The open sessions of one connection.

use crate::forward::Control;
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
}

struct Entry {
    session: Session,
    // Cancelled by `session/cancel`; `Some` while a prompt runs.
    turn: Option<CancellationToken>,
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
pub struct Sessions(Arc<Mutex<HashMap<String, Entry>>>);

impl Sessions {
    /// Adds an open session.
    pub fn insert(&self, id: String, session: Session) {
        self.0.lock().insert(
            id,
            Entry {
                session,
                turn: None,
            },
        );
    }

    /// The open session `id`.
    pub fn get(&self, id: &str) -> Option<Session> {
        self.0.lock().get(id).map(|entry| entry.session.clone())
    }

    /// Marks a prompt as running in `id`; the token tells it to cancel.
    pub fn begin_turn(&self, id: &str) -> Result<(Session, CancellationToken), BeginError> {
        let mut map = self.0.lock();
        let entry = map
            .get_mut(id)
            .ok_or_else(|| BeginError::Unknown(id.to_string()))?;
        if entry.turn.is_some() {
            return Err(BeginError::Busy(id.to_string()));
        }
        let token = CancellationToken::new();
        entry.turn = Some(token.clone());
        Ok((entry.session.clone(), token))
    }

    /// The prompt of `id` has ended.
    pub fn end_turn(&self, id: &str) {
        if let Some(entry) = self.0.lock().get_mut(id) {
            entry.turn = None;
        }
    }

    /// Asks the running prompt of `id`, if any, to cancel.
    pub fn cancel(&self, id: &str) {
        if let Some(token) = self.0.lock().get(id).and_then(|e| e.turn.as_ref()) {
            token.cancel();
        }
    }

    /// Removes every session, cancelling running prompts; returns them.
    pub fn drain(&self) -> Vec<Session> {
        self.0
            .lock()
            .drain()
            .map(|(_, entry)| {
                if let Some(token) = entry.turn {
                    token.cancel();
                }
                entry.session
            })
            .collect()
    }
}
