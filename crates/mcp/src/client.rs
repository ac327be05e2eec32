//! One server's connection: started with a timeout, restarted (a bounded
//! number of times) when it died, and calls with a timeout and
//! cancellation.

use crate::config::{ServerConfig, Transport};
use crate::ServerTools;
use futures_util::FutureExt;
use rmcp::model::{CallToolRequestParams, JsonObject};
use rmcp::service::{Peer, RoleClient, RunningService};
use rmcp::transport::TokioChildProcess;
use rmcp::ServiceExt;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use tokio_util::sync::CancellationToken;

/// Restarts of a server that died, per session, before it is given up.
pub const MAX_RESTARTS: u32 = 3;

/// Why a server could not be used.
#[derive(Debug, thiserror::Error)]
pub enum McpError {
    /// It did not start or answer the handshake.
    #[error("MCP server {server} did not start: {reason}")]
    Start {
        /// The server.
        server: String,
        /// What went wrong.
        reason: String,
    },
    /// It did not list its tools.
    #[error("MCP server {server} did not list its tools: {reason}")]
    List {
        /// The server.
        server: String,
        /// What went wrong.
        reason: String,
    },
    /// Its settings cannot be used (an invalid header, say).
    #[error("MCP server {server}: {reason}")]
    Unsupported {
        /// The server.
        server: String,
        /// What is missing.
        reason: String,
    },
}

/// What went wrong with one call, for the model to read.
#[derive(Debug, thiserror::Error)]
pub enum CallError {
    /// The server died during the call (it is restarted on the next one).
    #[error("the MCP server {0} stopped during the call; it will be restarted for the next call")]
    Died(String),
    /// The server is gone for this session.
    #[error("the MCP server {server} is not available: {reason}")]
    Unavailable {
        /// The server.
        server: String,
        /// Why.
        reason: String,
    },
    /// The call took longer than its timeout and was cancelled.
    #[error("the call to the MCP server {server} timed out after {secs} s and was cancelled")]
    Timeout {
        /// The server.
        server: String,
        /// The timeout.
        secs: u64,
    },
    /// The turn was cancelled.
    #[error("cancelled")]
    Cancelled,
    /// The server answered with a protocol error.
    #[error("the MCP server {server} refused the call: {reason}")]
    Refused {
        /// The server.
        server: String,
        /// Its message.
        reason: String,
    },
}

type Running = RunningService<RoleClient, Listener>;

/// Hears the server's notifications: a `tools/list_changed` re-lists its
/// tools into the session's [`ServerTools`].
#[derive(Clone)]
pub struct Listener {
    // Weak: the tools hold the connection, which holds this.
    tools: std::sync::Weak<ServerTools>,
}

impl rmcp::ClientHandler for Listener {
    async fn on_tool_list_changed(&self, context: rmcp::service::NotificationContext<RoleClient>) {
        let Some(tools) = self.tools.upgrade() else {
            return;
        };
        match context.peer.list_all_tools().await {
            Ok(listed) => tools.replace(listed),
            Err(err) => tracing::warn!(
                server = %tools.server(),
                err = %err,
                "cannot re-list the tools after tools/list_changed"
            ),
        }
    }
}

/// A server's connection, shared by its tools.
pub struct Connection {
    config: ServerConfig,
    workspace: PathBuf,
    listener: Listener,
    running: tokio::sync::Mutex<Option<Running>>,
    restarts: AtomicU32,
}

impl std::fmt::Debug for Connection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Connection")
            .field("server", &self.config.name)
            .finish_non_exhaustive()
    }
}

impl Connection {
    /// Starts the server and returns the connection and its tools; later
    /// changes of its tool list go to `tools`.
    pub async fn start(
        config: ServerConfig,
        workspace: &Path,
        tools: Arc<ServerTools>,
    ) -> Result<(Self, Vec<rmcp::model::Tool>), McpError> {
        let listener = Listener {
            tools: Arc::downgrade(&tools),
        };
        let running = connect(&config, workspace, &listener).await?;
        let list = tokio::time::timeout(config.startup_timeout, running.peer().list_all_tools());
        let tools = match list.await {
            Ok(Ok(tools)) => tools,
            Ok(Err(err)) => {
                return Err(McpError::List {
                    server: config.name.clone(),
                    reason: err.to_string(),
                })
            }
            Err(_) => {
                return Err(McpError::List {
                    server: config.name.clone(),
                    reason: format!("no answer in {} s", config.startup_timeout.as_secs()),
                })
            }
        };
        Ok((
            Self {
                config,
                workspace: workspace.to_path_buf(),
                listener,
                running: tokio::sync::Mutex::new(Some(running)),
                restarts: AtomicU32::new(0),
            },
            tools,
        ))
    }

    /// The server's name.
    pub fn name(&self) -> &str {
        &self.config.name
    }

    /// The server's settings.
    pub fn config(&self) -> &ServerConfig {
        &self.config
    }

    /// A live peer: the running one, or a restarted server when it died
    /// (at most [`MAX_RESTARTS`] times per session).
    async fn peer(&self) -> Result<Peer<RoleClient>, CallError> {
        let mut running = self.running.lock().await;
        if let Some(live) = running.as_ref().filter(|r| !r.is_closed()) {
            return Ok(live.peer().clone());
        }
        let restarts = self.restarts.fetch_add(1, Ordering::SeqCst);
        if restarts >= MAX_RESTARTS {
            return Err(CallError::Unavailable {
                server: self.config.name.clone(),
                reason: format!("it stopped {} times", restarts + 1),
            });
        }
        tracing::warn!(server = %self.config.name, restart = restarts + 1, "restarting MCP server");
        let restarted = connect(&self.config, &self.workspace, &self.listener)
            .await
            .map_err(|err| CallError::Unavailable {
                server: self.config.name.clone(),
                reason: err.to_string(),
            })?;
        let peer = restarted.peer().clone();
        *running = Some(restarted);
        Ok(peer)
    }

