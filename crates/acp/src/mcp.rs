//! The editor's MCP servers (`mcpServers` of `session/new` and
//! `session/load`): started for the session, their tools in its registry at
//! `ask` (the editor answers) unless the policy names them, stopped with it.

use agent_client_protocol::v1::schema::McpServer;
use pod::{PodConfig, ToolPolicy};
use pod_mcp::{McpServers, ServerConfig, Transport};
use std::collections::BTreeMap;

/// The servers the editor sent, as pod server settings; those pod cannot
/// reach are described in the second list.
pub fn servers(sent: &[McpServer]) -> (Vec<ServerConfig>, Vec<String>) {
    let mut servers = Vec::new();
    let mut skipped = Vec::new();
    for server in sent {
        match server {
            McpServer::Stdio(stdio) => servers.push(ServerConfig::new(
                stdio.name.clone(),
                Transport::Stdio {
                    command: stdio.command.display().to_string(),
                    args: stdio.args.clone(),
                    env: stdio
                        .env
                        .iter()
                        .map(|var| (var.name.clone(), var.value.clone()))
                        .collect::<BTreeMap<_, _>>(),
                    cwd: None,
                },
            )),
            McpServer::Http(http) => servers.push(ServerConfig::new(
                http.name.clone(),
                Transport::Http {
                    url: http.url.clone(),
                    headers: http
                        .headers
                        .iter()
                        .map(|h| (h.name.clone(), h.value.clone()))
                        .collect(),
                },
            )),
            other => skipped.push(format!(
                "an MCP server of an unsupported transport ({})",
                serde_json::to_value(other)
                    .ok()
                    .and_then(|v| v.get("name").and_then(|n| n.as_str()).map(String::from))
                    .unwrap_or_else(|| "unnamed".into())
            )),
        }
    }
    (servers, skipped)
}

/// Starts `servers` for a session and registers their tools in `config`;
/// returns them and one line per server that did not start.
pub async fn attach(
    servers: Vec<ServerConfig>,
    config: &mut PodConfig,
) -> (McpServers, Vec<String>) {
    let mut problems = Vec::new();
    let servers: Vec<ServerConfig> = servers
        .into_iter()
        .filter(|server| match pod_mcp::config::check_name(&server.name) {
            Ok(()) => true,
            Err(err) => {
                problems.push(err.to_string());
                false
            }
        })
        .collect();
    if servers.is_empty() {
        return (McpServers::default(), problems);
    }
    // Names the session's tools already use (the front end's own servers).
    let taken: Vec<String> = config
        .tools
        .specs()
        .iter()
        .map(|s| s.name.clone())
        .collect();
    let (started, failures) = McpServers::start(servers, &config.workspace, &taken).await;
    problems.extend(failures.iter().map(ToString::to_string));
    // Per server, so that tools it adds later ask too.
    for server in started.servers() {
        let every = pod_mcp::names::server_pattern(&server.name);
        if config.approval.explicit(&every).is_none() {
            config.approval.set(every, ToolPolicy::Ask);
        }
    }
    started.register(&mut config.tools);
    (started, problems)
}
