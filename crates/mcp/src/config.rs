//! Where MCP servers come from: the config file's `[mcp_servers.NAME]`
//! tables, an `{"mcpServers": {...}}` JSON file (the shape editors and other
//! agents use), or an editor's `session/new`.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// How pod reaches one server.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Transport {
    /// A child process speaking MCP on its stdin/stdout.
    Stdio {
        /// The program.
        command: String,
        /// Its arguments.
        #[serde(default)]
        args: Vec<String>,
        /// Extra environment variables (values are never logged or recorded).
        #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
        env: BTreeMap<String, String>,
        /// Its working directory (default: the workspace).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        cwd: Option<PathBuf>,
    },
    /// A streamable-HTTP server.
    Http {
        /// Its URL.
        url: String,
        /// Headers sent with every request (values are never logged or
        /// recorded).
        #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
        headers: BTreeMap<String, String>,
    },
}

/// One server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerConfig {
    /// Its name: the prefix of its tools' names.
    pub name: String,
    /// How to reach it.
    pub transport: Transport,
    /// How long it may take to start and list its tools.
    pub startup_timeout: Duration,
    /// How long one call may run.
    pub call_timeout: Duration,
    /// What a stdio server's process is confined by before it starts
    /// (a replay runs recorded servers under its sandbox); none: it runs
    /// with the user's rights, as the user configured it.
    pub confine: Option<Confine>,
}

/// Prepares a stdio server's command before it is spawned (a kernel
/// sandbox applied between fork and exec, say); an error stops the start.
#[derive(Clone)]
pub struct Confine(pub std::sync::Arc<ConfineFn>);

/// What a [`Confine`] calls on a server's command.
pub type ConfineFn = dyn Fn(&mut tokio::process::Command) -> std::io::Result<()> + Send + Sync;

impl std::fmt::Debug for Confine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Confine(..)")
    }
}

impl PartialEq for Confine {
    fn eq(&self, other: &Self) -> bool {
        std::sync::Arc::ptr_eq(&self.0, &other.0)
    }
}

impl Eq for Confine {}

/// Default time a server has to start: a server run through `npx` may
/// download its package first.
pub const STARTUP_TIMEOUT: Duration = Duration::from_secs(30);
/// Default time a call may take: long enough for a build or a crawl a
/// server runs for the model, short enough that a hung server does not hold
/// an unattended run for long (the turn's cancellation ends it sooner).
pub const CALL_TIMEOUT: Duration = Duration::from_secs(300);

impl ServerConfig {
    /// A server with the default timeouts.
    pub fn new(name: impl Into<String>, transport: Transport) -> Self {
        Self {
            name: name.into(),
            transport,
            startup_timeout: STARTUP_TIMEOUT,
            call_timeout: CALL_TIMEOUT,
            confine: None,
        }
    }

    /// The same server, its process confined by `confine` (stdio only).
    pub fn confined(mut self, confine: Confine) -> Self {
        self.confine = Some(confine);
        self
    }

    /// What a session records of it: the name and how it was started, with
    /// no environment values and no headers (they may hold secrets).
    pub fn recorded(&self) -> RecordedServer {
        RecordedServer {
            name: self.name.clone(),
            transport: match &self.transport {
                Transport::Stdio {
                    command, args, cwd, ..
                } => Transport::Stdio {
                    command: command.clone(),
                    args: args.clone(),
                    env: BTreeMap::new(),
                    cwd: cwd.clone(),
                },
                Transport::Http { url, .. } => Transport::Http {
                    url: url.clone(),
                    headers: BTreeMap::new(),
                },
            },
            env_names: match &self.transport {
                Transport::Stdio { env, .. } => env.keys().cloned().collect(),
                Transport::Http { headers, .. } => headers.keys().cloned().collect(),
            },
        }
    }

    /// A short description for messages: `name (command args…)` or
    /// `name (url)`.
    pub fn describe(&self) -> String {
        match &self.transport {
            Transport::Stdio { command, args, .. } => {
                format!("{} ({} {})", self.name, command, args.join(" "))
                    .trim_end()
                    .to_string()
            }
            Transport::Http { url, .. } => format!("{} ({url})", self.name),
        }
    }
}

/// A server as a session's log records it (no secrets).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RecordedServer {
    /// Its name.
    pub name: String,
    /// How it was reached, without env values or headers.
    pub transport: Transport,
    /// The names of the env variables or headers it had (not their values).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub env_names: Vec<String>,
}

