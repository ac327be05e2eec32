//! Builtin tools of pod.
//!
//! Each tool lives in its own module with the same shape: its typed
//! arguments, its validation, and a [`Tool`](pod_worker::Tool) impl. State a
//! tool keeps for a session (such as the [`TodoStore`]) is created by the
//! caller and injected, so the session owner can read it and rebuild it on
//! resume.
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
//! ```
#![deny(missing_docs)]

pub mod todo;

pub use todo::{
    parse_todo_write, render_todos, TodoError, TodoItem, TodoStatus, TodoStore, TodoWriteTool,
    TODO_WRITE,
};
