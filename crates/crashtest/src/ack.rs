//! What a killed `pod` process acknowledged as committed, read from the
//! NDJSON events it printed before it died, and the check that the log
//! holds all of it.
//!
//! The Pod appends an item to the log (one `write` of the whole line) and
//! only then moves on and emits what follows, so a line printed on stdout is
//! evidence about the log. Precisely, an event acknowledges:
//!
//! | event seen | committed before it was printed |
//! |---|---|
//! | `session_started` | the log file with its header naming that session |
//! | `tool_call_started` | the assistant item holding that call (id, name, arguments); for the first call of an item, its text is the text streamed since the last boundary |
//! | `tool_call_finished` | the result of that call, with that content and error flag (the worker emits it after the commit returned) |
//! | `todos_changed` | the accepted `todo_write` result that produced that list (emitted after the append) |
//! | `reminder_injected` | the reminder item with that text (emitted after the append) |
//! | `turn_ended` with reason `end_turn` | the final assistant item (no tool calls, the text streamed since the last boundary), as the last item of the log |
//!
//! `turn_started` is *not* an acknowledgement (it is emitted before the
//! prompt is committed), nor is `text_delta` alone, nor the CLI's `lagged`
//! frame. Because the line is written before it is acknowledged, a SIGKILL
//! loses nothing acknowledged under every durability setting; durability
//! only decides what a power loss could lose, which this harness does not
//! simulate.

use crate::oracle::accepted_todo_lists;
use pod::log::LogRecord;
use pod::PodEvent;
use pod_llm::{ItemKind, SystemKind};
use pod_tools::TodoItem;
use pod_worker::TurnEndReason;
use serde_json::Value;

/// One thing the process said was committed.
#[derive(Debug, Clone, PartialEq)]
pub enum Ack {
    /// The session's log exists.
    Session {
        /// Its id.
        session_id: String,
    },
    /// An assistant item holding this call is in the log.
    Call {
        /// Call id.
        call_id: String,
        /// Tool name.
        name: String,
        /// Raw arguments.
        arguments: String,
        /// Text streamed since the last boundary (checked for an item's
        /// first call).
        text: String,
    },
    /// A result of this call is in the log.
    Result {
        /// Call id.
        call_id: String,
        /// Result text.
        content: String,
        /// Error flag.
        is_error: bool,
    },
    /// An accepted `todo_write` gave this list (the n-th since the process
    /// started).
    Todos(Vec<TodoItem>),
    /// A reminder with this text was committed.
    Reminder(String),
    /// The turn ended; its final assistant item (with this text) is the
    /// last item of the log.
    TurnEnded {
        /// Text streamed for the final answer.
        text: String,
    },
}

/// Reads the acknowledgements from a process's complete NDJSON lines (an
/// unterminated last line must already be dropped by the caller).
pub fn acknowledged(lines: &[String]) -> Vec<Ack> {
    let mut acks = Vec::new();
    // Text streamed since the last boundary; `None` once an item took it.
    let mut text = String::new();
    for line in lines {
        let Ok(value) = serde_json::from_str::<Value>(line) else {
            continue;
        };
        let tag = value.get("event").and_then(Value::as_str).unwrap_or("");
        match tag {
            "session_started" => {
                if let Some(id) = value.get("session_id").and_then(Value::as_str) {
                    acks.push(Ack::Session {
                        session_id: id.to_string(),
                    });
                }
                continue;
            }
            // The CLI's own frames: not Pod events, no evidence of order.
            "lagged" => continue,
            "session_finished" => continue,
            _ => {}
        }
        let Ok(event) = serde_json::from_value::<PodEvent>(value) else {
            continue;
        };
        match event {
            PodEvent::TextDelta { text: delta } => text.push_str(&delta),
            // Said while the same response streams: the text goes on.
            PodEvent::ReasoningDelta { .. }
            | PodEvent::Usage { .. }
            | PodEvent::ToolCallStreaming { .. } => {}
            PodEvent::ToolCallStarted {
                call_id,
                name,
                arguments,
            } => acks.push(Ack::Call {
                call_id,
                name,
                arguments,
                text: std::mem::take(&mut text),
            }),
            PodEvent::ToolCallFinished {
                call_id,
                content,
                is_error,
                ..
            } => {
                text.clear();
                acks.push(Ack::Result {
                    call_id,
                    content,
                    is_error,
                });
            }
            PodEvent::TodosChanged { todos } => acks.push(Ack::Todos(todos)),
            PodEvent::ReminderInjected { text: reminder } => {
                text.clear();
                acks.push(Ack::Reminder(reminder));
            }
            PodEvent::TurnEnded {
                reason: TurnEndReason::EndTurn,
                ..
            } => acks.push(Ack::TurnEnded {
                text: std::mem::take(&mut text),
            }),
            // A retried request's streamed text is void.
            PodEvent::RequestRetried { .. } | PodEvent::TurnStarted { .. } => text.clear(),
            _ => text.clear(),
        }
    }
    acks
}

