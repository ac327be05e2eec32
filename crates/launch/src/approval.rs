//! Which tool calls run without asking: the built-in defaults, then the
//! config file's `[approval]` table, then `--yes`, `--allow TOOL`,
//! `--deny TOOL`, resolved once. Who answers `ask` is the front end's.

use crate::error::LaunchError;
use pod::{ApprovalFlags, ApprovalPolicy};
use pod_providers::ConfigFile;

/// The tools a CLI session registers: the only names a policy can mean.
pub const KNOWN_TOOLS: &[&str] = &[
    pod_tools::READ_FILE,
    pod_tools::WRITE_FILE,
    pod_tools::EDIT_FILE,
    pod_tools::LIST_DIR,
    pod_tools::GLOB,
    pod_tools::GREP,
    pod_tools::BASH,
    pod_tools::TODO_WRITE,
    pod_tools::SKILL,
    pod::TASK,
    pod_tools::SCHEDULE_FOLLOWUP,
];

/// The session's policy: defaults, then `[approval]` from `file`, then the
/// flags. Under a sandbox the kernel enforces, `bash` defaults to allow (the
/// kernel holds the line); an `[approval]` entry for it or a flag still wins.
pub fn policy(
    file: &ConfigFile,
    args: &ApprovalFlags,
    sandboxed: bool,
) -> Result<ApprovalPolicy, LaunchError> {
    let mut policy = match &file.approval {
        Some(table) => {
            let policy: ApprovalPolicy =
                table
                    .clone()
                    .try_into()
                    .map_err(|source| LaunchError::Table {
                        what: "[approval] table".into(),
                        path: file.path.display().to_string(),
                        source: Box::new(source),
                    })?;
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
    policy.apply_flags(args);
    Ok(policy)
}

/// A typo would otherwise silently leave the tool at its default.
fn check_tool(tool: &str, source: &str) -> Result<(), LaunchError> {
    // MCP tools are named SERVER__TOOL; `SERVER__*` covers a server.
    if KNOWN_TOOLS.contains(&tool) || tool.contains(pod_mcp::names::SEPARATOR) {
        return Ok(());
    }
    Err(LaunchError::settings(
        format!("unknown tool `{tool}` in {source}"),
        format!(
            "the tools are: {}, and MCP tools as SERVER__TOOL or SERVER__*",
            KNOWN_TOOLS.join(", ")
        ),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use pod::ToolPolicy;
    use std::path::Path;

    fn file(text: &str) -> ConfigFile {
        ConfigFile::parse(text, Path::new("config.toml")).unwrap()
    }

    fn args(yes: bool, allow: &[&str], deny: &[&str]) -> ApprovalFlags {
        ApprovalFlags {
            yes,
            allow: allow.iter().map(|s| s.to_string()).collect(),
            deny: deny.iter().map(|s| s.to_string()).collect(),
            ask: Vec::new(),
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
        let policy = policy(&ConfigFile::default(), &ApprovalFlags::default(), false).unwrap();
        assert_eq!(policy, ApprovalPolicy::default());
    }

    #[test]
    fn under_an_enforced_sandbox_bash_allows_unless_told_otherwise() {
        let policy = policy(&ConfigFile::default(), &ApprovalFlags::default(), true).unwrap();
        assert_eq!(policy.get("bash"), ToolPolicy::Allow);
        assert_eq!(policy.get("write_file"), ToolPolicy::Ask);
        // The file's word for bash stands, and so does a flag.
        let file = file("[approval.tools]\nbash = \"ask\"\n");
        let policy = super::policy(&file, &ApprovalFlags::default(), true).unwrap();
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
        let err = policy(&bad, &ApprovalFlags::default(), false).unwrap_err();
        assert!(format!("{err:#}").contains("[approval]"), "{err:#}");
    }
}
