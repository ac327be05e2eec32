//! The `edit_file` tool: replaces an exact string in a file the model has
//! read and that has not changed since.

use super::write_file::{check_fresh, commit};
use super::{blocking, Workspace};
use pod_worker::{Tool, ToolContext, ToolOutput, ToolState};
use serde::Deserialize;
use serde_json::Value;
use std::sync::Arc;

/// The tool's name.
pub const EDIT_FILE: &str = "edit_file";

/// Arguments of `edit_file`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EditFileArgs {
    /// Path relative to the workspace root.
    pub path: String,
    /// The exact text to replace.
    pub old_string: String,
    /// What replaces it.
    pub new_string: String,
    /// Replace every occurrence instead of requiring exactly one.
    #[serde(default)]
    pub replace_all: bool,
}

/// Replaces an exact string in a file.
#[derive(Clone, Debug)]
pub struct EditFileTool {
    workspace: Workspace,
}

impl EditFileTool {
    /// The tool over `workspace`.
    pub fn new(workspace: Workspace) -> Self {
        Self { workspace }
    }
}

#[async_trait::async_trait]
impl Tool for EditFileTool {
    type Args = EditFileArgs;

    fn name(&self) -> &str {
        EDIT_FILE
    }

    fn description(&self) -> String {
        "Replace an exact string in a file of the workspace. old_string must match the file \
         exactly (whitespace and indentation included, without the line numbers read_file \
         shows) and occur exactly once, unless replace_all is true. Include enough surrounding \
         lines to make it unique. You must have read the file with read_file first, and it must \
         not have changed since."
            .into()
    }

    fn parameters(&self) -> Arc<Value> {
        pod_worker::schema!({
            "type": "object",
            "properties": {
                "path": {"type": "string", "description": "Path relative to the workspace root."},
                "old_string": {"type": "string", "description": "The exact text to replace."},
                "new_string": {"type": "string", "description": "The replacement text."},
                "replace_all": {"type": "boolean", "default": false, "description": "Replace every occurrence."}
            },
            "required": ["path", "old_string", "new_string"],
            "additionalProperties": false
        })
    }

    fn state(&self) -> Option<Arc<dyn ToolState>> {
        Some(self.workspace.tracker_state())
    }

    async fn call(&self, args: EditFileArgs, _ctx: ToolContext) -> ToolOutput {
        let workspace = self.workspace.clone();
        blocking(crate::files::FILE_FILES, move || edit(&workspace, &args)).await
    }
}

fn edit(workspace: &Workspace, args: &EditFileArgs) -> ToolOutput {
    if args.old_string.is_empty() {
        return ToolOutput::error(
            "edit_file failed: old_string is empty. Give the exact text to replace, or use \
             write_file to create a file or replace its whole content.",
        );
    }
    if args.old_string == args.new_string {
        return ToolOutput::error(
            "edit_file failed: old_string and new_string are identical, so nothing would change.",
        );
    }
    let root = workspace.root();
    let path = match root.resolve_existing(&args.path) {
        Ok(path) => path,
        Err(err) => {
            return ToolOutput::error(format!(
                "edit_file failed: {err}. To create a new file, use write_file."
            ))
        }
    };
    let rel = root.relative(&path);
    if path.is_dir() {
        return ToolOutput::error(format!(
            "edit_file failed: `{rel}` is a directory, not a file."
        ));
    }
    let bytes = match check_fresh(workspace, &path, &rel) {
        Ok(bytes) => bytes,
        Err(message) => return ToolOutput::error(format!("edit_file refused: {message}")),
    };
    let Ok(text) = String::from_utf8(bytes) else {
        return ToolOutput::error(format!(
            "edit_file failed: `{rel}` is not UTF-8 text; edit_file changes text files only."
        ));
    };
    let count = text.matches(args.old_string.as_str()).count();
    if count == 0 {
        return ToolOutput::error(format!(
            "edit_file failed: old_string was not found in `{rel}`. It must match exactly, \
             including whitespace and indentation, without read_file's line numbers. Read the \
             file again and copy the text exactly."
        ));
    }
    if count > 1 && !args.replace_all {
        return ToolOutput::error(format!(
            "edit_file failed: old_string occurs {count} times in `{rel}`. Add surrounding \
             lines to make it unique, or set replace_all to true to replace every occurrence."
        ));
    }
    let first_line = text
        .find(args.old_string.as_str())
        .map(|at| text[..at].matches('\n').count() + 1)
        .unwrap_or(1);
    let updated = if args.replace_all {
        text.replace(args.old_string.as_str(), &args.new_string)
    } else {
        text.replacen(args.old_string.as_str(), &args.new_string, 1)
    };
    match commit(&path, &rel, updated.as_bytes()) {
        Ok(meta) => {
            let what = if count == 1 {
                format!("1 occurrence at line {first_line}")
            } else {
                format!("{count} occurrences, the first at line {first_line}")
            };
            ToolOutput::ok(format!("Edited `{rel}`: replaced {what}.")).with_meta(meta.to_value())
        }
        Err(err) => ToolOutput::error(format!("edit_file failed: cannot write `{rel}`: {err}.")),
    }
}
