//! The `write_file` tool: creates a file, or overwrites one the model has
//! read and that has not changed since.

use super::tracker::{FileMeta, FileStamp};
use super::{blocking, Workspace};
use pod_worker::{Tool, ToolContext, ToolOutput, ToolState};
use serde::Deserialize;
use serde_json::Value;
use std::path::Path;
use std::sync::Arc;

/// The tool's name.
pub const WRITE_FILE: &str = "write_file";

/// Arguments of `write_file`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WriteFileArgs {
    /// Path relative to the workspace root.
    pub path: String,
    /// The whole new content.
    pub content: String,
}

/// Creates or overwrites a file.
#[derive(Clone, Debug)]
pub struct WriteFileTool {
    workspace: Workspace,
}

impl WriteFileTool {
    /// The tool over `workspace`.
    pub fn new(workspace: Workspace) -> Self {
        Self { workspace }
    }
}

#[async_trait::async_trait]
impl Tool for WriteFileTool {
    type Args = WriteFileArgs;

    fn name(&self) -> &str {
        WRITE_FILE
    }

    fn description(&self) -> String {
        "Create a file, or replace the whole content of one, in the workspace. Missing parent \
         directories are created. To overwrite an existing file you must have read it with \
         read_file first (and it must not have changed since). Prefer edit_file for changes \
         to part of a file."
            .into()
    }

    fn parameters(&self) -> Arc<Value> {
        pod_worker::schema!({
            "type": "object",
            "properties": {
                "path": {"type": "string", "description": "Path relative to the workspace root."},
                "content": {"type": "string", "description": "The complete new content of the file."}
            },
            "required": ["path", "content"],
            "additionalProperties": false
        })
    }

    fn state(&self) -> Option<Arc<dyn ToolState>> {
        Some(self.workspace.tracker_state())
    }

    async fn call(&self, args: WriteFileArgs, _ctx: ToolContext) -> ToolOutput {
        let workspace = self.workspace.clone();
        blocking(crate::files::FILE_FILES, move || write(&workspace, &args)).await
    }
}

fn write(workspace: &Workspace, args: &WriteFileArgs) -> ToolOutput {
    let root = workspace.root();
    let path = match root.resolve_for_write(&args.path) {
        Ok(path) => path,
        Err(err) => return ToolOutput::error(format!("write_file failed: {err}.")),
    };
    let rel = root.relative(&path);
    let max = workspace.limits().file_max_bytes;
    if args.content.len() as u64 > max {
        return ToolOutput::error(format!(
            "write_file failed: the content is {} bytes, more than the {max} bytes allowed in \
             one file. Split it into several files.",
            args.content.len()
        ));
    }
    let existed = match path.symlink_metadata() {
        Ok(m) if m.is_dir() => {
            return ToolOutput::error(format!(
                "write_file failed: `{rel}` is a directory. Give a file path."
            ))
        }
        Ok(_) => true,
        Err(_) => false,
    };
    if existed {
        if let Err(message) = check_fresh(workspace, &path, &rel) {
            return ToolOutput::error(format!("write_file refused: {message}"));
        }
    }
    if let Some(parent) = path.parent() {
        if let Err(err) = std::fs::create_dir_all(parent) {
            return ToolOutput::error(format!(
                "write_file failed: cannot create the directory of `{rel}`: {err}."
            ));
        }
    }
    match commit(&path, &rel, args.content.as_bytes()) {
        Ok(meta) => {
            let verb = if existed { "Overwrote" } else { "Created" };
            let lines = args.content.lines().count();
            ToolOutput::ok(format!(
                "{verb} `{rel}` ({} bytes, {lines} {}).",
                args.content.len(),
                if lines == 1 { "line" } else { "lines" }
            ))
            .with_meta(meta.to_value())
        }
        Err(err) => ToolOutput::error(format!("write_file failed: cannot write `{rel}`: {err}.")),
    }
}

/// Checks that the model knows the current content of an existing file.
pub(crate) fn check_fresh(
    workspace: &Workspace,
    path: &Path,
    rel: &str,
) -> Result<Vec<u8>, String> {
    let bytes = std::fs::read(path).map_err(|err| format!("cannot read `{rel}`: {err}."))?;
    let current = FileStamp::new(&bytes, None);
    workspace
        .tracker()
        .check_writable(rel, &current)
        .map_err(|err| format!("{err}."))?;
    Ok(bytes)
}

/// Writes `content` and returns the stamp the tracker records once the
/// result is committed.
pub(crate) fn commit(path: &Path, rel: &str, content: &[u8]) -> std::io::Result<FileMeta> {
    std::fs::write(path, content)?;
    let metadata = path.metadata().ok();
    let meta = FileMeta {
        path: rel.to_string(),
        stamp: FileStamp::new(content, metadata.as_ref()),
    };
    Ok(meta)
}
