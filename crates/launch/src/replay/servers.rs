//! The MCP servers a replay starts: the session's recorded stdio servers
//! (local processes), each replaced by the server of the same name in the
//! `--mcp-config` files given (another command, or the env values a log
//! never holds). Servers over HTTP are not started (a replay needs no
//! network): their calls fail as unknown tools, a divergence. Servers the
//! recording did not have are not started either: its model never called
//! them.

use crate::error::LaunchError;
use pod_mcp::{RecordedServer, ServerConfig, Transport};
use std::path::PathBuf;

/// The servers to start for a recording that attached `recorded`, with
/// the replacements in `files`.
pub(crate) fn servers(
    recorded: &[RecordedServer],
    files: &[PathBuf],
) -> Result<Vec<ServerConfig>, LaunchError> {
    let mut given = Vec::new();
    for path in files {
        given.extend(pod_mcp::read_mcp_json(path).map_err(LaunchError::Mcp)?);
    }
    Ok(recorded
        .iter()
        .map(|server| {
            // The last file naming it wins, as with `--mcp-config` elsewhere.
            given
                .iter()
                .rev()
                .find(|other| other.name == server.name)
                .cloned()
                .unwrap_or_else(|| ServerConfig::new(server.name.clone(), server.transport.clone()))
        })
        .filter(|server| matches!(server.transport, Transport::Stdio { .. }))
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn stdio(name: &str, command: &str) -> RecordedServer {
        RecordedServer {
            name: name.into(),
            transport: Transport::Stdio {
                command: command.into(),
                args: Vec::new(),
                env: BTreeMap::new(),
                cwd: None,
            },
            env_names: Vec::new(),
        }
    }

    fn command(server: &ServerConfig) -> &str {
        match &server.transport {
            Transport::Stdio { command, .. } => command,
            Transport::Http { url, .. } => url,
        }
    }

    #[test]
    fn recorded_stdio_servers_start_replaced_by_name_and_http_ones_do_not() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("mcp.json");
        std::fs::write(
            &file,
            r#"{"mcpServers": {
                "notes": {"command": "/new/notes-server", "env": {"TOKEN": "t"}},
                "web": {"command": "/local/web"},
                "extra": {"command": "/not/recorded"}
            }}"#,
        )
        .unwrap();
        let recorded = vec![
            stdio("notes", "/old/notes-server"),
            stdio("files", "/usr/bin/files-server"),
            RecordedServer {
                name: "remote".into(),
                transport: Transport::Http {
                    url: "https://mcp.example.com".into(),
                    headers: BTreeMap::new(),
                },
                env_names: Vec::new(),
            },
        ];
        let started = servers(&recorded, &[file]).unwrap();
        let names: Vec<(&str, &str)> = started
            .iter()
            .map(|s| (s.name.as_str(), command(s)))
            .collect();
        assert_eq!(
            names,
            [
                ("notes", "/new/notes-server"),
                ("files", "/usr/bin/files-server")
            ]
        );
        // The replacement brings the env values the log does not hold.
        let Transport::Stdio { env, .. } = &started[0].transport else {
            panic!("stdio");
        };
        assert_eq!(env.get("TOKEN").map(String::as_str), Some("t"));
    }

    #[test]
    fn an_unreadable_server_file_is_an_error() {
        let err = servers(&[], &[PathBuf::from("/nonexistent/mcp.json")]).unwrap_err();
        let chain = pod_llm::error_chain(&err);
        assert!(chain.contains("/nonexistent/mcp.json"), "{chain}");
    }
}
