//! Helpers shared by the suites.

use pod_llm::{Item, ItemKind, ToolCall, ToolSpec};
pub use pod_testkit::provider::{ask, complete, endpoint, events};

/// The `read_file` tool spec used across suites.
pub fn read_file_tool() -> ToolSpec {
    ToolSpec {
        name: "read_file".into(),
        description: "Reads a file.".into(),
        parameters: serde_json::json!({
            "type": "object",
            "properties": {"path": {"type": "string"}},
            "required": ["path"]
        })
        .into(),
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
