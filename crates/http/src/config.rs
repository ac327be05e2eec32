//! `[http]` in the config file: where API clients may put workspaces, and
//! the server's limits.
//!
//! ```toml
//! [http]
//! workspace_roots = ["/srv/agents"]   # default: the server's directory
//! allowed_hosts = ["pod.internal:7700"]  # Host values a loopback server answers besides its own
//! max_connections = 128
//! header_timeout_secs = 10
//! body_timeout_secs = 30
//! max_body_bytes = 1048576
//! mcp_server_urls = ["https://mcp.example.com/"]  # MCP servers API clients' agents may use
//! ```

use crate::failure::ServeError;
use pod_providers::ConfigFile;
use serde::Deserialize;
use std::path::PathBuf;
use std::time::Duration;

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct HttpTable {
    #[serde(default)]
    workspace_roots: Vec<PathBuf>,
    #[serde(default)]
    allowed_hosts: Vec<String>,
    #[serde(default)]
    mcp_server_urls: Vec<String>,
    max_connections: Option<usize>,
    header_timeout_secs: Option<u64>,
    body_timeout_secs: Option<u64>,
    max_body_bytes: Option<usize>,
}

/// The `[http]` settings.
#[derive(Debug, Default)]
pub struct HttpConfig {
    /// Workspace roots from the file (flags add to them).
    pub workspace_roots: Vec<PathBuf>,
    /// Extra `Host` values a loopback server answers.
    pub allowed_hosts: Vec<String>,
    /// URLs (and what lies under them) the Managed Agents API's agents may
    /// name as MCP servers; none when empty.
    pub mcp_server_urls: Vec<String>,
    /// Limits, the defaults where the file is silent.
    pub limits: Limits,
}

/// Reads `[http]` from `file`.
pub fn read(file: &ConfigFile) -> Result<HttpConfig, ServeError> {
    let Some(table) = &file.http else {
        return Ok(HttpConfig::default());
    };
    let table: HttpTable = match table.clone().try_into() {
        Ok(table) => table,
        Err(err) => {
            return Err(ServeError::refused(
                format!("invalid [http] table in {}: {err}", file.path.display()),
                "it takes workspace_roots, allowed_hosts, mcp_server_urls, max_connections, \
                 header_timeout_secs, body_timeout_secs and max_body_bytes",
            ))
        }
    };
    let mut limits = Limits::default();
    let positive = |name: &str, value: u64| -> Result<u64, ServeError> {
        if value == 0 {
            return Err(ServeError::refused(
                format!("[http] {name} in {} is 0", file.path.display()),
                "give a number of at least 1",
            ));
        }
        Ok(value)
    };
    if let Some(n) = table.max_connections {
        limits.max_connections = positive("max_connections", n as u64)? as usize;
    }
    if let Some(secs) = table.header_timeout_secs {
        limits.header_timeout = Duration::from_secs(positive("header_timeout_secs", secs)?);
    }
    if let Some(secs) = table.body_timeout_secs {
        limits.body_timeout = Duration::from_secs(positive("body_timeout_secs", secs)?);
    }
    if let Some(bytes) = table.max_body_bytes {
        limits.max_body = positive("max_body_bytes", bytes as u64)? as usize;
    }
    Ok(HttpConfig {
        workspace_roots: table.workspace_roots,
        allowed_hosts: table.allowed_hosts,
        mcp_server_urls: table.mcp_server_urls,
        limits,
    })
}

/// The server's limits (`[http]` in the config file; these defaults
/// otherwise).
#[derive(Debug, Clone)]
pub struct Limits {
    /// Connections served at once. Each holds a file descriptor and a
    /// little memory; a dashboard holds two or three (page loads and its
    /// event streams).
    pub max_connections: usize,
    /// Time to send a request's headers, from the connection's start or
    /// the end of its previous response.
    pub header_timeout: Duration,
    /// Time to send a request's body.
    pub body_timeout: Duration,
    /// Largest body (a task or a prompt is text; a megabyte is a book).
    pub max_body: usize,
    /// Longest request target (path and query).
    pub max_uri: usize,
    /// Largest request head (all header lines).
    pub max_headers: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_connections: 128,
            header_timeout: Duration::from_secs(10),
            body_timeout: Duration::from_secs(30),
            max_body: 1024 * 1024,
            max_uri: 8 * 1024,
            max_headers: 32 * 1024,
        }
    }
}
