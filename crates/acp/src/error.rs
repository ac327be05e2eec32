//! What can stop the server.

/// Why [`serve`](crate::serve) returned with an error.
#[derive(Debug, thiserror::Error)]
pub enum AcpError {
    /// The connection failed (transport IO or a protocol-level failure).
    #[error("ACP connection failed")]
    Connection(#[from] agent_client_protocol::Error),
}
