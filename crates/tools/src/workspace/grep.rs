//! The `grep` tool: lines matching a regex in the workspace's text files.

use super::limits::{cut_line, looks_binary};
use super::walk::walk;
use super::{blocking, Workspace};
use globset::{GlobBuilder, GlobMatcher};
use pod_worker::{Tool, ToolContext, ToolOutput};
use regex::{Regex, RegexBuilder};
use serde::Deserialize;
use serde_json::Value;
use std::fmt::Write;
use std::path::Path;
use std::sync::Arc;
use tokio_util::sync::CancellationToken;

/// The tool's name.
pub const GREP: &str = "grep";

// A pattern compiling to more than this is refused: it would be slow on every
// line and is almost always a mistake.
const REGEX_SIZE_LIMIT: usize = 10 * 1024 * 1024;

/// Arguments of `grep`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GrepArgs {
    /// The regular expression.
    pub pattern: String,
    /// File or directory to search, relative to the root; the root when absent.
    #[serde(default)]
    pub path: Option<String>,
    /// Only files whose path (relative to `path`) matches this glob.
    #[serde(default)]
    pub glob: Option<String>,
    /// Match case-insensitively.
    #[serde(default)]
    pub case_insensitive: bool,
}

/// Searches file contents by regex.
#[derive(Clone, Debug)]
pub struct GrepTool {
    workspace: Workspace,
}

impl GrepTool {
    /// The tool over `workspace`.
    pub fn new(workspace: Workspace) -> Self {
        Self { workspace }
    }
}

#[async_trait::async_trait]
impl Tool for GrepTool {
    type Args = GrepArgs;

    fn name(&self) -> &str {
        GREP
    }

    fn description(&self) -> String {
        format!(
            "Search the workspace's text files for lines matching a regular expression (Rust \
             regex syntax, e.g. `fn \\w+_test`, `(?i)todo`). Files ignored by .gitignore and \
             binary files are skipped. Optional: path (a file or directory), glob (e.g. \
             `**/*.rs`), case_insensitive. Prints `path:line: text`; at most {} matches.",
            self.workspace.limits().grep_max_matches
        )
    }

    fn parameters(&self) -> Arc<Value> {
        pod_worker::schema!({
            "type": "object",
            "properties": {
                "pattern": {"type": "string", "description": "Regular expression."},
                "path": {"type": "string", "description": "File or directory to search (default: the root)."},
                "glob": {"type": "string", "description": "Only files matching this glob, e.g. **/*.rs"},
                "case_insensitive": {"type": "boolean", "default": false}
            },
            "required": ["pattern"],
            "additionalProperties": false
        })
    }

    fn concurrency_safe(&self) -> bool {
        true
    }

    async fn call(&self, args: GrepArgs, ctx: ToolContext) -> ToolOutput {
        let workspace = self.workspace.clone();
        blocking(crate::files::WALK_FILES, move || {
            grep(&workspace, &args, &ctx.cancel)
        })
        .await
    }
}

fn grep(workspace: &Workspace, args: &GrepArgs, cancel: &CancellationToken) -> ToolOutput {
    let regex = match RegexBuilder::new(&args.pattern)
        .case_insensitive(args.case_insensitive)
        .size_limit(REGEX_SIZE_LIMIT)
        .build()
    {
        Ok(regex) => regex,
        Err(err) => {
            return ToolOutput::error(format!(
                "grep failed: the pattern is not a valid regular expression: {err}. Escape \
                 special characters such as ( [ . * with a backslash to match them literally."
            ))
        }
    };
    let filter = match args.glob.as_deref().map(compile_glob).transpose() {
        Ok(filter) => filter,
        Err(message) => return ToolOutput::error(message),
    };
    let root = workspace.root();
    let base = match root.resolve_existing(args.path.as_deref().unwrap_or(".")) {
        Ok(base) => base,
        Err(err) => return ToolOutput::error(format!("grep failed: {err}.")),
    };
    let mut search = Search {
        workspace,
        regex,
        out: String::new(),
        matches: 0,
        more: 0,
    };
    for entry in walk(root, &base, None).flatten() {
        if cancel.is_cancelled() {
            return ToolOutput::error("grep stopped: the turn was cancelled.");
        }
        if !entry.file_type().is_some_and(|t| t.is_file()) {
            continue;
        }
        let path = entry.path();
        let relative_to_base = path.strip_prefix(&base).unwrap_or(path);
        if let Some(filter) = &filter {
            // A single-file search ignores the filter: the file was named.
            if entry.depth() > 0 && !filter.is_match(relative_to_base) {
                continue;
            }
        }
        search.file(path);
    }
    search.finish(&args.pattern)
}

fn compile_glob(pattern: &str) -> Result<GlobMatcher, String> {
    GlobBuilder::new(pattern)
        .literal_separator(true)
        .build()
        .map(|g| g.compile_matcher())
        .map_err(|err| format!("grep failed: the glob `{pattern}` is invalid ({err})."))
}

struct Search<'a> {
    workspace: &'a Workspace,
    regex: Regex,
    out: String,
    matches: usize,
    more: usize,
}

impl Search<'_> {
    fn file(&mut self, path: &Path) {
        let limits = self.workspace.limits();
        let too_big = path
            .metadata()
            .map_or(true, |m| m.len() > limits.file_max_bytes);
        if too_big {
            return;
        }
        let Ok(bytes) = std::fs::read(path) else {
            return;
        };
        if looks_binary(&bytes) {
            return;
        }
        let text = String::from_utf8_lossy(&bytes);
        let rel = self.workspace.root().relative(path);
        for (index, line) in text.lines().enumerate() {
            if !self.regex.is_match(line) {
                continue;
            }
            if self.matches >= limits.grep_max_matches {
                self.more += 1;
                continue;
            }
            self.matches += 1;
            // Matches are short lines of context, not whole lines of data.
            let shown = cut_line(line, limits.line_max_chars.min(300));
            // Writing to a String cannot fail.
            let _ = writeln!(self.out, "{rel}:{}: {shown}", index + 1);
        }
    }

    fn finish(mut self, pattern: &str) -> ToolOutput {
        if self.matches == 0 {
            return ToolOutput::ok(format!(
                "No matches for `{pattern}` (ignored and binary files are skipped)."
            ));
        }
        if self.more > 0 {
            let _ = write!(
                self.out,
                "[{} more matches not shown; at most {} are listed. Narrow the pattern, path or glob.]",
                self.more,
                self.workspace.limits().grep_max_matches
            );
        } else {
            self.out.pop();
        }
        ToolOutput::ok(self.out)
    }
}