    /// Calls `tool` with `arguments`; the result as the server sent it.
    pub async fn call(
        &self,
        tool: &str,
        arguments: JsonObject,
        cancel: &CancellationToken,
    ) -> Result<Value, CallError> {
        let peer = self.peer().await?;
        let params = CallToolRequestParams::new(tool.to_string()).with_arguments(arguments);
        let call = tokio::time::timeout(self.config.call_timeout, peer.call_tool(params));
        let result = tokio::select! {
            result = call => result,
            _ = cancel.cancelled() => return Err(CallError::Cancelled),
        };
        match result {
            Err(_) => Err(CallError::Timeout {
                server: self.config.name.clone(),
                secs: self.config.call_timeout.as_secs(),
            }),
            Ok(Ok(result)) => Ok(serde_json::to_value(&result).unwrap_or(Value::Null)),
            Ok(Err(rmcp::ServiceError::McpError(err))) => Err(CallError::Refused {
                server: self.config.name.clone(),
                reason: err.message.to_string(),
            }),
            Ok(Err(err)) => {
                tracing::warn!(server = %self.config.name, err = %err, "MCP call failed");
                // Whatever it was, this connection is done: the next call
                // starts the server again.
                if let Some(dead) = self.running.lock().await.take() {
                    dead.cancellation_token().cancel();
                }
                Err(CallError::Died(self.config.name.clone()))
            }
        }
    }

    /// Stops the server (its process is killed if it does not exit).
    pub async fn shutdown(&self) {
        if let Some(running) = self.running.lock().await.take() {
            let _ = running.cancel().await;
        }
    }
}

/// What a stdio server gets of pod's own environment besides the variables
/// its config names: the names the MCP SDKs pass on by default (the
/// TypeScript SDK's `getDefaultEnvironment` on POSIX), so a server finds its
/// interpreter and home, and nothing else of pod's: not its API keys, not
/// `POD_*` settings.
const INHERITED_ENV: [&str; 6] = ["HOME", "LOGNAME", "PATH", "SHELL", "TERM", "USER"];

async fn connect(
    config: &ServerConfig,
    workspace: &Path,
    listener: &Listener,
) -> Result<Running, McpError> {
    let start_error = |reason: String| McpError::Start {
        server: config.name.clone(),
        reason,
    };
    let serve = match &config.transport {
        Transport::Stdio {
            command,
            args,
            env,
            cwd,
        } => {
            let mut cmd = tokio::process::Command::new(command);
            cmd.env_clear();
            for name in INHERITED_ENV {
                if let Some(value) = std::env::var_os(name) {
                    cmd.env(name, value);
                }
            }
            cmd.args(args)
                .envs(env)
                .current_dir(cwd.as_deref().unwrap_or(workspace))
                .kill_on_drop(true);
            if let Some(confine) = &config.confine {
                (confine.0)(&mut cmd)
                    .map_err(|err| start_error(format!("cannot confine {command}: {err}")))?;
            }
            let (transport, _stderr) = TokioChildProcess::builder(cmd)
                // A server's diagnostics would scribble over the terminal
                // (or an ACP stream's stderr log); they are not ours.
                .stderr(Stdio::null())
                .spawn()
                .map_err(|err| start_error(format!("cannot run {command}: {err}")))?;
            listener.clone().serve(transport).boxed()
        }
        Transport::Http { url, headers } => {
            let transport =
                http_transport(url, headers).map_err(|reason| McpError::Unsupported {
                    server: config.name.clone(),
                    reason,
                })?;
            listener.clone().serve(transport).boxed()
        }
    };
    match tokio::time::timeout(config.startup_timeout, serve).await {
        Ok(Ok(running)) => Ok(running),
        Ok(Err(err)) => Err(start_error(err.to_string())),
        Err(_) => Err(start_error(format!(
            "no handshake in {} s",
            config.startup_timeout.as_secs()
        ))),
    }
}

/// The streamable-HTTP transport to `url` with `headers` on every request
/// (an `Authorization: Bearer` header becomes the transport's token).
fn http_transport(
    url: &str,
    headers: &std::collections::BTreeMap<String, String>,
) -> Result<rmcp::transport::StreamableHttpClientTransport<crate::http::HttpClient>, String> {
    use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
    let mut config = StreamableHttpClientTransportConfig::with_uri(url.to_string());
    let mut custom = std::collections::HashMap::new();
    for (name, value) in headers {
        if name.eq_ignore_ascii_case("authorization") {
            if let Some(token) = value.strip_prefix("Bearer ") {
                config = config.auth_header(token.to_string());
                continue;
            }
        }
        // The value is never shown: it may be a secret.
        let header = http::HeaderName::from_bytes(name.as_bytes())
            .map_err(|_| format!("invalid header name {name:?}"))?;
        let value = http::HeaderValue::from_str(value)
            .map_err(|_| format!("invalid value for header {name:?}"))?;
        custom.insert(header, value);
    }
    // A server that does not accept a connection in 10 s is down; the call
    // timeout bounds the rest.
    let client = reqwest::Client::builder()
        .connect_timeout(std::time::Duration::from_secs(10))
        .build()
        .map_err(|err| format!("cannot build an HTTP client: {err}"))?;
    Ok(rmcp::transport::StreamableHttpClientTransport::with_client(
        crate::http::HttpClient(client),
        config.custom_headers(custom),
    ))
}
