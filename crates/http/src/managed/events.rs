//! `/v1/sessions/{id}/events`: send (`user.message`, `user.interrupt`)
//! and list in pages.
//!
//! The events are the session's log, translated ([`translate`]): one
//! source for the list and the stream, so a list equals what a stream
//! sent, and an event's id (`sevt_` and the record's sequence number, with
//! a suffix for the events one record makes) is the same every time it is
//! read. A user item is `user.message` then `session.status_running`; an
//! answer's text `agent.message`, its calls `agent.tool_use`; a result
//! `agent.tool_result`; a turn's end `session.status_idle` with its stop
//! reason (`end_turn`; `requires_action` on a question; `retries_exhausted`
//! when it failed; `budget_reached` when a limit stopped it).
//!
//! The stream is [`super::stream`].

use super::answers;
use super::error::{parse, Error};
use super::request::message_text;
use super::sessions;
use super::{page, query_pairs, query_value, Managed};
use axum::body::Bytes;
use axum::extract::{Path, RawQuery, State};
use axum::Json;
use chrono::{DateTime, Utc};
use pod::log::{EndedHow, LogRecord};
use serde::Deserialize;
use serde_json::{json, Value};
use std::collections::{HashMap, HashSet};
use uuid::Uuid;

/// What of a session, besides its log, its events show.
#[derive(Default, Clone, Copy)]
pub(crate) struct Seen<'a> {
    /// The outcome it works toward: its first prompt.
    pub outcome: Option<&'a super::outcomes::Outcome>,
    /// Its agent's custom tools: their calls are `agent.custom_tool_use`,
    /// the results the client gave `user.custom_tool_result`.
    pub custom_tools: &'a [pod::ClientToolSpec],
    /// Its agent's MCP servers: calls of their tools (`NAME__TOOL`) are
    /// `agent.mcp_tool_use`, their results `agent.mcp_tool_result`.
    pub mcp_servers: &'a [super::mcp::McpServer],
}

