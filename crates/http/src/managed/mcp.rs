//! An agent's MCP servers: `mcp_servers` (`{"type": "url", name, url}`)
//! and, for each, an `mcp_toolset` in `tools` saying which of its tools are
//! enabled and which ask first. A session of the agent starts them as
//! pod's own MCP servers (streamable HTTP, recorded with the session, so a
//! resume on any worker reconnects), their tools named `NAME__TOOL`; the
//! toolsets become approval entries (`always_ask` → ask, `always_allow` →
//! allow, `enabled: false` → deny), held to the server's ceiling like any
//! other. Which URLs an API client may have the server connect to is the
//! operator's: `[http] mcp_server_urls`.

use super::error::Error;
use pod::ToolPolicy;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use std::collections::HashSet;

/// The most MCP servers one agent declares (the API's limit).
const MAX_SERVERS: usize = 20;

/// An MCP server an agent connects to.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct McpServer {
    pub name: String,
    pub url: String,
}

/// `always_allow` or `always_ask`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Permission {
    AlwaysAllow,
    AlwaysAsk,
}

/// What a toolset says of one tool (or, as its default, of every tool).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct ToolConfig {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enabled: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub permission: Option<Permission>,
}

/// One `mcp_toolset`: the server it names, its default, and its tools'
/// own settings.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Toolset {
    pub server: String,
    pub default: ToolConfig,
    #[serde(default)]
    pub tools: Vec<(String, ToolConfig)>,
}

impl Toolset {
    /// The default's `enabled` (true unless it says otherwise).
    fn enabled(&self) -> bool {
        self.default.enabled.unwrap_or(true)
    }

    /// The default's policy: MCP toolsets ask unless told otherwise (a
    /// tool a server adds later runs only when someone allowed it).
    fn permission(&self) -> Permission {
        self.default.permission.unwrap_or(Permission::AlwaysAsk)
    }

    /// Its JSON in the API's shape, every field filled in.
    pub fn to_json(&self) -> Value {
        let configs: Vec<Value> = self
            .tools
            .iter()
            .map(|(name, config)| {
                json!({
                    "name": name,
                    "enabled": config.enabled.unwrap_or_else(|| self.enabled()),
                    "permission_policy": policy_json(config.permission.unwrap_or_else(|| self.permission())),
                })
            })
            .collect();
        json!({
            "type": "mcp_toolset",
            "mcp_server_name": self.server,
            "default_config": {
                "enabled": self.enabled(),
                "permission_policy": policy_json(self.permission()),
            },
            "configs": configs,
        })
    }

    /// The approval entries it stands for: `SERVER__*` for its default,
    /// `SERVER__TOOL` for each tool it names (pod's name of that tool).
    pub fn approvals(&self) -> Vec<(String, ToolPolicy)> {
        let policy = |enabled: bool, permission: Permission| match (enabled, permission) {
            (false, _) => ToolPolicy::Deny,
            (true, Permission::AlwaysAsk) => ToolPolicy::Ask,
            (true, Permission::AlwaysAllow) => ToolPolicy::Allow,
        };
        let mut entries = vec![(
            pod_mcp::names::server_pattern(&self.server),
            policy(self.enabled(), self.permission()),
        )];
        for (name, config) in &self.tools {
            let tool = pod_mcp::names::tool_name(&self.server, name, &mut HashSet::new());
            entries.push((
                tool,
                policy(
                    config.enabled.unwrap_or_else(|| self.enabled()),
                    config.permission.unwrap_or_else(|| self.permission()),
                ),
            ));
        }
        entries
    }
}

fn policy_json(permission: Permission) -> Value {
    match permission {
        Permission::AlwaysAllow => json!({"type": "always_allow"}),
        Permission::AlwaysAsk => json!({"type": "always_ask"}),
    }
}

