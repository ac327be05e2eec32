//! The editor's MCP servers (`mcpServers` of `session/new` and
//! `session/load`) as pod's server settings. The factory starts them with
//! the session's own (through the launcher, the one place servers start):
//! their tools ask the editor unless the policy names them.

use agent_client_protocol::v1::schema::McpServer;
use pod_mcp::{ServerConfig, Transport};
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
                "an MCP server of an unsupported transport ({}); the session goes on without it",
                serde_json::to_value(other)
                    .ok()
                    .and_then(|v| v.get("name").and_then(|n| n.as_str()).map(String::from))
                    .unwrap_or_else(|| "unnamed".into())
            )),
        }
    }
    (servers, skipped)
}
