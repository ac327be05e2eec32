//! MCP servers for a session: which ones (the config file's
//! `[mcp_servers.NAME]` tables, `--mcp-config` files, and on resume the
//! servers the session recorded), started before the Pod, their tools in its
//! registry at `ask` unless the approval settings name them.

use crate::error::LaunchError;
use pod::{PodConfig, ToolPolicy};
use pod_mcp::{McpServers, RecordedServer, ServerConfig};
use pod_providers::ConfigFile;
use std::collections::BTreeMap;

/// The servers to attach: recorded ones first (resume), replaced by name
/// by the config file's, then the profile's (`profile`: its
/// `[profiles.NAME.mcp_servers]`), then each `--mcp-config` file's.
pub fn configs(
    file: &ConfigFile,
    profile: Option<&toml::Value>,
    mcp_config: &[std::path::PathBuf],
    recorded: &[RecordedServer],
) -> Result<Vec<ServerConfig>, LaunchError> {
    let mut servers: BTreeMap<String, ServerConfig> = BTreeMap::new();
    for server in recorded {
        servers.insert(
            server.name.clone(),
            ServerConfig::new(server.name.clone(), server.transport.clone()),
        );
    }
    for tables in [file.mcp_servers.as_ref(), profile]
        .into_iter()
        .flatten()
        .filter_map(|v| v.as_table())
    {
        // TOML values always have a JSON form (dates become strings).
        let tables = tables.iter().map(|(name, value)| {
            let json = serde_json::to_value(value).unwrap_or(serde_json::Value::Null);
            (name.clone(), json)
        });
        for server in pod_mcp::config::from_tables(tables, &file.path).map_err(LaunchError::Mcp)? {
            servers.insert(server.name.clone(), server);
        }
    }
    for path in mcp_config {
        for server in pod_mcp::read_mcp_json(path).map_err(LaunchError::Mcp)? {
            servers.insert(server.name.clone(), server);
        }
    }
    Ok(servers.into_values().collect())
}

/// Starts `servers` in `config`'s workspace and adds their tools to its
/// registry, each at `ask` unless the policy has an entry for it (or for
/// its server, `SERVER__*`) — `--yes` allows them like every other ask. A
/// server that fails to start is left out; what went wrong with each is
/// returned.
pub async fn attach(
    servers: Vec<ServerConfig>,
    config: &mut PodConfig,
    yes: bool,
) -> (McpServers, Vec<String>) {
    if servers.is_empty() {
        return (McpServers::default(), Vec::new());
    }
    let (started, failures) = McpServers::start(servers, &config.workspace, &[]).await;
    let failures = failures.into_iter().map(|f| f.to_string()).collect();
    // Per server, so that tools it adds later ask too; an entry for a tool
    // (or a broader pattern) the user wrote wins. A server's read-only
    // hints are a third party's claim: they never relax the policy.
    for server in started.servers() {
        let every = pod_mcp::names::server_pattern(&server.name);
        if config.approval.explicit(&every).is_none() {
            let policy = match yes {
                true => ToolPolicy::Allow,
                false => ToolPolicy::Ask,
            };
            config.approval.set(every, policy);
        }
    }
    started.register(&mut config.tools);
    (started, failures)
}

/// What the session's header records of `servers`.
pub fn recorded(servers: &McpServers) -> Vec<RecordedServer> {
    servers.servers().map(ServerConfig::recorded).collect()
}
