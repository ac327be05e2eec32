//! `mcp-test-server`: an MCP server on stdio, written with rmcp's server
//! side, whose tools misbehave on request, for the fault tests of pod's MCP
//! client (tests/e2e/mcp.rs).
//!
//! Every call is appended to the file in `MCP_TEST_LOG` (when set) before
//! it runs, so a test can count executions across restarts. With
//! `MCP_TEST_FAIL_START` set, the process exits before the handshake.

use rmcp::handler::server::ServerHandler;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, InitializeResult,
    JsonObject, ListToolsResult, PaginatedRequestParams, ServerCapabilities, Tool,
};
use rmcp::service::{RequestContext, RoleServer};
use rmcp::{ErrorData, ServiceExt};
use serde_json::{json, Value};
use std::io::Write;
use std::sync::Arc;

#[derive(Default)]
struct Faulty {
    // Set by `grow`: the tool list then has `grown` too.
    grown: std::sync::atomic::AtomicBool,
}

fn schema(value: Value) -> Arc<JsonObject> {
    Arc::new(value.as_object().cloned().unwrap_or_default())
}

fn tools() -> Vec<Tool> {
    let text =
        json!({"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]});
    vec![
        Tool::new("echo", "Echoes its text.", schema(text)),
        Tool::new(
            "fail",
            "Always fails (isError).",
            schema(json!({"type": "object"})),
        ),
        Tool::new(
            "image",
            "Returns a small PNG.",
            schema(json!({"type": "object"})),
        ),
        Tool::new(
            "big",
            "Returns `bytes` bytes of text.",
            schema(json!({"type": "object", "properties": {"bytes": {"type": "integer"}}})),
        ),
        Tool::new(
            "crash",
            "Exits the server mid-call.",
            schema(json!({"type": "object"})),
        ),
        Tool::new("hang", "Never answers.", schema(json!({"type": "object"}))),
        Tool::new(
            "grow",
            "Adds the tool `grown` and says so (tools/list_changed).",
            schema(json!({"type": "object"})),
        ),
        // A schema OpenAI would reject (no type, a $schema keyword).
        Tool::new(
            "loose",
            "Takes anything.",
            schema(json!({"$schema": "http://json-schema.org/draft-07/schema#"})),
        ),
        Tool::new(
            "a_tool_with_a_name_long_enough_to_need_shortening_for_providers",
            "Has a long name.",
            schema(json!({"type": "object", "properties": {}})),
        ),
    ]
}

fn log_call(name: &str, arguments: &Option<JsonObject>) {
    if let Some(path) = std::env::var_os("MCP_TEST_LOG") {
        if let Ok(mut file) = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
        {
            let line = json!({"tool": name, "arguments": arguments, "pid": std::process::id()});
            let _ = writeln!(file, "{line}");
        }
    }
}

impl ServerHandler for Faulty {
    fn get_info(&self) -> InitializeResult {
        InitializeResult::new(
            ServerCapabilities::builder()
                .enable_tools()
                .enable_tool_list_changed()
                .build(),
        )
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let mut all = tools();
        if self.grown.load(std::sync::atomic::Ordering::SeqCst) {
            all.push(Tool::new(
                "grown",
                "Added by grow.",
                schema(json!({"type": "object"})),
            ));
        }
        Ok(ListToolsResult::with_all_items(all))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        log_call(&request.name, &request.arguments);
        let arg = |key: &str| {
            request
                .arguments
                .as_ref()
                .and_then(|a| a.get(key))
                .cloned()
                .unwrap_or(Value::Null)
        };
        let result = match request.name.as_ref() {
            "echo" => CallToolResult::success(vec![ContentBlock::text(
                arg("text").as_str().unwrap_or_default().to_string(),
            )]),
            "fail" => CallToolResult::error(vec![ContentBlock::text("it failed, on purpose")]),
            "image" => CallToolResult::success(vec![
                ContentBlock::text("a picture:"),
                ContentBlock::image("iVBORw0KGgo".repeat(300), "image/png"),
            ]),
            "big" => {
                let bytes = arg("bytes").as_u64().unwrap_or(100_000) as usize;
                CallToolResult::success(vec![ContentBlock::text("x".repeat(bytes))])
            }
            "crash" => std::process::exit(3),
            "grow" => {
                self.grown.store(true, std::sync::atomic::Ordering::SeqCst);
                let _ = context.peer.notify_tool_list_changed().await;
                CallToolResult::success(vec![ContentBlock::text("grew a tool")])
            }
            "grown" => CallToolResult::success(vec![ContentBlock::text("the new tool ran")]),
            "hang" => {
                std::future::pending::<()>().await;
                unreachable!()
            }
            "loose" => CallToolResult::success(vec![ContentBlock::text(format!(
                "got {}",
                Value::Object(request.arguments.clone().unwrap_or_default())
            ))]),
            other if other.starts_with("a_tool_with") => {
                CallToolResult::success(vec![ContentBlock::text("long name reached")])
            }
            other => return Err(ErrorData::invalid_params(format!("no tool {other}"), None)),
        };
        Ok(CallToolResponse::Complete(result))
    }
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    if std::env::var_os("MCP_TEST_FAIL_START").is_some() {
        eprintln!("refusing to start, as asked");
        std::process::exit(2);
    }
    let (stdin, stdout) = rmcp::transport::stdio();
    match Faulty::default().serve((stdin, stdout)).await {
        // Ends when the client closes stdin (or pod dies).
        Ok(running) => {
            let _ = running.waiting().await;
        }
        Err(err) => eprintln!("mcp-test-server: {err}"),
    }
}
