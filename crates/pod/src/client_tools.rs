//! Tools a session's client runs itself (the Managed Agents API's custom
//! tools): the model sees their definitions; a call parks the session on a
//! question in its log, and the client answers it with the result
//! ([`ClientResult`] on the [`AnswerRecord`](crate::log::AnswerRecord)),
//! which the approval gate hands to the worker as the call's result. The
//! call never runs here: durable and answered once, like an approval.

use pod_worker::{Tool, ToolContext, ToolOutput};
use serde::{Deserialize, Serialize};
use std::sync::Arc;

/// A tool the client runs: its name, what it does and its arguments'
/// JSON Schema, as the client defined them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClientToolSpec {
    /// The name the model calls it by.
    pub name: String,
    /// What it does, for the model.
    pub description: String,
    /// JSON Schema of its arguments (an object schema).
    pub input_schema: serde_json::Value,
}

/// What a client's tool returned.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClientResult {
    /// The text the model reads.
    pub content: String,
    /// Whether the call failed.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub is_error: bool,
}

impl From<ClientResult> for ToolOutput {
    fn from(result: ClientResult) -> Self {
        match result.is_error {
            true => ToolOutput::error(result.content),
            false => ToolOutput::ok(result.content),
        }
    }
}

/// The registry's entry for a [`ClientToolSpec`]. Its calls are answered
/// by the approval gate; one that reaches it (its question was answered
/// "allow" instead of with a result, through an approvals front end) gets
/// an error saying so.
pub(crate) struct ClientTool {
    spec: ClientToolSpec,
    schema: Arc<serde_json::Value>,
}

impl ClientTool {
    pub(crate) fn new(spec: ClientToolSpec) -> Self {
        let schema = Arc::new(spec.input_schema.clone());
        Self { spec, schema }
    }
}

#[async_trait::async_trait]
impl Tool for ClientTool {
    type Args = serde_json::Value;

    fn name(&self) -> &str {
        &self.spec.name
    }

    fn description(&self) -> String {
        self.spec.description.clone()
    }

    fn parameters(&self) -> Arc<serde_json::Value> {
        Arc::clone(&self.schema)
    }

    async fn call(&self, _args: serde_json::Value, _ctx: ToolContext) -> ToolOutput {
        ToolOutput::error(format!(
            "Not run: `{}` is run by the session's client, which approved the call without \
             giving its result. Try it again, or go on without it.",
            self.spec.name
        ))
    }
}

/// The names of pod's own tools, which a client's tool may not take: the
/// model would see two tools of one name.
pub const RESERVED_TOOL_NAMES: &[&str] = &[
    pod_tools::BASH,
    pod_tools::READ_FILE,
    pod_tools::WRITE_FILE,
    pod_tools::EDIT_FILE,
    pod_tools::LIST_DIR,
    pod_tools::GLOB,
    pod_tools::GREP,
    pod_tools::TODO_WRITE,
    pod_tools::SCHEDULE_FOLLOWUP,
    pod_tools::SKILL,
    crate::subagents::TASK,
];

impl ClientToolSpec {
    /// Whether it can be offered: a name of 1 to 128 letters, digits, `_`
    /// and `-` that is not one of pod's tools; an object schema. The
    /// error says what is wrong.
    pub fn check(&self) -> Result<(), String> {
        let name = &self.name;
        let valid = (1..=128).contains(&name.len())
            && name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
        if !valid {
            return Err(format!(
                "tool name {name:?} must be 1 to 128 letters, digits, `_` or `-`"
            ));
        }
        if RESERVED_TOOL_NAMES.contains(&name.as_str()) || name.contains("__") {
            return Err(format!(
                "tool name {name:?} is taken by pod's own tools (and `__` marks MCP servers' \
                 tools): name it otherwise"
            ));
        }
        if self.input_schema.get("type").and_then(|t| t.as_str()) != Some("object") {
            return Err(format!(
                "tool {name}'s input_schema must be an object schema (`\"type\": \"object\"`)"
            ));
        }
        Ok(())
    }
}
