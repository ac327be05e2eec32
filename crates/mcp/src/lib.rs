//! Model Context Protocol servers as pod tools.
//!
//! [`McpServers::start`] starts every configured server at once (each with
//! its own timeout); a server that fails to start is reported and left out,
//! the others go on. Each server's tools become pod tools named
//! `SERVER__TOOL` ([`names`]), their results text the model can read
//! ([`content`]). A server that dies during a call gives that call an error
//! result and is restarted for the next ([`client::MAX_RESTARTS`] times per
//! session); a call that hangs is cancelled at its timeout or with the turn.
//! Servers are stopped by [`McpServers::shutdown`], and killed when their
//! last tool is dropped; a server started over stdio also exits when pod
//! dies, on the end of its input.
#![deny(missing_docs)]

pub mod client;
pub mod config;
pub mod content;
pub mod http;
pub mod names;
mod tool;

pub use client::{CallError, Connection, McpError};
pub use config::{read_mcp_json, RecordedServer, ServerConfig, Transport};
pub use tool::{normalise_schema, McpTool};

use pod_worker::ToolRegistry;
use std::collections::HashSet;
use std::path::Path;
use std::sync::Arc;

/// The started servers of one session.
#[derive(Default)]
pub struct McpServers {
    connections: Vec<Arc<Connection>>,
    tools: Vec<McpTool>,
}

impl std::fmt::Debug for McpServers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpServers")
            .field("servers", &self.connections)
            .field("tools", &self.tools.len())
            .finish()
    }
}

impl McpServers {
    /// Starts `configs` in parallel in `workspace`. Returns the servers that
    /// started and an error for each that did not. Tool names avoid those
    /// in `taken` (the session's other tools).
    pub async fn start(
        configs: Vec<ServerConfig>,
        workspace: &Path,
        taken: &[String],
    ) -> (Self, Vec<McpError>) {
        let started = start_all(configs, workspace).await;
        let mut servers = Self::default();
        let mut failures = Vec::new();
        let mut names: HashSet<String> = taken.iter().cloned().collect();
        for result in started {
            match result {
                Ok((connection, tools)) => {
                    let connection = Arc::new(connection);
                    for tool in tools {
                        let name = names::tool_name(connection.name(), &tool.name, &mut names);
                        servers
                            .tools
                            .push(McpTool::new(name, &tool, Arc::clone(&connection)));
                    }
                    servers.connections.push(connection);
                }
                Err(err) => failures.push(err),
            }
        }
        (servers, failures)
    }

    /// The tools, in the order they are registered.
    pub fn tools(&self) -> &[McpTool] {
        &self.tools
    }

    /// The servers that started.
    pub fn servers(&self) -> impl Iterator<Item = &ServerConfig> {
        self.connections.iter().map(|c| c.config())
    }

    /// Registers every tool in `registry`.
    pub fn register(&self, registry: &mut ToolRegistry) {
        for tool in &self.tools {
            registry.register(tool.clone());
        }
    }

    /// Stops every server.
    pub async fn shutdown(&self) {
        for connection in &self.connections {
            connection.shutdown().await;
        }
    }
}

async fn start_all(
    configs: Vec<ServerConfig>,
    workspace: &Path,
) -> Vec<Result<(Connection, Vec<rmcp::model::Tool>), McpError>> {
    let mut set = tokio::task::JoinSet::new();
    for (index, config) in configs.into_iter().enumerate() {
        let workspace = workspace.to_path_buf();
        set.spawn(async move { (index, Connection::start(config, &workspace).await) });
    }
    let mut results = Vec::new();
    while let Some(joined) = set.join_next().await {
        if let Ok(result) = joined {
            results.push(result);
        }
    }
    results.sort_by_key(|(index, _)| *index);
    results.into_iter().map(|(_, result)| result).collect()
}
