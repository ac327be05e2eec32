//! The tools a session runs with: the embedder's, `todo_write` and, when
//! enabled, the workspace tools, each set built fresh with empty state that
//! replaying the log fills in.

use crate::config::PodConfig;
use crate::error::PodError;
use pod_tools::{FileTracker, TodoStore, TodoWriteTool, Workspace};
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
    /// Fresh tools for `config`.
    pub fn new(config: &PodConfig) -> Result<Self, PodError> {
        let mut registry = config.tools.clone();
        let todos = TodoStore::new();
        registry.register(TodoWriteTool::new(todos.clone()));
        let workspace = match config.workspace_tools {
            true => {
                let workspace =
                    Workspace::new(&config.workspace, FileTracker::new()).map_err(|source| {
                        PodError::Io {
                            path: config.workspace.clone(),
                            source,
                        }
                    })?;
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
