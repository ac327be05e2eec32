//! The `glob` tool: files matching a pattern, minus ignored ones.

use super::walk::walk;
use super::{blocking, Workspace};
use globset::GlobBuilder;
use pod_worker::{Tool, ToolContext, ToolOutput};
use serde::Deserialize;
use serde_json::Value;
use std::fmt::Write;
use std::sync::Arc;

/// The tool's name.
pub const GLOB: &str = "glob";

/// Arguments of `glob`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GlobArgs {
    /// The pattern, matched against paths relative to `path`.
    pub pattern: String,
    /// Directory to search, relative to the workspace root; the root when absent.
    #[serde(default)]
    pub path: Option<String>,
}

/// Finds files by glob pattern.
#[derive(Clone, Debug)]
pub struct GlobTool {
    workspace: Workspace,
}

impl GlobTool {
    /// The tool over `workspace`.
    pub fn new(workspace: Workspace) -> Self {
        Self { workspace }
    }
}

#[async_trait::async_trait]
impl Tool for GlobTool {
    type Args = GlobArgs;

    fn name(&self) -> &str {
        GLOB
    }

    fn description(&self) -> String {
        format!(
            "Find files in the workspace by glob pattern, matched against paths relative to \
             `path` (default: the root): `*` stays within one directory, `**` crosses \
             directories, `{{a,b}}` alternates (e.g. `**/*.rs`, `src/**/mod.{{rs,toml}}`). \
             Files ignored by .gitignore are skipped. Paths are returned relative to the \
             workspace root, sorted; at most {}.",
            self.workspace.limits().list_max_entries
        )
    }

    fn parameters(&self) -> Arc<Value> {
        pod_worker::schema!({
            "type": "object",
            "properties": {
                "pattern": {"type": "string", "description": "Glob pattern, e.g. **/*.rs"},
                "path": {"type": "string", "description": "Directory to search (default: the root)."}
            },
            "required": ["pattern"],
            "additionalProperties": false
        })
    }

    fn concurrency_safe(&self) -> bool {
        true
    }

    async fn call(&self, args: GlobArgs, _ctx: ToolContext) -> ToolOutput {
        let workspace = self.workspace.clone();
        blocking(crate::files::WALK_FILES, move || glob(&workspace, &args)).await
    }
}

fn glob(workspace: &Workspace, args: &GlobArgs) -> ToolOutput {
    let matcher = match GlobBuilder::new(&args.pattern)
        .literal_separator(true)
        .build()
    {
        Ok(glob) => glob.compile_matcher(),
        Err(err) => {
            return ToolOutput::error(format!(
                "glob failed: the pattern is invalid ({err}). Use `*`, `?`, `**`, `[abc]` and `{{a,b}}`."
            ))
        }
    };
    let root = workspace.root();
    let base = match root.resolve_existing(args.path.as_deref().unwrap_or(".")) {
        Ok(base) => base,
        Err(err) => return ToolOutput::error(format!("glob failed: {err}.")),
    };
    if !base.is_dir() {
        return ToolOutput::error(format!(
            "glob failed: `{}` is not a directory; give a directory as path.",
            root.relative(&base)
        ));
    }
    let max = workspace.limits().list_max_entries;
    let mut found = Vec::new();
    let mut more = 0usize;
    for entry in walk(root, &base, None).flatten() {
        if entry.file_type().is_none_or(|t| t.is_dir()) {
            continue;
        }
        let Ok(relative_to_base) = entry.path().strip_prefix(&base) else {
            continue;
        };
        if !matcher.is_match(relative_to_base) {
            continue;
        }
        if found.len() >= max {
            more += 1;
            continue;
        }
        found.push(root.relative(entry.path()));
    }
    if found.is_empty() {
        return ToolOutput::ok(format!(
            "No files match `{}` (ignored files are skipped).",
            args.pattern
        ));
    }
    let mut out = found.join("\n");
    if more > 0 {
        // Writing to a String cannot fail.
        let _ = write!(
            out,
            "\n[{more} more matches not shown; at most {max} are listed. Use a narrower pattern or path.]"
        );
    }
    ToolOutput::ok(out)
}
