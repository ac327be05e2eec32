//! The tools a session runs with: the embedder's, `todo_write` and, when
//! enabled, the workspace tools, each set built fresh with empty state that
//! replaying the log fills in.

use crate::config::PodConfig;
use crate::error::PodError;
use pod_tools::{FileTracker, Sandbox, TodoStore, TodoWriteTool, Workspace};
use std::path::Path;

/// The commands' temp dir, in the session's directory: writable under every
/// sandbox mode but read-only, and gone with the session.
pub(crate) const TMP_DIR: &str = "tmp";
use pod_worker::{ToolRegistry, ToolStates};

/// A session's tools and the state the Pod reads from them.
pub(crate) struct SessionTools {
    pub registry: ToolRegistry,
    /// The plan, written only by `todo_write`'s committed results.
    pub todos: TodoStore,
    /// The workspace tools' root and file tracker, when they are registered.
    pub workspace: Option<Workspace>,
}

impl SessionTools {
    /// Fresh tools for `config`, in the session whose directory is
    /// `session_dir` (its `tmp/` is the commands' `TMPDIR`).
    pub fn new(config: &PodConfig, session_dir: &Path) -> Result<Self, PodError> {
        let mut registry = config.tools.clone();
        let todos = TodoStore::new();
        registry.register(TodoWriteTool::new(todos.clone()));
        let workspace = match config.workspace_tools {
            true => {
                let io = |path: &Path| {
                    let path = path.to_path_buf();
                    move |source| PodError::Io { path, source }
                };
                let workspace = Workspace::new(&config.workspace, FileTracker::new())
                    .map_err(io(&config.workspace))?;
                let tmpdir = session_dir.join(TMP_DIR);
                std::fs::create_dir_all(&tmpdir).map_err(io(&tmpdir))?;
                let sandbox = Sandbox::new(config.sandbox, workspace.root().path(), Some(tmpdir));
                let workspace = workspace.with_sandbox(sandbox);
                workspace.register(&mut registry);
                Some(workspace)
            }
            false => None,
        };
        Ok(Self {
            registry,
            todos,
            workspace,
        })
    }

    /// The states of every stateful tool, for a replay.
    pub fn states(&self) -> ToolStates {
        ToolStates::of(&self.registry)
    }
}
