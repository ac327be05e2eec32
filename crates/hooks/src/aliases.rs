//! pod's tool names and arguments as Claude Code's hooks know them.
//!
//! A hook written for Claude Code matches `Bash` or `Write|Edit` and reads
//! `tool_input.command` or `tool_input.file_path`. pod's tools have other
//! names (`bash`, `write_file`) and call a path `path` (relative to the
//! workspace). Matchers are tried against both names; the input a hook
//! gets carries Claude Code's name and, beside pod's own fields, the ones
//! Claude Code's scripts read; an `updatedInput` written in either shape is
//! turned back into pod's.

use serde_json::{Map, Value};
use std::path::Path;

/// pod's builtin tools and their Claude Code names.
const NAMES: &[(&str, &str)] = &[
    ("bash", "Bash"),
    ("read_file", "Read"),
    ("write_file", "Write"),
    ("edit_file", "Edit"),
    ("grep", "Grep"),
    ("glob", "Glob"),
    ("list_dir", "LS"),
    ("task", "Task"),
    ("todo_write", "TodoWrite"),
];

/// The separator of an MCP tool's name in pod (`SERVER__TOOL`).
const MCP_SEPARATOR: &str = "__";

/// Claude Code's name for pod's tool `name`: `Bash` for `bash`,
/// `mcp__SERVER__TOOL` for the MCP tool `SERVER__TOOL`; `None` for a tool
/// Claude Code has no name for.
pub fn claude_name(name: &str) -> Option<String> {
    if let Some((_, claude)) = NAMES.iter().find(|(pod, _)| *pod == name) {
        return Some((*claude).to_string());
    }
    name.contains(MCP_SEPARATOR)
        .then(|| format!("mcp{MCP_SEPARATOR}{name}"))
}

/// pod's name for a name a hook may use (`Bash` → `bash`,
/// `mcp__s__t` → `s__t`); other names are returned as they are.
pub fn pod_name(name: &str) -> String {
    if let Some((pod, _)) = NAMES.iter().find(|(_, claude)| *claude == name) {
        return (*pod).to_string();
    }
    match name.strip_prefix("mcp__") {
        Some(rest) if rest.contains(MCP_SEPARATOR) => rest.to_string(),
        _ => name.to_string(),
    }
}

/// The input a hook gets for a call of pod's tool `name` with `arguments`:
/// the arguments, plus `file_path` (absolute, under `workspace`) for the
/// file tools, as Claude Code's scripts read it. Arguments that are not a
/// JSON object are passed as they are (a string when not JSON at all).
pub fn to_claude_input(name: &str, arguments: &str, workspace: &Path) -> Value {
    let value: Value = match serde_json::from_str(arguments) {
        Ok(value) => value,
        Err(_) => return Value::String(arguments.to_string()),
    };
    let Value::Object(mut fields) = value else {
        return value;
    };
    if matches!(name, "read_file" | "write_file" | "edit_file") {
        if let Some(path) = fields.get("path").and_then(Value::as_str) {
            let absolute = workspace.join(path);
            fields.insert(
                "file_path".into(),
                Value::String(absolute.to_string_lossy().into_owned()),
            );
        }
    }
    Value::Object(fields)
}

/// pod's arguments for a call of tool `name` (made with `original`) from
/// an `updatedInput` a hook wrote: for the file tools a `file_path` the
/// hook changed becomes `path` (relative to `workspace` when under it), and
/// `file_path` is dropped; other fields are kept.
pub fn to_pod_input(name: &str, input: &Value, original: &str, workspace: &Path) -> String {
    let Value::Object(fields) = input else {
        return input.to_string();
    };
    let mut fields: Map<String, Value> = fields.clone();
    if matches!(name, "read_file" | "write_file" | "edit_file") {
        let given = to_claude_input(name, original, workspace);
        if let Some(Value::String(file_path)) = fields.remove("file_path") {
            // A script written for pod may change `path` and pass the
            // `file_path` it got along unchanged: then `path` holds.
            if given.get("file_path").and_then(Value::as_str) != Some(file_path.as_str())
                || !fields.contains_key("path")
            {
                let path = Path::new(&file_path);
                let path = path.strip_prefix(workspace).unwrap_or(path);
                fields.insert(
                    "path".into(),
                    Value::String(path.to_string_lossy().into_owned()),
                );
            }
        }
    }
    Value::Object(fields).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn names_go_both_ways() {
        assert_eq!(claude_name("bash").as_deref(), Some("Bash"));
        assert_eq!(
            claude_name("github__create_issue").as_deref(),
            Some("mcp__github__create_issue")
        );
        assert_eq!(claude_name("my_tool"), None);
        assert_eq!(pod_name("Write"), "write_file");
        assert_eq!(
            pod_name("mcp__github__create_issue"),
            "github__create_issue"
        );
        assert_eq!(pod_name("edit_file"), "edit_file");
    }

    #[test]
    fn file_tools_get_claude_codes_file_path_and_take_it_back() {
        let workspace = Path::new("/w");
        let input = to_claude_input(
            "write_file",
            r#"{"path":"a/b.txt","content":"x"}"#,
            workspace,
        );
        assert_eq!(
            input,
            json!({"path": "a/b.txt", "content": "x", "file_path": "/w/a/b.txt"})
        );
        let original = r#"{"path":"a/b.txt","content":"x"}"#;
        let back = |input: Value| -> Value {
            serde_json::from_str(&to_pod_input("write_file", &input, original, workspace)).unwrap()
        };
        // Claude Code's shape.
        assert_eq!(
            back(json!({"file_path": "/w/c.txt", "content": "y"})),
            json!({"content": "y", "path": "c.txt"})
        );
        // The whole input edited the Claude Code way, pod's `path` left.
        assert_eq!(
            back(json!({"path": "a/b.txt", "file_path": "/w/d.txt", "content": "x"})),
            json!({"path": "d.txt", "content": "x"})
        );
        // Edited the pod way, `file_path` passed along unchanged.
        assert_eq!(
            back(json!({"path": "e.txt", "file_path": "/w/a/b.txt", "content": "x"})),
            json!({"path": "e.txt", "content": "x"})
        );
        let bash = to_claude_input("bash", r#"{"command":"ls"}"#, workspace);
        assert_eq!(bash, json!({"command": "ls"}));
        assert_eq!(
            to_claude_input("bash", "not json", workspace),
            json!("not json")
        );
    }
}
