//! Reading a history the way assertions need it.

use pod_llm::{Item, ItemKind};

/// The result item answering `call_id`: (content, is_error).
pub fn result_of(history: &[Item], call_id: &str) -> (String, bool) {
    history
        .iter()
        .find_map(|item| match &item.kind {
            ItemKind::ToolResult {
                call_id: id,
                content,
                is_error,
                ..
            } if id == call_id => Some((content.clone(), *is_error)),
            _ => None,
        })
        .unwrap_or_else(|| panic!("no result for {call_id}"))
}

/// Ids of the tool calls in `history`, in order, with their tool names.
pub fn calls_of(history: &[Item]) -> Vec<(String, String)> {
    history
        .iter()
        .flat_map(|item| {
            item.tool_calls()
                .iter()
                .map(|c| (c.id.clone(), c.name.clone()))
        })
        .collect()
}

/// A compact description of each item: `user:..`, `assistant:..[calls]`,
/// `result:<id>`, `system:..`.
pub fn shape(history: &[Item]) -> Vec<String> {
    history
        .iter()
        .map(|item| match &item.kind {
            ItemKind::User { text } => format!("user:{text}"),
            ItemKind::Assistant {
                text, tool_calls, ..
            } => {
                let ids: Vec<&str> = tool_calls.iter().map(|c| c.id.as_str()).collect();
                format!("assistant:{text}{ids:?}")
            }
            ItemKind::ToolResult { call_id, .. } => format!("result:{call_id}"),
            ItemKind::System { text, .. } => format!("system:{text}"),
        })
        .collect()
}
