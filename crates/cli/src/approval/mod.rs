//! Which tool calls run without asking, and who answers when one asks.
//!
//! The policy is resolved once: the built-in defaults, then the config
//! file's `[approval]` table, then `--yes`, `--allow TOOL`, `--deny TOOL`.
//! When stdin and stderr are terminals (and the output is not `--json`),
//! `ask` prompts on stderr ([`terminal`]); otherwise there is no approver
//! and the Pod refuses `ask` tools with a message naming `--yes`/`--allow`.

pub mod prompt;
pub mod terminal;

use crate::cli::ApprovalArgs;
use crate::error::Failure;
use anyhow::{bail, Context, Result};
use pod::{ApprovalFlags, ApprovalPolicy};
use pod_providers::ConfigFile;
use std::io::IsTerminal;

/// The tools a CLI session registers: the only names a policy can mean.
const KNOWN_TOOLS: &[&str] = &[
    pod_tools::READ_FILE,
    pod_tools::WRITE_FILE,
    pod_tools::EDIT_FILE,
    pod_tools::LIST_DIR,
    pod_tools::GLOB,
    pod_tools::GREP,
    pod_tools::BASH,
    pod_tools::TODO_WRITE,
    pod::TASK,
];

/// The session's policy: defaults, then `[approval]` from `file`, then the
/// flags. Under a sandbox the kernel enforces, `bash` defaults to allow (the
/// kernel holds the line); an `[approval]` entry for it or a flag still wins.
pub fn policy(file: &ConfigFile, args: &ApprovalArgs, sandboxed: bool) -> Result<ApprovalPolicy> {
    let mut policy = match &file.approval {
        Some(table) => {
            let policy: ApprovalPolicy = table
                .clone()
                .try_into()
                .context("invalid [approval] table in the config file")?;
            for tool in policy.tools.keys() {
                check_tool(tool, "[approval.tools] in the config file")?;
            }
            policy
        }
        None => ApprovalPolicy::default(),
    };
    let bash_in_file = file
        .approval
        .as_ref()
        .and_then(|table| table.get("tools"))
        .and_then(|tools| tools.get(pod_tools::BASH))
        .is_some();
    if sandboxed && !bash_in_file {
        policy.set(pod_tools::BASH, pod::ToolPolicy::Allow);
    }
    for tool in args.allow.iter().chain(&args.deny) {
        check_tool(tool, "--allow/--deny")?;
    }
    policy.apply_flags(&ApprovalFlags {
        yes: args.yes,
        allow: args.allow.clone(),
        deny: args.deny.clone(),
    });
    Ok(policy)
}

/// A typo would otherwise silently leave the tool at its default.
fn check_tool(tool: &str, source: &str) -> Result<()> {
    // MCP tools are named SERVER__TOOL; `SERVER__*` covers a server.
    if KNOWN_TOOLS.contains(&tool) || tool.contains(pod_mcp::names::SEPARATOR) {
        return Ok(());
    }
    bail!(Failure::new(
        format!("unknown tool `{tool}` in {source}"),
        format!(
            "the tools are: {}, and MCP tools as SERVER__TOOL or SERVER__*",
            KNOWN_TOOLS.join(", ")
        )
    ))
}

/// Gives `config` the terminal approver when the session is interactive;
/// returns the questions for the drive loop (`None`: `ask` tools are refused).
pub fn attach(config: &mut pod::PodConfig, json: bool) -> crate::drive::Asks {
    if !interactive(json) {
        return None;
    }
    let (approver, asks) = terminal::channel();
    config.approver = Some(std::sync::Arc::new(approver));
    Some(asks)
}

/// Whether `ask` can prompt: stdin and stderr are terminals and stdout is
/// not a `--json` stream (a script reading it cannot answer).
pub fn interactive(json: bool) -> bool {
    !json && std::io::stdin().is_terminal() && std::io::stderr().is_terminal()
}

#[cfg(test)]
mod tests {
    use super::*;
    use pod::ToolPolicy;
    use std::path::Path;

    fn file(text: &str) -> ConfigFile {
        ConfigFile::parse(text, Path::new("config.toml")).unwrap()
    }

    fn args(yes: bool, allow: &[&str], deny: &[&str]) -> ApprovalArgs {
        ApprovalArgs {
            yes,
            allow: allow.iter().map(|s| s.to_string()).collect(),
            deny: deny.iter().map(|s| s.to_string()).collect(),
        }
    }

    #[test]
    fn the_file_is_laid_over_the_defaults_and_flags_over_the_file() {
        let file = file("[approval.tools]\nbash = \"allow\"\nread_file = \"deny\"\n");
        let policy = policy(&file, &args(false, &[], &[]), false).unwrap();
        assert_eq!(policy.get("bash"), ToolPolicy::Allow);
        assert_eq!(policy.get("read_file"), ToolPolicy::Deny);
        assert_eq!(policy.get("edit_file"), ToolPolicy::Ask);

        let policy = super::policy(&file, &args(true, &["read_file"], &["bash"]), false).unwrap();
        assert_eq!(policy.get("bash"), ToolPolicy::Deny);
        assert_eq!(policy.get("read_file"), ToolPolicy::Allow);
        assert_eq!(policy.get("edit_file"), ToolPolicy::Allow);
    }

    #[test]
    fn without_a_table_or_flags_writes_ask() {
        let policy = policy(&ConfigFile::default(), &ApprovalArgs::default(), false).unwrap();
        assert_eq!(policy, ApprovalPolicy::default());
    }

    #[test]
    fn under_an_enforced_sandbox_bash_allows_unless_told_otherwise() {
        let policy = policy(&ConfigFile::default(), &ApprovalArgs::default(), true).unwrap();
        assert_eq!(policy.get("bash"), ToolPolicy::Allow);
        assert_eq!(policy.get("write_file"), ToolPolicy::Ask);
        // The file's word for bash stands, and so does a flag.
        let file = file("[approval.tools]\nbash = \"ask\"\n");
        let policy = super::policy(&file, &ApprovalArgs::default(), true).unwrap();
        assert_eq!(policy.get("bash"), ToolPolicy::Ask);
        let policy =
            super::policy(&ConfigFile::default(), &args(false, &[], &["bash"]), true).unwrap();
        assert_eq!(policy.get("bash"), ToolPolicy::Deny);
    }

    #[test]
    fn unknown_tools_and_policies_are_errors() {
        let err = policy(&ConfigFile::default(), &args(false, &["bsh"], &[]), false).unwrap_err();
        assert!(err.to_string().contains("unknown tool `bsh`"), "{err}");
        let bad = file("[approval.tools]\nbash = \"maybe\"\n");
        let err = policy(&bad, &ApprovalArgs::default(), false).unwrap_err();
        assert!(format!("{err:#}").contains("[approval]"), "{err:#}");
    }
}
