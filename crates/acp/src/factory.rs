//! How the server starts a session: the front end that owns provider
//! flags, profiles and the launcher starts it (`pod acp` through
//! `pod-launch`, as every front end does), so this crate never parses
//! settings, spawns a Pod or starts an MCP server itself.

use pod::{Approver, PodHandle};
use pod_mcp::{McpServers, ServerConfig};
use std::path::Path;
use std::sync::Arc;
use uuid::Uuid;

/// Why a session could not be started; shown to the client. A
/// [`pod::PodError::NoSuchSession`] (boxed as is) becomes ACP's "resource
/// not found".
pub type FactoryError = Box<dyn std::error::Error + Send + Sync>;

/// What the editor brings to a session it opens.
pub struct Start<'a> {
    /// The client's `cwd`: the session's workspace.
    pub workspace: &'a Path,
    /// The editor's MCP servers (`mcpServers`), to start with the
    /// session's own: their tools ask the editor unless the policy names
    /// them.
    pub servers: Vec<ServerConfig>,
    /// Who answers `ask` tools: the editor.
    pub approver: Arc<dyn Approver>,
    /// Events the session buffers for its forwarder, at least.
    pub event_capacity: usize,
}

/// A session started for the editor.
pub struct Started {
    /// Its Pod.
    pub handle: PodHandle,
    /// Its MCP servers, stopped when the session is dropped.
    pub mcp: McpServers,
    /// Lines for the editor: servers that did not start, settings it
    /// should know about.
    pub warnings: Vec<String>,
}

/// Starts the sessions the server opens.
#[async_trait::async_trait]
pub trait PodFactory: Send + Sync + 'static {
    /// Starts a new session.
    async fn new_session(&self, start: Start<'_>) -> Result<Started, FactoryError>;

    /// Reopens session `id` from its log.
    async fn resume_session(&self, id: Uuid, start: Start<'_>) -> Result<Started, FactoryError>;
}