/// Why a server list could not be read.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file could not be read.
    #[error("cannot read {path}")]
    Read {
        /// The file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// The file is not the expected JSON.
    #[error("{path}: not an MCP server list ({{\"mcpServers\": {{NAME: {{\"command\": ...}} or {{\"url\": ...}}}}}})")]
    Parse {
        /// The file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: serde_json::Error,
    },
    /// A server's name cannot prefix tool names.
    #[error("MCP server name {0:?}: use letters, digits, '-' and '_' only (at most 32)")]
    BadName(String),
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct McpFile {
    mcp_servers: BTreeMap<String, FileServer>,
}

/// One entry of an `mcpServers` object (Claude Desktop, Cursor, Zed's
/// context servers use this shape).
#[derive(Deserialize)]
struct FileServer {
    #[serde(flatten)]
    transport: Transport,
    #[serde(default)]
    startup_timeout_secs: Option<u64>,
    #[serde(default)]
    call_timeout_secs: Option<u64>,
}

/// Reads an `{"mcpServers": {...}}` file.
pub fn read_mcp_json(path: &Path) -> Result<Vec<ServerConfig>, ConfigError> {
    let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
        path: path.to_path_buf(),
        source,
    })?;
    let file: McpFile = serde_json::from_str(&text).map_err(|source| ConfigError::Parse {
        path: path.to_path_buf(),
        source,
    })?;
    file.mcp_servers
        .into_iter()
        .map(|(name, server)| server_config(name, server))
        .collect()
}

/// Servers from the config file's `[mcp_servers.NAME]` tables, given as
/// JSON values of the same shape as an `mcpServers` entry.
pub fn from_tables(
    tables: impl IntoIterator<Item = (String, serde_json::Value)>,
    origin: &Path,
) -> Result<Vec<ServerConfig>, ConfigError> {
    tables
        .into_iter()
        .map(|(name, value)| {
            let server: FileServer =
                serde_json::from_value(value).map_err(|source| ConfigError::Parse {
                    path: origin.to_path_buf(),
                    source,
                })?;
            server_config(name, server)
        })
        .collect()
}

fn server_config(name: String, server: FileServer) -> Result<ServerConfig, ConfigError> {
    check_name(&name)?;
    let mut config = ServerConfig::new(name, server.transport);
    if let Some(secs) = server.startup_timeout_secs {
        config.startup_timeout = Duration::from_secs(secs);
    }
    if let Some(secs) = server.call_timeout_secs {
        config.call_timeout = Duration::from_secs(secs);
    }
    Ok(config)
}

/// A server name must fit in a tool name's prefix.
pub fn check_name(name: &str) -> Result<(), ConfigError> {
    let ok = !name.is_empty()
        && name.len() <= 32
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
    match ok {
        true => Ok(()),
        false => Err(ConfigError::BadName(name.to_string())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn editor_files_and_recorded_servers() {
        let dir = std::env::temp_dir().join(format!("pod-mcp-config-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("mcp.json");
        std::fs::write(
            &path,
            r#"{"mcpServers": {
                "fs": {"command": "npx", "args": ["-y", "server-filesystem", "/tmp"], "env": {"TOKEN": "s3cret"}},
                "web": {"url": "http://127.0.0.1:9/mcp", "headers": {"Authorization": "Bearer s3cret"}, "call_timeout_secs": 5}
            }}"#,
        )
        .unwrap();
        let servers = read_mcp_json(&path).unwrap();
        assert_eq!(servers.len(), 2);
        assert_eq!(servers[1].call_timeout, Duration::from_secs(5));
        let recorded =
            serde_json::to_string(&servers.iter().map(|s| s.recorded()).collect::<Vec<_>>())
                .unwrap();
        assert!(!recorded.contains("s3cret"), "{recorded}");
        assert!(recorded.contains("TOKEN") && recorded.contains("Authorization"));
        std::fs::write(&path, r#"{"mcpServers": {"bad name": {"command": "x"}}}"#).unwrap();
        assert!(matches!(read_mcp_json(&path), Err(ConfigError::BadName(_))));
        std::fs::write(&path, r#"{"servers": []}"#).unwrap();
        assert!(matches!(
            read_mcp_json(&path),
            Err(ConfigError::Parse { .. })
        ));
        let _ = std::fs::remove_dir_all(&dir);
    }
}