/// The servers of an agent's `mcp_servers`.
pub(crate) fn servers(list: &[Value]) -> Result<Vec<McpServer>, Error> {
    if list.len() > MAX_SERVERS {
        return Err(Error::invalid(format!(
            "an agent declares at most {MAX_SERVERS} MCP servers, not {}",
            list.len()
        )));
    }
    let mut servers: Vec<McpServer> = Vec::new();
    for server in list {
        match server.get("type").and_then(Value::as_str) {
            Some("url") => {}
            other => {
                return Err(Error::invalid(format!(
                    "MCP server type {} is not one pod knows: `url`",
                    other.unwrap_or("(none)")
                )))
            }
        }
        let text = |key: &str| match server.get(key) {
            Some(Value::String(text)) if !text.is_empty() => Ok(text.clone()),
            _ => Err(Error::invalid(format!(
                "an MCP server needs `{key}` (a non-empty string)"
            ))),
        };
        let (name, url) = (text("name")?, text("url")?);
        pod_mcp::config::check_name(&name).map_err(|err| {
            Error::invalid(format!(
                "{err}: pod names an MCP server's tools NAME__TOOL, so a name is 1 to 32 \
                 letters, digits, `-` or `_`"
            ))
        })?;
        if !(url.starts_with("https://") || url.starts_with("http://")) {
            return Err(Error::invalid(format!(
                "MCP server {name}: {url:?} is not an http(s) URL"
            )));
        }
        if servers.iter().any(|s| s.name == name) {
            return Err(Error::invalid(format!(
                "two MCP servers are named {name:?}"
            )));
        }
        servers.push(McpServer { name, url });
    }
    Ok(servers)
}

/// One `{"type": "mcp_toolset", ...}` entry of `tools`.
pub(crate) fn toolset(tool: &Value) -> Result<Toolset, Error> {
    let server = match tool.get("mcp_server_name") {
        Some(Value::String(name)) if !name.is_empty() => name.clone(),
        _ => {
            return Err(Error::invalid(
                "an mcp_toolset needs `mcp_server_name` (a server of `mcp_servers`)",
            ))
        }
    };
    let default = match tool.get("default_config") {
        None | Some(Value::Null) => ToolConfig {
            enabled: None,
            permission: None,
        },
        Some(config) => tool_config(config, "default_config")?,
    };
    let mut tools: Vec<(String, ToolConfig)> = Vec::new();
    match tool.get("configs") {
        None | Some(Value::Null) => {}
        Some(Value::Array(configs)) => {
            for config in configs {
                let name = match config.get("name") {
                    Some(Value::String(name)) if !name.is_empty() => name.clone(),
                    _ => {
                        return Err(Error::invalid(
                            "each of an mcp_toolset's `configs` needs `name`",
                        ))
                    }
                };
                if tools.iter().any(|(n, _)| *n == name) {
                    return Err(Error::invalid(format!(
                        "mcp_toolset {server}: two configs name {name:?}"
                    )));
                }
                tools.push((name, tool_config(config, "configs")?));
            }
        }
        Some(_) => return Err(Error::invalid("an mcp_toolset's `configs` must be a list")),
    }
    Ok(Toolset {
        server,
        default,
        tools,
    })
}

fn tool_config(config: &Value, what: &str) -> Result<ToolConfig, Error> {
    let enabled = match config.get("enabled") {
        None | Some(Value::Null) => None,
        Some(Value::Bool(enabled)) => Some(*enabled),
        Some(_) => {
            return Err(Error::invalid(format!(
                "`{what}.enabled` must be true or false"
            )))
        }
    };
    let permission = match config.get("permission_policy") {
        None | Some(Value::Null) => None,
        Some(policy) => match policy.get("type").and_then(Value::as_str) {
            Some("always_allow") => Some(Permission::AlwaysAllow),
            Some("always_ask") => Some(Permission::AlwaysAsk),
            Some("auto") => {
                return Err(Error::unsupported(
                    "the `auto` permission policy (pod decides with its approval policy: \
                     always_allow or always_ask)",
                ))
            }
            other => {
                return Err(Error::invalid(format!(
                    "unknown permission policy {}",
                    other.unwrap_or("(none)")
                )))
            }
        },
    };
    Ok(ToolConfig {
        enabled,
        permission,
    })
}

