//! The tools a session runs with: the embedder's, `todo_write` and, when
//! enabled, the workspace tools, each set built fresh with empty state that
//! replaying the log fills in.

use crate::config::PodConfig;
use crate::error::PodError;
use crate::events::EventBus;
use crate::subagents::{Lineage, Subagents, TaskTool};
use pod_tools::{FileTracker, Sandbox, TodoStore, TodoWriteTool, Workspace};
use std::path::Path;
use std::sync::Arc;
use uuid::Uuid;

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
    /// The `task` tool's children, when the session may start any.
    pub subagents: Option<Subagents>,
    /// Where the operator's checks run, when a root session verifies its
    /// runs: the workspace tools' workspace, or one with their sandbox.
    pub checks: Option<Workspace>,
}

/// Which session the tools are for.
pub(crate) struct ToolsFor<'a> {
    pub id: Uuid,
    pub lineage: Lineage,
    /// Where the session's events go (its children's, tagged, too).
    pub events: &'a EventBus,
}

impl SessionTools {
    /// Fresh tools for `config`, in session `session` (its directory's
    /// `tmp/` is the commands' `TMPDIR`).
    pub fn new(config: &Arc<PodConfig>, session: ToolsFor<'_>) -> Result<Self, PodError> {
        let read_only = session.lineage.read_only;
        // A read-only child gets none of the embedder's or MCP servers'
        // tools: what they do is unknown, so they may write.
        let mut registry = match (read_only, session.lineage.depth) {
            (true, _) => ToolRegistry::new(),
            (false, 0) => config.tools.clone(),
            // An embedder's stateful tool is one instance with one state: a
            // child's calls (and its replay, which clears the state) would
            // change its parent's. Children get the stateless ones.
            (false, _) => config.tools.without_stateful(),
        };
        let todos = TodoStore::new();
        registry.register(TodoWriteTool::new(todos.clone()));
        let workspace = match config.workspace_tools {
            true => {
                let workspace = session_workspace(config, session.id)?;
                match read_only {
                    true => workspace.register_read_only(&mut registry),
                    false => workspace.register(&mut registry),
                }
                Some(workspace)
            }
            false => None,
        };
        let subagents = (config.subagents.enabled
            && session.lineage.depth < config.subagents.max_depth)
            .then(|| Subagents::new(config, session.id, session.lineage, session.events));
        if let Some(subagents) = &subagents {
            registry.register(TaskTool::new(subagents.clone()));
        }
        // A subagent cannot park (its parent's call would move on).
        if config.followups.is_some() && session.lineage.depth == 0 && !read_only {
            registry.register(pod_tools::FollowupTool);
        }
        // The client answers its tools' calls by parking the session: a
        // subagent cannot park.
        if session.lineage.depth == 0 && !read_only {
            for spec in &config.client_tools {
                registry.register(crate::client_tools::ClientTool::new(spec.clone()));
            }
        }
        if !config.skills.is_empty() {
            registry.register(pod_tools::SkillTool::new(config.skills.clone()));
        }
        if let Some(allowed) = &config.tool_allow {
            // The client's own tools are its agent's: always offered.
            let allowed: Arc<[String]> = allowed
                .iter()
                .cloned()
                .chain(config.client_tools.iter().map(|t| t.name.clone()))
                .collect::<Vec<_>>()
                .into();
            registry = registry.only(Arc::new(move |name: &str| {
                name == pod_tools::TODO_WRITE || allowed.iter().any(|a| a == name)
            }));
        }
        registry.share_specs();
        let checks = match (&config.verify, session.lineage.depth, &workspace) {
            (Some(_), 0, Some(workspace)) => Some(workspace.clone()),
            (Some(_), 0, None) => Some(session_workspace(config, session.id)?),
            _ => None,
        };
        Ok(Self {
            registry,
            todos,
            workspace,
            subagents,
            checks,
        })
    }

    /// The states of every stateful tool, for a replay.
    pub fn states(&self) -> ToolStates {
        ToolStates::of(&self.registry)
    }
}

/// The session's workspace, under the session's sandbox: writes in the
/// workspace and its temp dir, pod's own data private.
fn session_workspace(config: &PodConfig, session: Uuid) -> Result<Workspace, PodError> {
    let io = |path: &Path| {
        let path = path.to_path_buf();
        move |source| PodError::Io { path, source }
    };
    let workspace =
        Workspace::new(&config.workspace, FileTracker::new()).map_err(io(&config.workspace))?;
    // Made by the sandbox when the first command runs.
    let tmpdir = config.home.session_dir(session).join(TMP_DIR);
    let private = std::iter::once(config.home.path().to_path_buf())
        .chain(config.private_paths.iter().cloned());
    let sandbox =
        Sandbox::new(config.sandbox, workspace.root().path(), Some(tmpdir)).with_private(private);
    Ok(workspace.with_sandbox(sandbox))
}
