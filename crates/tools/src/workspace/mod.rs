//! The workspace tools: files and a shell, confined to one directory.
//!
//! `read_file`, `write_file`, `edit_file`, `list_dir`, `glob`, `grep` and
//! `bash` share a [`Workspace`]: the canonical root every path must resolve
//! inside ([`confine`]), the session's [`FileTracker`] (read before edit)
//! and the [`Limits`]. The caller creates the workspace (and so the
//! tracker) and rebuilds the tracker on resume.

pub mod bash;
pub mod confine;
pub mod edit_file;
pub mod glob;
pub mod grep;
pub mod limits;
pub mod list_dir;
pub mod read_file;
pub mod tracker;
mod walk;
pub mod write_file;

pub use bash::{scrub_env, BashTool, BASH};
pub use confine::{ConfineError, Root};
pub use edit_file::{EditFileTool, EDIT_FILE};
pub use glob::{GlobTool, GLOB};
pub use grep::{GrepTool, GREP};
pub use limits::Limits;
pub use list_dir::{ListDirTool, LIST_DIR};
pub use read_file::{ReadFileTool, READ_FILE};
pub use tracker::{FileMeta, FileStamp, FileTracker, StaleError};
pub use write_file::{WriteFileTool, WRITE_FILE};

use crate::sandbox::Sandbox;
use pod_worker::{ToolOutput, ToolRegistry, ToolState};
use std::path::Path;
use std::sync::Arc;

/// Names of the workspace tools, in registration order.
pub const WORKSPACE_TOOLS: [&str; 7] =
    [READ_FILE, WRITE_FILE, EDIT_FILE, LIST_DIR, GLOB, GREP, BASH];

/// What the workspace tools share: root, tracker and limits.
#[derive(Clone, Debug)]
pub struct Workspace(Arc<WorkspaceInner>);

struct WorkspaceInner {
    root: Root,
    sandbox: Sandbox,
    tracker: FileTracker,
    // The tracker as the file tools' one shared state.
    state: Arc<dyn ToolState>,
    limits: Limits,
}

impl std::fmt::Debug for WorkspaceInner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Workspace")
            .field("root", &self.root)
            .field("sandbox", &self.sandbox)
            .field("tracker", &self.tracker)
            .field("limits", &self.limits)
            .finish()
    }
}

impl Workspace {
    /// A workspace at `root` (which must exist) with default limits.
    pub fn new(root: impl AsRef<Path>, tracker: FileTracker) -> std::io::Result<Self> {
        Self::with_limits(root, tracker, Limits::default())
    }

    /// A workspace with explicit limits.
    pub fn with_limits(
        root: impl AsRef<Path>,
        tracker: FileTracker,
        limits: Limits,
    ) -> std::io::Result<Self> {
        Ok(Self(Arc::new(WorkspaceInner {
            root: Root::new(root)?,
            sandbox: Sandbox::off(),
            state: Arc::new(tracker.clone()),
            tracker,
            limits,
        })))
    }

    /// The same workspace whose commands run in `sandbox`; the sandbox's
    /// private paths are off limits to the file tools too.
    pub fn with_sandbox(self, sandbox: Sandbox) -> Self {
        Self(Arc::new(WorkspaceInner {
            root: self.0.root.clone().with_private(sandbox.private()),
            sandbox,
            tracker: self.0.tracker.clone(),
            state: self.0.state.clone(),
            limits: self.0.limits.clone(),
        }))
    }

    /// The sandbox `bash` runs commands in (off unless set).
    pub fn sandbox(&self) -> &Sandbox {
        &self.0.sandbox
    }

    /// The confined root.
    pub fn root(&self) -> &Root {
        &self.0.root
    }

    /// The session's read-before-edit tracker.
    pub fn tracker(&self) -> &FileTracker {
        &self.0.tracker
    }

    /// The tracker as the state the file tools declare (one for all three,
    /// so a compaction or a replay reaches it once).
    pub fn tracker_state(&self) -> Arc<dyn ToolState> {
        self.0.state.clone()
    }

    /// The caps and timeouts.
    pub fn limits(&self) -> &Limits {
        &self.0.limits
    }

    /// Registers every workspace tool in `tools`.
    pub fn register(&self, tools: &mut ToolRegistry) {
        tools
            .register(ReadFileTool::new(self.clone()))
            .register(WriteFileTool::new(self.clone()))
            .register(EditFileTool::new(self.clone()))
            .register(ListDirTool::new(self.clone()))
            .register(GlobTool::new(self.clone()))
            .register(GrepTool::new(self.clone()))
            .register(BashTool::new(self.clone()));
    }

    /// Registers only the tools that read (`read_file`, `list_dir`,
    /// `glob`, `grep`): for an agent that must not change the workspace.
    pub fn register_read_only(&self, tools: &mut ToolRegistry) {
        tools
            .register(ReadFileTool::new(self.clone()))
            .register(ListDirTool::new(self.clone()))
            .register(GlobTool::new(self.clone()))
            .register(GrepTool::new(self.clone()));
    }
}

/// Runs blocking file-system work off the async threads. A panic in it
/// becomes an error result rather than taking the turn down.
async fn blocking(files: u32, work: impl FnOnce() -> ToolOutput + Send + 'static) -> ToolOutput {
    // Its descriptors from the process's share for tools (crate::files).
    let _files = crate::files::hold(files).await;
    match tokio::task::spawn_blocking(work).await {
        Ok(output) => output,
        Err(err) => ToolOutput::error(format!(
            "The tool failed internally ({err}); nothing may have been done. Retry once, \
             and report it if it fails again."
        )),
    }
}
