//! Test helpers: a `todo_write` tool behind a registry, called with raw JSON
//! exactly as the worker calls it, and builders for argument lists.

use pod_tools::{render_todos, TodoItem, TodoStatus, TodoStore, TodoWriteTool, TODO_WRITE};
use pod_worker::{CommittedCall, ToolContext, ToolOutput, ToolRegistry};
use serde_json::{json, Value};
use tokio_util::sync::CancellationToken;

/// A `todo_write` tool registered in a [`ToolRegistry`], with its store.
#[derive(Clone)]
pub struct TodoHarness {
    pub store: TodoStore,
    pub tools: ToolRegistry,
}

impl TodoHarness {
    pub fn new() -> Self {
        let store = TodoStore::new();
        let mut tools = ToolRegistry::new();
        tools.register(TodoWriteTool::new(store.clone()));
        Self { store, tools }
    }

    /// Calls `todo_write` with these arguments, serialized to raw JSON.
    pub async fn write(&self, args: Value) -> ToolOutput {
        self.write_raw(&args.to_string()).await
    }

    /// Calls `todo_write` with raw argument text, through the registry, and
    /// commits the result as the worker does once the log has it.
    pub async fn write_raw(&self, raw: &str) -> ToolOutput {
        let output = self.write_uncommitted(raw).await;
        let tool = self
            .tools
            .get(TODO_WRITE)
            .expect("todo_write is registered");
        if let Some(state) = tool.state() {
            state.apply(&CommittedCall {
                call_id: "call_test",
                name: TODO_WRITE,
                arguments: raw,
                content: &output.content,
                is_error: output.is_error,
                meta: output.meta.as_ref(),
            });
        }
        output
    }

    /// Calls `todo_write` without committing its result (the log refused
    /// it, or the process died first).
    pub async fn write_uncommitted(&self, raw: &str) -> ToolOutput {
        let tool = self
            .tools
            .get(TODO_WRITE)
            .expect("todo_write is registered");
        let ctx = ToolContext {
            call_id: "call_test".into(),
            cancel: CancellationToken::new(),
        };
        tool.call_json(raw, ctx).await
    }

    /// Writes a list that must be accepted; returns its readback.
    pub async fn write_ok(&self, items: &[TodoItem]) -> String {
        let out = self.write(args(items)).await;
        assert!(!out.is_error, "expected success, got: {}", out.content);
        out.content
    }
}

/// A todo item.
pub fn todo(id: &str, content: &str, status: TodoStatus) -> TodoItem {
    TodoItem {
        id: id.into(),
        content: content.into(),
        status,
    }
}

/// `{"todos": [...]}` for these items.
pub fn args(items: &[TodoItem]) -> Value {
    json!({ "todos": items })
}

/// One raw item, for arguments that are deliberately wrong.
pub fn raw(id: &str, content: &str, status: &str) -> Value {
    json!({ "id": id, "content": content, "status": status })
}

/// The plan of the example.
pub fn example_plan() -> Vec<TodoItem> {
    vec![
        todo("inventory", "List every test file", TodoStatus::Completed),
        todo("config", "Add the config file", TodoStatus::InProgress),
        todo("rewrite", "Rewrite the mocks", TodoStatus::Pending),
    ]
}

/// What the readback of `items` must be when nothing unfinished was dropped.
pub fn readback(items: &[TodoItem]) -> String {
    render_todos(items)
}
