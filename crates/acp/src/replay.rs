//! `session/load`: a resumed session's conversation as the updates a client
//! would have seen live, followed by the current plan.

use crate::translate;
use agent_client_protocol::v1::schema::{ContentChunk, SessionUpdate, ToolCallStatus};
use pod_llm::{Item, ItemKind};
use pod_tools::TodoItem;
use std::collections::HashSet;

/// The updates replaying `history`, then the plan of `todos`. User and
/// assistant messages, reasoning, tool calls and their results are replayed;
/// runtime items (reminders, notifications, compaction summaries) are not
/// part of the conversation the user had and are left out.
pub fn replay_updates(history: &[Item], todos: &[TodoItem]) -> Vec<SessionUpdate> {
    let mut updates = Vec::new();
    // Calls announced so far: a result of any other call has nothing to update.
    let mut announced: HashSet<&str> = HashSet::new();
    for item in history {
        match &item.kind {
            ItemKind::User { text } => updates.push(SessionUpdate::UserMessageChunk(
                ContentChunk::new(translate::text(text)),
            )),
            ItemKind::Assistant {
                text,
                reasoning,
                tool_calls,
                ..
            } => {
                if let Some(reasoning) = reasoning.as_ref().filter(|r| !r.text.is_empty()) {
                    updates.push(SessionUpdate::AgentThoughtChunk(ContentChunk::new(
                        translate::text(&reasoning.text),
                    )));
                }
                if !text.is_empty() {
                    updates.push(SessionUpdate::AgentMessageChunk(ContentChunk::new(
                        translate::text(text),
                    )));
                }
                for call in tool_calls {
                    announced.insert(&call.id);
                    updates.push(SessionUpdate::ToolCall(translate::tool_call(
                        &call.id,
                        &call.name,
                        &call.arguments,
                        ToolCallStatus::Pending,
                    )));
                }
            }
            ItemKind::ToolResult {
                call_id,
                content,
                is_error,
                ..
            } => {
                if announced.contains(call_id.as_str()) {
                    updates.push(SessionUpdate::ToolCallUpdate(translate::tool_result(
                        call_id, content, *is_error,
                    )));
                }
            }
            ItemKind::System { .. } => {}
        }
    }
    updates.push(SessionUpdate::Plan(translate::plan(todos)));
    updates
}