/// Checks every acknowledgement against the log's records. `base` is the
/// number of records the log held when the process started (its own
/// appends come after). Returns what is missing, one line each.
pub fn missing(
    acks: &[Ack],
    session_id: Option<&str>,
    records: &[LogRecord],
    base: usize,
) -> Vec<String> {
    let mut problems = Vec::new();
    let own = records.get(base..).unwrap_or(&[]);
    let todo_lists: Vec<Vec<TodoItem>> = accepted_todo_lists(records)
        .into_iter()
        .filter(|(index, _)| *index >= base)
        .map(|(_, list)| list)
        .collect();
    let reminders: Vec<&str> = own
        .iter()
        .filter_map(|r| match r {
            LogRecord::Item(item) => match &item.kind {
                ItemKind::System {
                    kind: SystemKind::Reminder,
                    text,
                } => Some(text.as_str()),
                _ => None,
            },
            _ => None,
        })
        .collect();
    let (mut todos_seen, mut reminders_seen) = (0usize, 0usize);
    for ack in acks {
        match ack {
            Ack::Session { session_id: acked } => {
                if session_id != Some(acked.as_str()) {
                    problems.push(format!(
                        "session_started named {acked}, the log header names {session_id:?}"
                    ));
                }
            }
            Ack::Call {
                call_id,
                name,
                arguments,
                text,
            } => check_call(records, call_id, name, arguments, text, &mut problems),
            Ack::Result {
                call_id,
                content,
                is_error,
            } => {
                let found = records.iter().any(|r| match r {
                    LogRecord::Item(item) => matches!(&item.kind,
                        ItemKind::ToolResult { call_id: c, content: t, is_error: e, .. }
                            if c == call_id && t == content && e == is_error),
                    _ => false,
                });
                if !found {
                    problems.push(format!(
                        "acknowledged result of call {call_id} (is_error {is_error}) is not in the log"
                    ));
                }
            }
            Ack::Todos(list) => {
                match todo_lists.get(todos_seen) {
                    Some(logged) if logged == list => {}
                    Some(logged) => problems.push(format!(
                        "todos_changed #{} was {list:?}, the log's accepted list #{} is {logged:?}",
                        todos_seen + 1,
                        todos_seen + 1
                    )),
                    None => problems.push(format!(
                        "todos_changed #{} ({} items) has no accepted todo_write in the log",
                        todos_seen + 1,
                        list.len()
                    )),
                }
                todos_seen += 1;
            }
            Ack::Reminder(text) => {
                if reminders.get(reminders_seen) != Some(&text.as_str()) {
                    problems.push(format!(
                        "reminder #{} acknowledged but not in the log: {text:?}",
                        reminders_seen + 1
                    ));
                }
                reminders_seen += 1;
            }
            Ack::TurnEnded { text } => {
                let last = records.iter().rev().find_map(|r| match r {
                    LogRecord::Item(item) => Some(&item.kind),
                    _ => None,
                });
                let ok = matches!(last, Some(ItemKind::Assistant { text: t, tool_calls, .. })
                    if tool_calls.is_empty() && t == text);
                if !ok {
                    problems.push(format!(
                        "turn_ended acknowledged a final answer {text:?}; the log's last item is {last:?}"
                    ));
                }
            }
        }
    }
    problems
}

fn check_call(
    records: &[LogRecord],
    call_id: &str,
    name: &str,
    arguments: &str,
    text: &str,
    problems: &mut Vec<String>,
) {
    let holder = records.iter().find_map(|r| match r {
        LogRecord::Item(item) => match &item.kind {
            ItemKind::Assistant {
                text, tool_calls, ..
            } => tool_calls
                .iter()
                .position(|c| c.id == call_id)
                .map(|at| (text, &tool_calls[at], at)),
            _ => None,
        },
        _ => None,
    });
    match holder {
        None => problems.push(format!(
            "acknowledged call {call_id} ({name}) is not in the log"
        )),
        Some((_, call, _)) if call.name != name || call.arguments != arguments => {
            problems.push(format!(
                "call {call_id} logged as {}({}), acknowledged as {name}({arguments})",
                call.name, call.arguments
            ))
        }
        Some((logged, _, 0)) if logged != text => problems.push(format!(
            "call {call_id}'s item text is {logged:?} in the log, {text:?} as streamed"
        )),
        Some(_) => {}
    }
}

#[cfg(test)]
#[path = "ack_tests.rs"]
mod tests;
