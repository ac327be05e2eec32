//! Builtin tools of pod: `todo_write` and the [`workspace`] tools
//! (`read_file`, `write_file`, `edit_file`, `list_dir`, `glob`, `grep`,
//! `bash`), confined to one directory, and `skill` (Agent Skills loaded on
//! demand).
//!
//! Each tool lives in its own module with the same shape: its typed
//! arguments, its validation, and a [`Tool`](pod_worker::Tool) impl. State a
//! tool keeps for a session (the [`TodoStore`], the [`FileTracker`]) is
//! created by the caller and injected, so the session owner can read it and
//! rebuild it on resume.
//!
//! This crate must not know about sessions, logs or front ends.
//!
//! ```
//! use pod_tools::{TodoStore, TodoWriteTool};
//! let store = TodoStore::new();
//! let mut tools = pod_worker::ToolRegistry::new();
//! tools.register(TodoWriteTool::new(store.clone()));
//! assert_eq!(tools.names(), ["todo_write"]);
//! assert!(store.snapshot().is_empty());
//!
//! let dir = std::env::temp_dir();
//! let workspace = pod_tools::Workspace::new(&dir, pod_tools::FileTracker::new()).unwrap();
//! workspace.register(&mut tools);
//! assert_eq!(tools.names().len(), 1 + pod_tools::WORKSPACE_TOOLS.len());
//! ```
#![deny(missing_docs)]

pub mod files;
pub mod followup;
pub mod sandbox;
pub mod skill;
pub mod todo;
pub mod workspace;

pub use followup::{FollowupTool, SCHEDULE_FOLLOWUP};
pub use sandbox::{Sandbox, SandboxMode, SandboxPolicy};
pub use skill::{Skill, SkillTool, SKILL};
pub use todo::{
    has_unfinished, items_in_call, parse_todo_write, render_progress, render_todos, TodoError,
    TodoItem, TodoState, TodoStatus, TodoStore, TodoWriteTool, TODO_WRITE,
};
pub use workspace::{
    FileMeta, FileStamp, FileTracker, Limits, Workspace, BASH, EDIT_FILE, GLOB, GREP, LIST_DIR,
    READ_FILE, WORKSPACE_TOOLS, WRITE_FILE,
};