/// Every toolset names a declared server, and every server has a toolset
/// (a server without one would give the agent nothing).
pub(crate) fn check(servers: &[McpServer], toolsets: &[Toolset]) -> Result<(), Error> {
    for toolset in toolsets {
        if !servers.iter().any(|s| s.name == toolset.server) {
            return Err(Error::invalid(format!(
                "mcp_toolset names {:?}, which is not in `mcp_servers`",
                toolset.server
            )));
        }
        if toolsets
            .iter()
            .filter(|t| t.server == toolset.server)
            .count()
            > 1
        {
            return Err(Error::invalid(format!(
                "two mcp_toolsets name {:?}",
                toolset.server
            )));
        }
    }
    if let Some(server) = servers
        .iter()
        .find(|s| !toolsets.iter().any(|t| t.server == s.name))
    {
        return Err(Error::invalid(format!(
            "MCP server {:?} has no mcp_toolset in `tools`: add {{\"type\": \"mcp_toolset\", \
             \"mcp_server_name\": {:?}}}",
            server.name, server.name
        )));
    }
    Ok(())
}

/// The server config pod starts for `server`: streamable HTTP, no
/// headers (an API client gives no credentials; vaults are not supported).
pub(crate) fn config(server: &McpServer) -> pod_mcp::ServerConfig {
    pod_mcp::ServerConfig::new(
        server.name.clone(),
        pod_mcp::config::Transport::Http {
            url: server.url.clone(),
            headers: Default::default(),
        },
    )
}

/// The server and tool of a call named `SERVER__TOOL`, when `SERVER` is
/// one of `servers`.
pub(crate) fn split_call<'a>(name: &'a str, servers: &[String]) -> Option<(&'a str, &'a str)> {
    let (server, tool) = name.split_once(pod_mcp::names::SEPARATOR)?;
    servers
        .iter()
        .any(|s| s == server)
        .then_some((server, tool))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn toolsets_become_approval_entries_and_echo_in_full() {
        let toolset = toolset(&json!({
            "type": "mcp_toolset",
            "mcp_server_name": "docs",
            "default_config": {"permission_policy": {"type": "always_allow"}},
            "configs": [
                {"name": "delete_page", "permission_policy": {"type": "always_ask"}},
                {"name": "get.secret", "enabled": false},
            ],
        }))
        .unwrap();
        assert_eq!(
            toolset.approvals(),
            vec![
                ("docs__*".to_string(), ToolPolicy::Allow),
                ("docs__delete_page".to_string(), ToolPolicy::Ask),
                // pod's name of the tool, as its registry gives it.
                (
                    pod_mcp::names::tool_name("docs", "get.secret", &mut HashSet::new()),
                    ToolPolicy::Deny
                ),
            ]
        );
        let echoed = toolset.to_json();
        assert_eq!(echoed["default_config"]["enabled"], true);
        assert_eq!(
            echoed["configs"][1]["permission_policy"]["type"],
            "always_allow"
        );
        // Without a default, a toolset asks.
        let plain =
            super::toolset(&json!({"type": "mcp_toolset", "mcp_server_name": "docs"})).unwrap();
        assert_eq!(
            plain.approvals(),
            vec![("docs__*".to_string(), ToolPolicy::Ask)]
        );
    }

    #[test]
    fn servers_and_toolsets_must_match() {
        let servers =
            servers(&[json!({"type": "url", "name": "docs", "url": "https://mcp.example/docs"})])
                .unwrap();
        let named = |server: &str| super::toolset(&json!({"mcp_server_name": server})).unwrap();
        assert!(check(&servers, &[named("docs")]).is_ok());
        assert!(check(&servers, &[]).is_err());
        assert!(check(&servers, &[named("docs"), named("other")]).is_err());
        assert!(check(&servers, &[named("docs"), named("docs")]).is_err());
        assert!(
            super::servers(&[json!({"type": "stdio", "name": "x", "url": "https://a"})]).is_err()
        );
        assert!(
            super::servers(&[json!({"type": "url", "name": "a b", "url": "https://a"})]).is_err()
        );
        assert!(
            super::servers(&[json!({"type": "url", "name": "a", "url": "file:///etc"})]).is_err()
        );
        let auto = json!({"mcp_server_name": "docs", "default_config": {"permission_policy": {"type": "auto"}}});
        assert!(super::toolset(&auto).is_err());
        assert_eq!(
            split_call("docs__read", &["docs".into()]),
            Some(("docs", "read"))
        );
        assert_eq!(split_call("bash", &["docs".into()]), None);
        assert_eq!(split_call("other__read", &["docs".into()]), None);
    }
}
