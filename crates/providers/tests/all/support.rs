//! Helpers shared by the suites.

use futures_util::StreamExt;
use pod_llm::{
    AssembledResponse, Item, ItemKind, Provider, ProviderError, ProviderRequest, ResponseAssembler,
    StreamEvent, ToolCall, ToolSpec,
};
use pod_providers::{ApiKey, Endpoint, Timeouts};
use std::time::Duration;

/// Runs one request and folds its events; the first error is returned.
pub async fn complete(
    provider: &dyn Provider,
    request: ProviderRequest,
) -> Result<AssembledResponse, ProviderError> {
    let events = events(provider, request).await?;
    let mut assembler = ResponseAssembler::new();
    for event in events {
        assembler.push(event)?;
    }
    Ok(assembler.finish())
}

/// Runs one request and returns its events; the first error is returned.
pub async fn events(
    provider: &dyn Provider,
    request: ProviderRequest,
) -> Result<Vec<StreamEvent>, ProviderError> {
    let mut stream = provider.stream(&request).await?;
    let mut events = Vec::new();
    while let Some(event) = stream.next().await {
        events.push(event?);
    }
    Ok(events)
}

/// An endpoint on the loopback server with a test key and short timeouts.
pub fn endpoint(base_url: String) -> Endpoint {
    let mut endpoint = Endpoint::new(base_url, "test-model");
    endpoint.api_key = Some(ApiKey::new("sk-test-secret"));
    endpoint.timeouts = Timeouts {
        request: Duration::from_secs(5),
        idle: Duration::from_secs(5),
    };
    endpoint
}

/// A request with a user prompt and no tools.
pub fn ask(text: &str) -> ProviderRequest {
    ProviderRequest {
        system_prompt: "You are terse.".into(),
        history: vec![Item::user(text)],
        tools: vec![],
    }
}

/// The `read_file` tool spec used across suites.
pub fn read_file_tool() -> ToolSpec {
    ToolSpec {
        name: "read_file".into(),
        description: "Reads a file.".into(),
        parameters: serde_json::json!({
            "type": "object",
            "properties": {"path": {"type": "string"}},
            "required": ["path"]
        }),
    }
}

/// An assistant item.
pub fn assistant(
    text: &str,
    reasoning: Option<pod_llm::Reasoning>,
    calls: &[(&str, &str, &str)],
) -> Item {
    Item::new(ItemKind::Assistant {
        text: text.into(),
        reasoning,
        tool_calls: calls
            .iter()
            .map(|(id, name, arguments)| ToolCall {
                id: (*id).into(),
                name: (*name).into(),
                arguments: (*arguments).into(),
            })
            .collect(),
        usage: None,
    })
}

/// A history exercising every item kind: a tool round with a runtime
/// reminder between the call and its result, then a notification.
pub fn rich_history() -> Vec<Item> {
    use pod_llm::SystemKind;
    vec![
        Item::user("Read a.txt and b.txt"),
        assistant(
            "Reading both.",
            None,
            &[
                ("call_1", "read_file", r#"{"path":"a.txt"}"#),
                ("call_2", "read_file", r#"{"path":"b.txt"#),
            ],
        ),
        Item::system(SystemKind::Reminder, "The todo list is empty."),
        Item::tool_result("call_1", "alpha", false),
        Item::tool_result("call_2", "invalid JSON arguments: EOF while parsing", true),
        Item::system(SystemKind::Notification, "Build finished."),
        assistant("a.txt says alpha.", None, &[]),
        Item::user("Thanks"),
    ]
}
