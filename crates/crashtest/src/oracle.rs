//! What the log says, computed independently of `pod::replay`: the todo
//! lists accepted by `todo_write`, in log order.
//!
//! A `todo_write` call is accepted when its result is not an error AND its
//! arguments pass `parse_todo_write` (the tool's own validation). A
//! compaction boundary carries the list of its moment; the harness's
//! sessions do not compact, but the oracle follows boundaries anyway so it
//! stays right if they do.

use pod::log::LogRecord;
use pod_llm::ItemKind;
use pod_tools::{parse_todo_write, TodoItem, TODO_WRITE};
use std::collections::HashMap;

/// Every accepted list, with the index of the record that made it so.
pub fn accepted_todo_lists(records: &[LogRecord]) -> Vec<(usize, Vec<TodoItem>)> {
    let mut calls: HashMap<&str, &str> = HashMap::new();
    let mut lists = Vec::new();
    for (index, record) in records.iter().enumerate() {
        match record {
            LogRecord::Item(item) => match &item.kind {
                ItemKind::Assistant { tool_calls, .. } => {
                    for call in tool_calls.iter().filter(|c| c.name == TODO_WRITE) {
                        calls.insert(&call.id, &call.arguments);
                    }
                }
                ItemKind::ToolResult {
                    call_id, is_error, ..
                } => {
                    if let Some(arguments) = calls.remove(call_id.as_str()) {
                        if let (false, Ok(list)) = (*is_error, parse_todo_write(arguments)) {
                            lists.push((index, list));
                        }
                    }
                }
                _ => {}
            },
            LogRecord::Compaction(boundary) => {
                calls.clear();
                lists.push((index, boundary.todos.clone()));
            }
            LogRecord::Header(_)
            | LogRecord::Stopped(_)
            | LogRecord::Question(_)
            | LogRecord::Answer(_)
            | LogRecord::Ended(_)
            | LogRecord::Hook(_)
            | LogRecord::Checkpoint(_)
            | LogRecord::Trace(_)
            | LogRecord::Limits(_)
            | LogRecord::Verify(_) => {}
        }
    }
    lists
}

/// The todos after the last accepted `todo_write` (empty if none).
pub fn last_accepted_todos(records: &[LogRecord]) -> Vec<TodoItem> {
    accepted_todo_lists(records)
        .pop()
        .map(|(_, list)| list)
        .unwrap_or_default()
}
