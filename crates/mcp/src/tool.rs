//! A server's tool as a pod [`Tool`].

use crate::client::{CallError, Connection};
use crate::content::result_text;
use pod_worker::{Tool, ToolContext, ToolOutput};
use serde_json::{Map, Value};
use std::sync::Arc;

/// One MCP tool, under its namespaced name.
#[derive(Clone)]
pub struct McpTool {
    name: String,
    remote: String,
    description: String,
    parameters: Arc<Value>,
    read_only: bool,
    connection: Arc<Connection>,
}

impl McpTool {
    /// The tool `remote` of `connection`'s server, offered as `name`.
    pub fn new(name: String, tool: &rmcp::model::Tool, connection: Arc<Connection>) -> Self {
        let description = match tool.description.as_deref() {
            Some(text) if !text.trim().is_empty() => text.to_string(),
            _ => format!(
                "The {} tool of the MCP server {}.",
                tool.name,
                connection.name()
            ),
        };
        let read_only = tool
            .annotations
            .as_ref()
            .and_then(|a| a.read_only_hint)
            .unwrap_or(false);
        Self {
            name,
            remote: tool.name.to_string(),
            description: format!("[MCP server {}] {description}", connection.name()),
            parameters: Arc::new(normalise_schema(Value::Object(
                (*tool.input_schema).clone(),
            ))),
            read_only,
            connection,
        }
    }

    /// The name the model calls.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The server's name.
    pub fn server(&self) -> &str {
        self.connection.name()
    }

    /// Whether the server says the tool only reads (a hint from a third
    /// party: it never relaxes the approval policy).
    pub fn read_only_hint(&self) -> bool {
        self.read_only
    }
}

#[async_trait::async_trait]
impl Tool for McpTool {
    type Args = Map<String, Value>;

    fn name(&self) -> &str {
        &self.name
    }

    fn description(&self) -> String {
        self.description.clone()
    }

    fn parameters(&self) -> Arc<Value> {
        Arc::clone(&self.parameters)
    }

    fn concurrency_safe(&self) -> bool {
        // Calls to one server may run side by side; whether they may touch
        // the same things is the server's business, not knowable here.
        false
    }

    async fn call(&self, args: Map<String, Value>, ctx: ToolContext) -> ToolOutput {
        match self.connection.call(&self.remote, args, &ctx.cancel).await {
            Ok(result) => {
                let (text, is_error) = result_text(&result);
                match is_error {
                    true => ToolOutput::error(text),
                    false => ToolOutput::ok(text),
                }
            }
            Err(CallError::Cancelled) => {
                ToolOutput::error("Cancelled before the MCP server answered.")
            }
            Err(err) => ToolOutput::error(err.to_string()),
        }
    }
}

/// A tool's input schema in a form every provider accepts: an object
/// schema with `properties` (OpenAI rejects a function whose parameters
/// are not `type: object`, or an object without `properties`); `$schema`
/// and `$id` dropped (some providers refuse unknown top-level keywords).
pub fn normalise_schema(schema: Value) -> Value {
    let mut schema = match schema {
        Value::Object(map) => map,
        _ => Map::new(),
    };
    schema.remove("$schema");
    schema.remove("$id");
    if schema.get("type").and_then(Value::as_str) != Some("object") {
        schema.insert("type".into(), Value::String("object".into()));
    }
    if !schema.get("properties").is_some_and(Value::is_object) {
        schema.insert("properties".into(), Value::Object(Map::new()));
    }
    Value::Object(schema)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn schemas_become_object_schemas() {
        assert_eq!(
            normalise_schema(json!({"$schema": "http://json-schema.org/draft-07/schema#"})),
            json!({"type": "object", "properties": {}})
        );
        let kept =
            json!({"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]});
        assert_eq!(normalise_schema(kept.clone()), kept);
    }
}
