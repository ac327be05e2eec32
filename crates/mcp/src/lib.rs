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
pub use config::{read_mcp_json, Confine, RecordedServer, ServerConfig, Transport};
pub use tool::{normalise_schema, McpTool};

use pod_worker::{DynTool, ToolRegistry, ToolSource};
use std::collections::HashSet;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// One server's current tools, as a [`ToolSource`] of the session's
/// registry: replaced when the server announces `tools/list_changed`, seen
/// by the worker before its next model request.
pub struct ServerTools {
    server: String,
    connection: std::sync::OnceLock<std::sync::Weak<Connection>>,
    tools: parking_lot::RwLock<Vec<McpTool>>,
    generation: AtomicU64,
    // Names of the session's other tools, which this server's avoid.
    taken: Vec<String>,
}

impl ServerTools {
    fn new(server: &str, taken: Vec<String>) -> Self {
        Self {
            server: server.to_string(),
            connection: std::sync::OnceLock::new(),
            tools: parking_lot::RwLock::new(Vec::new()),
            generation: AtomicU64::new(0),
            taken,
        }
    }

    /// The server's name.
    pub fn server(&self) -> &str {
        &self.server
    }

    /// The current tools.
    pub fn current(&self) -> Vec<McpTool> {
        self.tools.read().clone()
    }

    /// Makes `listed` the server's tools (named as at the start: the same
    /// tool keeps its name).
    pub fn replace(&self, listed: Vec<rmcp::model::Tool>) {
        let Some(connection) = self.connection.get().and_then(std::sync::Weak::upgrade) else {
            return;
        };
        let mut names: HashSet<String> = self.taken.iter().cloned().collect();
        let tools: Vec<McpTool> = listed
            .iter()
            .map(|tool| {
                let name = names::tool_name(&self.server, &tool.name, &mut names);
                McpTool::new(name, tool, Arc::clone(&connection))
            })
            .collect();
        tracing::info!(server = %self.server, tools = tools.len(), "MCP server's tools changed");
        *self.tools.write() = tools;
        self.generation.fetch_add(1, Ordering::SeqCst);
    }
}

impl ToolSource for ServerTools {
    fn generation(&self) -> u64 {
        self.generation.load(Ordering::SeqCst)
    }

    fn tools(&self) -> Vec<Arc<dyn DynTool>> {
        self.tools
            .read()
            .iter()
            .map(|tool| Arc::new(tool.clone()) as Arc<dyn DynTool>)
            .collect()
    }
}

/// The started servers of one session.
#[derive(Default)]
pub struct McpServers {
    connections: Vec<Arc<Connection>>,
    sources: Vec<Arc<ServerTools>>,
}

impl std::fmt::Debug for McpServers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpServers")
            .field("servers", &self.connections)
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
        let started = start_all(configs, workspace, taken).await;
        let mut servers = Self::default();
        let mut failures = Vec::new();
        for result in started {
            match result {
                Ok((connection, source, tools)) => {
                    let connection = Arc::new(connection);
                    let _ = source.connection.set(Arc::downgrade(&connection));
                    source.replace(tools);
                    servers.connections.push(connection);
                    servers.sources.push(source);
                }
                Err(err) => failures.push(err),
            }
        }
        (servers, failures)
    }

    /// The tools, server by server, as they are now.
    pub fn tools(&self) -> Vec<McpTool> {
        self.sources.iter().flat_map(|s| s.current()).collect()
    }

    /// The servers that started.
    pub fn servers(&self) -> impl Iterator<Item = &ServerConfig> {
        self.connections.iter().map(|c| c.config())
    }

    /// Adds every server's tools to `registry`, kept current when a server
    /// changes its list. The registry's tools hold the connections: the
    /// servers live as long as a registry that has them.
    pub fn register(&self, registry: &mut ToolRegistry) {
        for (source, connection) in self.sources.iter().zip(&self.connections) {
            registry.register_source(Arc::new(Keep {
                source: Arc::clone(source),
                _connection: Arc::clone(connection),
            }));
        }
    }

    /// Stops every server.
    pub async fn shutdown(&self) {
        for connection in &self.connections {
            connection.shutdown().await;
        }
    }
}

/// A source that keeps its server's connection alive while a registry
/// holds it (the source's tools only hold it while they exist).
struct Keep {
    source: Arc<ServerTools>,
    _connection: Arc<Connection>,
}

impl ToolSource for Keep {
    fn generation(&self) -> u64 {
        self.source.generation()
    }

    fn tools(&self) -> Vec<Arc<dyn DynTool>> {
        self.source.tools()
    }
}

type Started = Result<(Connection, Arc<ServerTools>, Vec<rmcp::model::Tool>), McpError>;

async fn start_all(configs: Vec<ServerConfig>, workspace: &Path, taken: &[String]) -> Vec<Started> {
    let mut set = tokio::task::JoinSet::new();
    for (index, config) in configs.into_iter().enumerate() {
        let workspace = workspace.to_path_buf();
        let source = Arc::new(ServerTools::new(&config.name, taken.to_vec()));
        set.spawn(async move {
            let started = Connection::start(config, &workspace, Arc::clone(&source)).await;
            (
                index,
                started.map(|(connection, tools)| (connection, source, tools)),
            )
        });
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
