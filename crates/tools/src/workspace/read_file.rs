//! The `read_file` tool: numbered lines of a text file, and the tracker's
//! record that the model has seen it.

use super::limits::{cut_line, looks_binary};
use super::tracker::{FileMeta, FileStamp};
use super::{blocking, Workspace};
use pod_worker::{Tool, ToolContext, ToolOutput, ToolState};
use serde::Deserialize;
use serde_json::Value;
use std::fmt::Write;
use std::sync::Arc;

/// The tool's name.
pub const READ_FILE: &str = "read_file";

/// Arguments of `read_file`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReadFileArgs {
    /// Path relative to the workspace root.
    pub path: String,
    /// First line to show, 1-based.
    #[serde(default)]
    pub start_line: Option<usize>,
    /// Last line to show, inclusive.
    #[serde(default)]
    pub end_line: Option<usize>,
}

/// Reads a text file with line numbers.
#[derive(Clone, Debug)]
pub struct ReadFileTool {
    workspace: Workspace,
}

impl ReadFileTool {
    /// The tool over `workspace`.
    pub fn new(workspace: Workspace) -> Self {
        Self { workspace }
    }
}

#[async_trait::async_trait]
impl Tool for ReadFileTool {
    type Args = ReadFileArgs;

    fn name(&self) -> &str {
        READ_FILE
    }

    fn description(&self) -> String {
        let limits = self.workspace.limits();
        format!(
            "Read a text file of the workspace. Lines are numbered (the number and a tab come \
             before each line; they are not part of the file). Give start_line/end_line \
             (1-based, inclusive) to read part of a large file. At most {} lines or {} bytes \
             are shown per call, lines longer than {} characters are cut; the result says so \
             and where to continue. You must read a file before you edit or overwrite it.",
            limits.read_max_lines, limits.read_max_bytes, limits.line_max_chars
        )
    }

    fn parameters(&self) -> Arc<Value> {
        pod_worker::schema!({
            "type": "object",
            "properties": {
                "path": {"type": "string", "description": "Path relative to the workspace root."},
                "start_line": {"type": "integer", "minimum": 1, "description": "First line to show (1-based)."},
                "end_line": {"type": "integer", "minimum": 1, "description": "Last line to show (inclusive)."}
            },
            "required": ["path"],
            "additionalProperties": false
        })
    }

    fn concurrency_safe(&self) -> bool {
        true
    }

    fn state(&self) -> Option<Arc<dyn ToolState>> {
        Some(self.workspace.tracker_state())
    }

    async fn call(&self, args: ReadFileArgs, _ctx: ToolContext) -> ToolOutput {
        let workspace = self.workspace.clone();
        blocking(crate::files::FILE_FILES, move || read(&workspace, &args)).await
    }
}

fn read(workspace: &Workspace, args: &ReadFileArgs) -> ToolOutput {
    let root = workspace.root();
    let limits = workspace.limits();
    let path = match root.resolve_existing(&args.path) {
        Ok(path) => path,
        Err(err) => return ToolOutput::error(format!("read_file failed: {err}.")),
    };
    let rel = root.relative(&path);
    let metadata = match path.metadata() {
        Ok(m) => m,
        Err(err) => {
            return ToolOutput::error(format!("read_file failed: cannot stat `{rel}`: {err}."))
        }
    };
    if metadata.is_dir() {
        return ToolOutput::error(format!(
            "`{rel}` is a directory, not a file. Use list_dir to see what it contains."
        ));
    }
    if metadata.len() > limits.file_max_bytes {
        return ToolOutput::error(format!(
            "`{rel}` is {} bytes, more than read_file loads ({} bytes). Use grep to find the \
             part you need, or bash with head, tail or sed -n to print a slice.",
            metadata.len(),
            limits.file_max_bytes
        ));
    }
    let bytes = match std::fs::read(&path) {
        Ok(b) => b,
        Err(err) => {
            return ToolOutput::error(format!("read_file failed: cannot read `{rel}`: {err}."))
        }
    };
    if looks_binary(&bytes) {
        return ToolOutput::error(format!(
            "`{rel}` is a binary file ({} bytes); read_file shows text only. Use bash (for \
             example `file {rel}` or `xxd {rel} | head`) to inspect it.",
            bytes.len()
        ));
    }
    let Ok(text) = std::str::from_utf8(&bytes) else {
        return ToolOutput::error(format!(
            "`{rel}` is not valid UTF-8 text; read_file shows UTF-8 only. Use bash (for example \
             `iconv -f latin1 -t utf-8 {rel}`) to inspect it."
        ));
    };
    let meta = FileMeta {
        path: rel.clone(),
        stamp: FileStamp::new(&bytes, Some(&metadata)),
    };
    match render(&rel, text, args, workspace) {
        // The tracker records the stamp when this result is committed.
        Ok(content) => ToolOutput::ok(content).with_meta(meta.to_value()),
        Err(message) => ToolOutput::error(message),
    }
}

fn render(
    rel: &str,
    text: &str,
    args: &ReadFileArgs,
    workspace: &Workspace,
) -> Result<String, String> {
    let limits = workspace.limits();
    let lines: Vec<&str> = text.lines().collect();
    let total = lines.len();
    if total == 0 {
        return Ok(format!("`{rel}` is empty (0 lines)."));
    }
    let start = args.start_line.unwrap_or(1);
    if start == 0 {
        return Err("read_file failed: start_line is 1-based; use 1 for the first line.".into());
    }
    if start > total {
        return Err(format!(
            "read_file failed: start_line {start} is past the end of `{rel}`, which has {total} lines."
        ));
    }
    let end = args.end_line.unwrap_or(total).min(total);
    if end < start {
        return Err(format!(
            "read_file failed: end_line {end} is before start_line {start}; give end_line >= start_line."
        ));
    }
    let mut out = String::new();
    let mut shown_end = start - 1;
    let mut cut_reason = None;
    for (index, line) in lines[start - 1..end].iter().enumerate() {
        let number = start + index;
        if index >= limits.read_max_lines {
            cut_reason = Some(format!("{} lines", limits.read_max_lines));
            break;
        }
        let rendered = cut_line(line, limits.line_max_chars);
        if out.len() + rendered.len() > limits.read_max_bytes && number > start {
            cut_reason = Some(format!("{} bytes", limits.read_max_bytes));
            break;
        }
        // Writing to a String cannot fail.
        let _ = writeln!(out, "{number:>6}\t{rendered}");
        shown_end = number;
    }
    match cut_reason {
        Some(reason) => {
            let _ = write!(
                out,
                "[Output cut at {reason}: showing lines {start}-{shown_end} of {total}. Call \
                 read_file with start_line={} to continue.]",
                shown_end + 1
            );
        }
        None if start > 1 || end < total => {
            let _ = write!(out, "[Showing lines {start}-{end} of {total}.]");
        }
        None => {
            out.pop();
        }
    }
    Ok(out)
}
