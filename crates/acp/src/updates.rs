//! Sending `session/update` notifications for one session.

use agent_client_protocol::v1::schema::{SessionId, SessionNotification, SessionUpdate};
use agent_client_protocol::v1::ConnectionTo;
use agent_client_protocol::Client;

/// The client connection, bound to one session.
#[derive(Clone)]
pub struct Updates {
    connection: ConnectionTo<Client>,
    session_id: SessionId,
}

impl Updates {
    /// Updates of `session_id` over `connection`.
    pub fn new(connection: ConnectionTo<Client>, session_id: SessionId) -> Self {
        Self {
            connection,
            session_id,
        }
    }

    /// The client connection.
    pub fn connection(&self) -> &ConnectionTo<Client> {
        &self.connection
    }

    /// The session the updates belong to.
    pub fn session_id(&self) -> &SessionId {
        &self.session_id
    }

    /// Queues one update. Sending only fails when the connection is closing,
    /// and then nobody is left to show it.
    pub fn send(&self, update: SessionUpdate) {
        let notification = SessionNotification::new(self.session_id.clone(), update);
        if let Err(err) = self.connection.send_notification(notification) {
            tracing::debug!(%err, "session/update not sent: the connection is closing");
        }
    }
}
