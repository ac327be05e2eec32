//! The `list_dir` tool: one directory's entries, minus ignored ones.

use super::walk::walk;
use super::{blocking, Workspace};
use pod_worker::{Tool, ToolContext, ToolOutput};
use serde::Deserialize;
use serde_json::Value;
use std::fmt::Write;
use std::sync::Arc;

/// The tool's name.
pub const LIST_DIR: &str = "list_dir";

/// Arguments of `list_dir`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ListDirArgs {
    /// Directory relative to the workspace root; the root when absent.
    #[serde(default)]
    pub path: Option<String>,
}

/// Lists a directory.
#[derive(Clone, Debug)]
pub struct ListDirTool {
    workspace: Workspace,
}

impl ListDirTool {
    /// The tool over `workspace`.
    pub fn new(workspace: Workspace) -> Self {
        Self { workspace }
    }
}

#[async_trait::async_trait]
impl Tool for ListDirTool {
    type Args = ListDirArgs;

    fn name(&self) -> &str {
        LIST_DIR
    }

    fn description(&self) -> String {
        format!(
            "List the entries of a workspace directory (the root when path is omitted). \
             Directories end with `/`, symlinks with `@`. Entries ignored by .gitignore are not \
             shown. At most {} entries.",
            self.workspace.limits().list_max_entries
        )
    }

    fn parameters(&self) -> Arc<Value> {
        pod_worker::schema!({
            "type": "object",
            "properties": {
                "path": {"type": "string", "description": "Directory relative to the workspace root (default: the root)."}
            },
            "additionalProperties": false
        })
    }

    fn concurrency_safe(&self) -> bool {
        true
    }

    async fn call(&self, args: ListDirArgs, _ctx: ToolContext) -> ToolOutput {
        let workspace = self.workspace.clone();
        blocking(crate::files::WALK_FILES, move || {
            list(&workspace, args.path.as_deref().unwrap_or("."))
        })
        .await
    }
}

fn list(workspace: &Workspace, given: &str) -> ToolOutput {
    let root = workspace.root();
    let dir = match root.resolve_existing(given) {
        Ok(dir) => dir,
        Err(err) => return ToolOutput::error(format!("list_dir failed: {err}.")),
    };
    let rel = root.relative(&dir);
    if !dir.is_dir() {
        return ToolOutput::error(format!(
            "list_dir failed: `{rel}` is a file, not a directory. Use read_file to read it."
        ));
    }
    let max = workspace.limits().list_max_entries;
    let mut names = Vec::new();
    let mut more = 0usize;
    for entry in walk(root, &dir, Some(1)).flatten() {
        if entry.depth() == 0 {
            continue;
        }
        if names.len() >= max {
            more += 1;
            continue;
        }
        let mut name = entry.file_name().to_string_lossy().into_owned();
        match entry.file_type() {
            Some(t) if t.is_symlink() => name.push('@'),
            Some(t) if t.is_dir() => name.push('/'),
            _ => {}
        }
        names.push(name);
    }
    if names.is_empty() {
        return ToolOutput::ok(format!("`{rel}` is empty (or holds only ignored entries)."));
    }
    let mut out = format!("`{rel}`:\n{}", names.join("\n"));
    if more > 0 {
        // Writing to a String cannot fail.
        let _ = write!(
            out,
            "\n[{more} more entries not shown; at most {max} are listed. Use glob with a \
             pattern to narrow the list.]"
        );
    }
    ToolOutput::ok(out)
}
