//! The `todo_write` tool.

use super::render::render_todos;
use super::validate::{validate_todos, MAX_CONTENT_CHARS, MAX_TODOS};
use super::TodoStore;
use pod_worker::{Tool, ToolContext, ToolOutput};
use serde_json::{json, Value};

/// The tool's name.
pub const TODO_WRITE: &str = "todo_write";

/// Replaces the session plan with the list the model sends.
#[derive(Clone, Debug)]
pub struct TodoWriteTool {
    store: TodoStore,
}

impl TodoWriteTool {
    /// A tool writing to `store`.
    pub fn new(store: TodoStore) -> Self {
        Self { store }
    }
}

#[async_trait::async_trait]
impl Tool for TodoWriteTool {
    // Validated by hand in `validate_todos` so each error names its item and
    // rule, and replay can reuse the very same check.
    type Args = Value;

    fn name(&self) -> &str {
        TODO_WRITE
    }

    fn description(&self) -> String {
        format!(
            "Write the plan for the current task as a todo list. Use it for any work with \
             three or more steps, and keep it current: it is how you and the user track progress \
             over a long task.\n\
             - Send the WHOLE list every time; it replaces the previous one. Items you leave out \
             are removed.\n\
             - Give each item a short stable id (e.g. \"tests\") and keep it across updates.\n\
             - Keep exactly one item in_progress while work remains; start the next before you \
             work on it.\n\
             - Mark an item completed as soon as it is done, not in a batch at the end.\n\
             - Status is one of pending, in_progress, completed. At most {MAX_TODOS} items, each \
             at most {MAX_CONTENT_CHARS} characters.\n\
             The result reads the new list back."
        )
    }

    fn parameters(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "todos": {
                    "type": "array",
                    "description": "The complete list, in order.",
                    "maxItems": MAX_TODOS,
                    "items": {
                        "type": "object",
                        "properties": {
                            "id": {"type": "string", "minLength": 1},
                            "content": {"type": "string", "minLength": 1, "maxLength": MAX_CONTENT_CHARS},
                            "status": {"type": "string", "enum": ["pending", "in_progress", "completed"]}
                        },
                        "required": ["id", "content", "status"]
                    }
                }
            },
            "required": ["todos"]
        })
    }

    async fn call(&self, args: Value, _ctx: ToolContext) -> ToolOutput {
        let todos = match validate_todos(&args) {
            Ok(todos) => todos,
            Err(err) => {
                return ToolOutput::error(format!(
                    "todo_write rejected: {err}. The list was not changed; send the whole \
                     corrected list."
                ))
            }
        };
        let old = self.store.replace(todos.clone());
        let dropped: Vec<&str> = old
            .iter()
            .filter(|t| t.status.is_unfinished() && !todos.iter().any(|n| n.id == t.id))
            .map(|t| t.id.as_str())
            .collect();
        let mut readback = render_todos(&todos);
        if !dropped.is_empty() {
            readback.push_str("\nRemoved while unfinished: ");
            readback.push_str(&dropped.join(", "));
        }
        ToolOutput::ok(readback)
    }
}
