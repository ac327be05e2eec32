//! The `todo_write` tool.

use super::render::render_todos;
use super::validate::{parse_todo_write, validate_todos, MAX_CONTENT_CHARS, MAX_TODOS};
use super::TodoStore;
use pod_worker::{CommittedCall, Tool, ToolContext, ToolOutput, ToolState};
use serde_json::Value;
use std::sync::Arc;

/// The tool's name.
pub const TODO_WRITE: &str = "todo_write";

/// Replaces the session plan with the list the model sends.
///
/// The call only validates the list and reads it back; the store changes
/// when the result is committed, through [`TodoState`], so the store never
/// holds a list the log does not have.
#[derive(Clone)]
pub struct TodoWriteTool {
    store: TodoStore,
    state: Arc<dyn ToolState>,
}

impl std::fmt::Debug for TodoWriteTool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TodoWriteTool")
            .field("store", &self.store)
            .finish()
    }
}

impl TodoWriteTool {
    /// A tool whose committed calls write `store`.
    pub fn new(store: TodoStore) -> Self {
        Self {
            state: Arc::new(TodoState(store.clone())),
            store,
        }
    }
}

/// The plan as `todo_write`'s state: a committed, successful call replaces
/// the list with its arguments, checked by the very validation the tool ran
/// (so on replay, arguments an older schema accepted and this one refuses
/// change nothing). The plan outlives compaction.
#[derive(Debug)]
pub struct TodoState(pub TodoStore);

impl ToolState for TodoState {
    fn apply(&self, call: &CommittedCall<'_>) {
        if call.is_error {
            return;
        }
        if let Ok(todos) = parse_todo_write(call.arguments) {
            self.0.replace(todos);
        }
    }

    fn clear(&self) {
        self.0.replace(Vec::new());
    }

    // Each accepted call replaces the whole plan, and an error or an
    // invalid list changes nothing: a replay validates only the newest.
    fn latest_wins(&self) -> bool {
        true
    }

    fn accepts(&self, call: &CommittedCall<'_>) -> bool {
        !call.is_error && parse_todo_write(call.arguments).is_ok()
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

    fn parameters(&self) -> Arc<Value> {
        pod_worker::schema!({
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

    fn state(&self) -> Option<Arc<dyn ToolState>> {
        Some(self.state.clone())
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
        let old = self.store.snapshot();
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