/// The session's log as the API's events. `running`: whether a process
/// runs it now (read before the records): a turn without an end in the
/// log has ended when nothing runs it.
pub(crate) fn translate(records: &[LogRecord], running: bool, seen: Seen<'_>) -> Vec<Value> {
    let outcome = seen.outcome;
    let mcp_servers: Vec<String> = seen.mcp_servers.iter().map(|s| s.name.clone()).collect();
    // The calls of an MCP server's tools.
    let mut mcp_calls: HashSet<String> = HashSet::new();
    // The first prompt of a session with an outcome is the outcome.
    let mut outcome_told = false;
    let mut out = Vec::new();
    // The `agent.tool_use` event of each call, for its result.
    let mut calls: HashMap<String, String> = HashMap::new();
    // The calls whose result the client gave (a custom tool's).
    let mut client_answered: HashSet<String> = HashSet::new();
    let mut in_turn = false;
    // What goes on after a record that resumes the session (an answer, or
    // limits raised after a budget stopped it): the runner takes it up a
    // moment after it records that, so not running yet is not the end of
    // a turn.
    let mut resumed_last = false;
    // The last turn ended at a limit: limits recorded now continue it.
    let mut stopped = false;
    let mut last: (usize, DateTime<Utc>) = (0, DateTime::<Utc>::MIN_UTC);
    for (index, record) in records.iter().enumerate() {
        let seq = index + 1;
        let at = record.at().unwrap_or(last.1);
        let id = |suffix: &str| format!("sevt_{seq:08}{suffix}");
        resumed_last = matches!(record, LogRecord::Answer(_))
            || (stopped && matches!(record, LogRecord::Limits(_)));
        match record {
            LogRecord::Item(item) => {
                match &item.kind {
                    pod::ItemKind::User { text } => {
                        if in_turn {
                            out.push(idle(last, json!({"type": "end_turn"})));
                        }
                        match outcome.filter(|_| !outcome_told) {
                            Some(outcome) => out.push(outcome.defined(id(""), at)),
                            None => out.push(json!({
                                "id": id(""), "type": "user.message", "processed_at": at,
                                "content": [{"type": "text", "text": text}],
                            })),
                        }
                        outcome_told = true;
                        out.push(json!({"id": id("_running"), "type": "session.status_running", "processed_at": at}));
                        in_turn = true;
                        stopped = false;
                    }
                    pod::ItemKind::Assistant {
                        text,
                        tool_calls,
                        usage,
                        ..
                    } => {
                        // The model request that answered: sent after the
                        // record before it, ended when its answer committed.
                        let start = id("_req");
                        out.push(json!({
                        "id": start, "type": "span.model_request_start", "processed_at": last.1.max(DateTime::<Utc>::UNIX_EPOCH),
                    }));
                        if !text.trim().is_empty() {
                            out.push(json!({
                                "id": id(""), "type": "agent.message", "processed_at": at,
                                "content": [{"type": "text", "text": text}],
                            }));
                        }
                        for (n, call) in tool_calls.iter().enumerate() {
                            let event = id(&format!("_{n}"));
                            let input = match serde_json::from_str::<Value>(&call.arguments) {
                                Ok(Value::Object(input)) => Value::Object(input),
                                _ => json!({"arguments": call.arguments}),
                            };
                            calls.insert(call.id.clone(), event.clone());
                            if let Some((server, tool)) =
                                super::mcp::split_call(&call.name, &mcp_servers)
                            {
                                mcp_calls.insert(call.id.clone());
                                out.push(json!({
                                    "id": event, "type": "agent.mcp_tool_use", "processed_at": at,
                                    "mcp_server_name": server, "name": tool, "input": input,
                                }));
                                continue;
                            }
                            let kind = match seen.custom_tools.iter().any(|t| t.name == call.name) {
                                true => "agent.custom_tool_use",
                                false => "agent.tool_use",
                            };
                            out.push(json!({
                                "id": event, "type": kind, "processed_at": at,
                                "name": call.name, "input": input,
                            }));
                        }
                        let usage = usage.unwrap_or_default();
                        out.push(json!({
                        "id": id("_req_end"), "type": "span.model_request_end", "processed_at": at,
                        "model_request_start_id": start, "is_error": false,
                        "model_usage": {
                            "input_tokens": usage.prompt_tokens.saturating_sub(usage.cache_read_tokens),
                            "output_tokens": usage.completion_tokens,
                            "cache_read_input_tokens": usage.cache_read_tokens,
                            "cache_creation_input_tokens": 0,
                        },
                    }));
                    }
                    pod::ItemKind::ToolResult {
                        call_id,
                        content,
                        is_error,
                        ..
                    } => {
                        let call = calls
                            .get(call_id)
                            .cloned()
                            .unwrap_or_else(|| call_id.clone());
                        out.push(match (mcp_calls.contains(call_id), client_answered.contains(call_id)) {
                        (true, _) => json!({
                            "id": id(""), "type": "agent.mcp_tool_result", "processed_at": at,
                            "mcp_tool_use_id": call,
                            "content": [{"type": "text", "text": content}],
                            "is_error": is_error,
                        }),
                        (false, true) => json!({
                            "id": id(""), "type": "user.custom_tool_result", "processed_at": at,
                            "custom_tool_use_id": call,
                            "content": [{"type": "text", "text": content}],
                            "is_error": is_error,
                        }),
                        (false, false) => json!({
                            "id": id(""), "type": "agent.tool_result", "processed_at": at,
                            "tool_use_id": call,
                            "content": [{"type": "text", "text": content}],
                            "is_error": is_error,
                        }),
                    })
                    }
                    _ => {}
                }
            }
            LogRecord::Question(question) if in_turn => {
                let call = &question.request.call_id;
                let event = calls.get(call).cloned().unwrap_or_else(|| call.clone());
                out.push(idle(
                    (seq, at),
                    json!({"type": "requires_action", "event_ids": [event]}),
                ));
                in_turn = false;
            }
            LogRecord::Answer(answer) => {
                if answer.result.is_some() {
                    client_answered.insert(answer.call_id.clone());
                }
                if !in_turn {
                    out.push(json!({"id": id("_running"), "type": "session.status_running", "processed_at": at}));
                    in_turn = true;
                }
            }
            LogRecord::Ended(ended) if in_turn => {
                let reason = match ended.how {
                    EndedHow::Failed => "retries_exhausted",
                    EndedHow::Cancelled | EndedHow::Interrupted => "end_turn",
                };
                out.push(idle((seq, at), json!({"type": reason})));
                in_turn = false;
            }
            LogRecord::Verify(round) => {
                if let Some(outcome) = outcome {
                    out.extend(outcome.spans(seq, round));
                }
            }
            LogRecord::Stopped(_) if in_turn => {
                out.push(idle((seq, at), json!({"type": "budget_reached"})));
                in_turn = false;
                stopped = true;
            }
            LogRecord::Limits(_) if stopped && !in_turn => {
                out.push(json!({"id": id("_running"), "type": "session.status_running", "processed_at": at}));
                in_turn = true;
                stopped = false;
            }
            _ => {}
        }
        last = (seq, at);
    }
    if in_turn && !running && !resumed_last {
        out.push(idle(last, json!({"type": "end_turn"})));
    }
    out
}

