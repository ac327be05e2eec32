//! What can stop the server.

/// Why [`serve`](crate::serve) returned with an error.
#[derive(Debug, thiserror::Error)]
pub enum AcpError {
    /// The connection failed (transport IO or a protocol-level failure).
    #[error("ACP connection failed: {0}")]
    Connection(String),
}

impl From<agent_client_protocol::Error> for AcpError {
    fn from(err: agent_client_protocol::Error) -> Self {
        AcpError::Connection(err.to_string())
    }
}
