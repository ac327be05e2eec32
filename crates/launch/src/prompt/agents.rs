//! Agent definitions in Claude Code's subagent format: a Markdown file
//! whose front matter gives `name`, `description`, `tools` (Claude Code's
//! names, comma-separated) and `model`, and whose body is the agent's
//! instructions.
//!
//! Read from `agents/` in pod's config directory and, when the operator
//! opts in, the workspace's `.claude/agents/` and `.pod/agents/`. An
//! operator's agent wins over a workspace's of the same name: a workspace
//! cannot redefine what the operator named.

use super::frontmatter;
use super::RecordedAgent;
use crate::error::LaunchError;
use std::path::{Path, PathBuf};

/// The workspace's agent directories read when opted in, in order.
pub const WORKSPACE_DIRS: [&str; 2] = [".claude/agents", ".pod/agents"];

/// Front matter fields pod reads; others are ignored with a warning.
const KNOWN: [&str; 4] = ["name", "description", "tools", "model"];

/// The agents in `dirs`, the first of a name winning, with warnings for
/// what was ignored.
pub(crate) fn discover(
    dirs: &[PathBuf],
    warnings: &mut Vec<String>,
) -> Result<Vec<RecordedAgent>, LaunchError> {
    let mut agents: Vec<RecordedAgent> = Vec::new();
    for dir in dirs {
        for path in markdown_files(dir) {
            let agent = read(&path, warnings)?;
            match agents.iter().find(|a| a.name == agent.name) {
                Some(first) => warnings.push(format!(
                    "agent `{}` in {} is ignored: {} defines it first",
                    agent.name,
                    path.display(),
                    first.source.display()
                )),
                None => agents.push(agent),
            }
        }
    }
    Ok(agents)
}

/// The `*.md` files of `dir`, sorted (none when it does not exist).
fn markdown_files(dir: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut files: Vec<PathBuf> = entries
        .flatten()
        .map(|entry| entry.path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "md") && path.is_file())
        .collect();
    files.sort();
    files
}

/// The agent defined at `path`.
pub(crate) fn read(path: &Path, warnings: &mut Vec<String>) -> Result<RecordedAgent, LaunchError> {
    let hint = "fix the file (docs/instructions.md shows the format), or remove it";
    let text = std::fs::read_to_string(path).map_err(|err| {
        LaunchError::settings(
            format!("cannot read the agent file {}: {err}", path.display()),
            hint,
        )
    })?;
    let doc = frontmatter::parse(&text).map_err(|err| {
        LaunchError::settings(
            format!("{}:{}: {}", path.display(), err.line, err.message),
            hint,
        )
    })?;
    for field in &doc.fields {
        if !KNOWN.contains(&field.key.as_str()) {
            warnings.push(format!(
                "{}:{}: `{}` is ignored (pod reads name, description, tools and model)",
                path.display(),
                field.line,
                field.key
            ));
        }
    }
    let required = |key: &str| {
        doc.get(key)
            .map(|f| f.value.text())
            .filter(|text| !text.trim().is_empty())
            .ok_or_else(|| {
                LaunchError::settings(
                    format!("{}:1: the agent has no `{key}`", path.display()),
                    hint,
                )
            })
    };
    let name = required("name")?;
    let description = required("description")?;
    let tools = doc.get("tools").map(|field| {
        let mut tools = Vec::new();
        for given in field.value.items() {
            match tool_name(&given) {
                Some(tool) if !tools.contains(&tool) => tools.push(tool),
                Some(_) => {}
                None => warnings.push(format!(
                    "{}:{}: tool `{given}` is not one pod has; the agent goes without it",
                    path.display(),
                    field.line
                )),
            }
        }
        tools
    });
    let model = doc
        .get("model")
        .map(|f| f.value.text())
        .filter(|m| !m.is_empty() && m != "inherit");
    Ok(RecordedAgent {
        name,
        description,
        prompt: doc.body.trim().to_string(),
        tools,
        model,
        client_tools: Vec::new(),
        source: path.to_path_buf(),
    })
}

/// pod's name for a tool as Claude Code (or pod) names it; `None` for a
/// tool pod does not have.
pub(crate) fn tool_name(given: &str) -> Option<String> {
    let mapped = match given {
        "Read" | "NotebookRead" => pod_tools::READ_FILE,
        "Write" => pod_tools::WRITE_FILE,
        "Edit" | "MultiEdit" | "NotebookEdit" => pod_tools::EDIT_FILE,
        "Bash" => pod_tools::BASH,
        "Grep" => pod_tools::GREP,
        "Glob" => pod_tools::GLOB,
        "LS" => pod_tools::LIST_DIR,
        "TodoWrite" => pod_tools::TODO_WRITE,
        "Task" | "Agent" => pod::TASK,
        "Skill" => pod_tools::SKILL,
        other if crate::KNOWN_TOOLS.contains(&other) => other,
        other => {
            // Claude Code names an MCP server's tool mcp__SERVER__TOOL;
            // pod names it SERVER__TOOL.
            let sep = pod_mcp::names::SEPARATOR;
            return match other.strip_prefix("mcp__") {
                Some(rest) if rest.contains(sep) => Some(rest.to_string()),
                _ if other.contains(sep) => Some(other.to_string()),
                _ => None,
            };
        }
    };
    Some(mapped.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_claude_code_agent_file_reads_with_pods_tool_names() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("reviewer.md");
        std::fs::write(
            &path,
            "---\nname: reviewer\ndescription: Reviews diffs\ntools: Read, Grep, WebFetch\n\
             model: inherit\ncolor: red\n---\nYou review code.\n",
        )
        .unwrap();
        let mut warnings = Vec::new();
        let agent = read(&path, &mut warnings).unwrap();
        assert_eq!(agent.name, "reviewer");
        assert_eq!(
            agent.tools.as_deref(),
            Some(&["read_file".to_string(), "grep".into()][..])
        );
        assert_eq!(agent.model, None);
        assert_eq!(agent.prompt, "You review code.");
        assert_eq!(warnings.len(), 2, "{warnings:?}");
        assert!(warnings.iter().any(|w| w.contains("WebFetch")));
        assert!(warnings
            .iter()
            .any(|w| w.contains(":6: `color` is ignored")));
    }

    #[test]
    fn a_bad_file_is_an_error_naming_file_and_line() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("bad.md");
        std::fs::write(&path, "---\nname: x\ndescription: y\nnot a field\n---\n").unwrap();
        let err = read(&path, &mut Vec::new()).unwrap_err().to_string();
        assert!(err.contains("bad.md:4:"), "{err}");
        std::fs::write(&path, "---\nname: x\n---\n").unwrap();
        let err = read(&path, &mut Vec::new()).unwrap_err().to_string();
        assert!(err.contains("no `description`"), "{err}");
    }
}