/// `session.status_idle` after record `seq`.
fn idle((seq, at): (usize, DateTime<Utc>), stop_reason: Value) -> Value {
    json!({
        "id": format!("sevt_{seq:08}_idle"),
        "type": "session.status_idle",
        "processed_at": at,
        "stop_reason": stop_reason,
    })
}

/// The session's events now.
pub(super) async fn current(m: &Managed, id: Uuid) -> Result<Vec<Value>, Error> {
    // Whether it runs first: once it does not, the records read next hold
    // everything it did.
    let running = sessions::running(m, id).await;
    let session = sessions::get(m, &sessions::public_id(id)).await?;
    let seen = Seen {
        outcome: session.outcome.as_ref(),
        custom_tools: &session.agent.custom_tools,
        mcp_servers: &session.agent.mcp_servers,
    };
    Ok(translate(&sessions::records(m, id).await?, running, seen))
}

/// What `POST /v1/sessions/{id}/events` takes.
#[derive(Deserialize)]
struct SendBody {
    events: Vec<Value>,
}

/// `POST /v1/sessions/{id}/events`: `user.message` prompts the session
/// (its first starts it), `user.interrupt` cancels its turn; the events
/// are checked first, then acted on in order.
pub(crate) async fn send(
    State(m): State<Managed>,
    Path(id): Path<String>,
    body: Bytes,
) -> Result<Json<Value>, Error> {
    let send: SendBody = parse(&body)?;
    let session = sessions::get(&m, &id).await?;
    if session.archived_at.is_some() {
        return Err(Error::conflict(format!(
            "session {id} is archived: it takes no more events"
        )));
    }
    if send.events.is_empty() {
        return Err(Error::invalid("`events` is empty"));
    }
    enum Act {
        Message(String),
        Outcome(super::outcomes::Outcome),
        Interrupt,
        Answer(String, answers::Reply),
    }
    let mut acts = Vec::new();
    for event in &send.events {
        match event.get("type").and_then(Value::as_str) {
            Some("user.message") => acts.push(Act::Message(message_text(event)?)),
            Some("user.interrupt") => {
                if event.get("session_thread_id").is_some_and(|t| !t.is_null()) {
                    return Err(Error::unsupported("session threads"));
                }
                acts.push(Act::Interrupt)
            }
            Some("user.tool_confirmation") => {
                let (id, reply) = answers::confirmation(event)?;
                acts.push(Act::Answer(id, reply))
            }
            Some("user.custom_tool_result") => {
                let (id, reply) = answers::custom_tool_result(event)?;
                acts.push(Act::Answer(id, reply))
            }
            Some("user.define_outcome") => {
                if session.outcome.is_some() || !sessions::records(&m, session.id).await?.is_empty()
                {
                    return Err(Error::unsupported(
                        "an outcome defined after the session started (define it first, or in \
                         initial_events)",
                    ));
                }
                acts.push(Act::Outcome(super::outcomes::Outcome::parse(event)?))
            }
            Some(kind @ ("user.tool_result" | "system.message")) => {
                return Err(Error::unsupported(kind))
            }
            other => {
                return Err(Error::invalid(format!(
                    "unknown event type {}",
                    other.unwrap_or("(none)")
                )))
            }
        }
    }
    let mut data = Vec::new();
    for (act, event) in acts.into_iter().zip(&send.events) {
        let mut echoed = event.clone();
        if let Some(object) = echoed.as_object_mut() {
            object.insert(
                "id".into(),
                json!(format!("sevt_sent_{}", Uuid::new_v4().simple())),
            );
            object.insert("processed_at".into(), Value::Null);
        }
        match act {
            Act::Message(text) => {
                answers::refuse_when_waiting(&m, &session).await?;
                sessions::deliver(&m, &session, text).await?;
            }
            Act::Outcome(outcome) => {
                let mut session = session.clone();
                let text = outcome.description.clone();
                if let Some(object) = echoed.as_object_mut() {
                    object.insert("outcome_id".into(), json!(outcome.id));
                }
                session.outcome = Some(outcome);
                m.files
                    .put("sessions", &session.public_id(), &session)
                    .await?;
                sessions::deliver(&m, &session, text).await?;
            }
            Act::Answer(tool_use_id, reply) => {
                answers::answer(&m, &session, &tool_use_id, reply).await?;
            }
            Act::Interrupt => {
                // Nothing runs: nothing to interrupt.
                if m.app.runner.is_live(session.id) {
                    m.app.runner.cancel(session.id).await?;
                }
            }
        }
        data.push(echoed);
    }
    Ok(Json(json!({"data": data})))
}

/// `GET /v1/sessions/{id}/events`: oldest first (`order=desc`: newest
/// first), in pages; `types` (or `types[]`) filters.
pub(crate) async fn list(
    State(m): State<Managed>,
    Path(id): Path<String>,
    RawQuery(query): RawQuery,
) -> Result<Json<Value>, Error> {
    let session = sessions::get(&m, &id).await?;
    let pairs = query_pairs(query.as_deref());
    let types: Vec<&str> = pairs
        .iter()
        .filter(|(k, _)| k == "types" || k == "types[]")
        .map(|(_, v)| v.as_str())
        .collect();
    let mut events = current(&m, session.id).await?;
    if !types.is_empty() {
        events.retain(|e| types.iter().any(|t| e["type"] == *t));
    }
    if query_value(&pairs, "order") == Some("desc") {
        events.reverse();
    }
    let (data, next) = page(
        &events,
        query_value(&pairs, "limit"),
        query_value(&pairs, "page"),
    )?;
    Ok(Json(json!({"data": data, "next_page": next})))
}

#[cfg(test)]
mod tests {
    use super::*;
    use pod::Item;

    fn answer(text: &str, tool_calls: Vec<pod_llm::ToolCall>) -> LogRecord {
        LogRecord::Item(Item::new(pod::ItemKind::Assistant {
            text: text.into(),
            reasoning: None,
            tool_calls,
            usage: None,
        }))
    }

    fn types(events: &[Value]) -> Vec<&str> {
        events.iter().filter_map(|e| e["type"].as_str()).collect()
    }

    #[test]
    fn a_turn_translates_to_the_apis_events_and_ends_idle_when_nothing_runs() {
        let call = pod_llm::ToolCall {
            id: "call_1".into(),
            name: "read_file".into(),
            arguments: r#"{"path": "a.txt"}"#.into(),
        };
        let records = vec![
            LogRecord::Item(Item::user("Hi")),
            answer("Reading.", vec![call]),
            LogRecord::Item(Item::tool_result("call_1", "hello", false)),
            answer("Done.", Vec::new()),
        ];
        let running = translate(&records, true, Seen::default());
        assert_eq!(
            types(&running),
            [
                "user.message",
                "session.status_running",
                "span.model_request_start",
                "agent.message",
                "agent.tool_use",
                "span.model_request_end",
                "agent.tool_result",
                "span.model_request_start",
                "agent.message",
                "span.model_request_end"
            ]
        );
        assert_eq!(running[4]["input"]["path"], "a.txt");
        assert_eq!(running[6]["tool_use_id"], running[4]["id"]);
        assert_eq!(running[5]["model_request_start_id"], running[2]["id"]);
        let idle = translate(&records, false, Seen::default());
        assert_eq!(idle.len(), 11);
        assert_eq!(idle[10]["type"], "session.status_idle");
        assert_eq!(idle[10]["stop_reason"]["type"], "end_turn");
        // The next message keeps every earlier event and its id.
        let mut more = records.clone();
        more.push(LogRecord::Item(Item::user("Again")));
        let next = translate(&more, true, Seen::default());
        assert_eq!(next[..11], idle[..]);
        assert_eq!(
            types(&next[11..]),
            ["user.message", "session.status_running"]
        );
    }

    #[test]
    fn a_turn_that_failed_or_was_cancelled_ends_with_its_stop_reason() {
        let ended = |how| {
            LogRecord::Ended(pod::log::EndedRecord {
                how,
                reason: None,
                partial_answer: None,
                calls_not_made: Vec::new(),
                at: Utc::now(),
            })
        };
        for (how, reason) in [
            (EndedHow::Failed, "retries_exhausted"),
            (EndedHow::Cancelled, "end_turn"),
            (EndedHow::Interrupted, "end_turn"),
        ] {
            let records = vec![LogRecord::Item(Item::user("Hi")), ended(how)];
            // Its end is in the log: no second idle, running or not.
            for running in [true, false] {
                let events = translate(&records, running, Seen::default());
                assert_eq!(
                    types(&events),
                    [
                        "user.message",
                        "session.status_running",
                        "session.status_idle"
                    ]
                );
                assert_eq!(events[2]["stop_reason"]["type"], reason);
                assert_eq!(events[2]["id"], "sevt_00000002_idle");
            }
        }
    }
}
