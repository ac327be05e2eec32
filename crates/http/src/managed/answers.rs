//! What answers a session that waits (`session.status_idle` with
//! `requires_action`): `user.tool_confirmation` allows or denies a call
//! pod asked about; `user.custom_tool_result` is the result of a call of
//! one of the agent's custom tools, which the client ran. Both answer the
//! question the session is parked on, recorded in its log first (so they
//! survive a restart), and the session goes on here, as an answer through
//! `POST /api/approvals/ID` makes it.

use super::error::Error;
use super::events::current;
use super::sessions::Session;
use super::Managed;
use serde_json::Value;
use std::time::Duration;

/// How long a custom tool's result waits for its session to park on the
/// call: the client may answer as soon as it sees `agent.custom_tool_use`,
/// a moment before the question is in the log. A session still running
/// after this is not waiting for the result.
const RESULT_WAIT: Duration = Duration::from_secs(30);

/// Between looks at the session while a result waits for it to park.
const RESULT_POLL: Duration = Duration::from_millis(50);

/// An answer to the call a session waits on.
pub(super) enum Reply {
    /// `user.tool_confirmation`: allow (or deny) it.
    Confirm(bool),
    /// `user.custom_tool_result`: its result.
    Result(pod::ClientResult),
}

/// A `user.tool_confirmation`: the call's event id and the answer.
pub(super) fn confirmation(event: &Value) -> Result<(String, Reply), Error> {
    let Some(tool_use_id) = event.get("tool_use_id").and_then(Value::as_str) else {
        return Err(Error::invalid(
            "a user.tool_confirmation needs `tool_use_id`",
        ));
    };
    let allow = match event.get("result").and_then(Value::as_str) {
        Some("allow") => true,
        Some("deny") => false,
        _ => return Err(Error::invalid("`result` must be allow or deny")),
    };
    Ok((tool_use_id.to_string(), Reply::Confirm(allow)))
}

/// A `user.custom_tool_result`: the call's event id and its result (the
/// text blocks of `content`, joined; none is an empty result).
pub(super) fn custom_tool_result(event: &Value) -> Result<(String, Reply), Error> {
    let Some(tool_use_id) = event.get("custom_tool_use_id").and_then(Value::as_str) else {
        return Err(Error::invalid(
            "a user.custom_tool_result needs `custom_tool_use_id`",
        ));
    };
    let content = match event.get("content") {
        None | Some(Value::Null) => String::new(),
        Some(Value::Array(blocks)) => super::request::blocks_text(blocks, "tool results")?,
        Some(_) => return Err(Error::invalid("`content` must be a list of blocks")),
    };
    let is_error = match event.get("is_error") {
        None | Some(Value::Null) => false,
        Some(Value::Bool(is_error)) => *is_error,
        Some(_) => return Err(Error::invalid("`is_error` must be true or false")),
    };
    let result = pod::ClientResult { content, is_error };
    Ok((tool_use_id.to_string(), Reply::Result(result)))
}

/// Answers the question `session` is parked on, if it is about the call
/// `tool_use_id` names (its `agent.tool_use` or `agent.custom_tool_use`
/// event) and the answer is of its kind. A custom tool's result that comes
/// while the session is still on its way to park at that call waits for
/// it (up to [`RESULT_WAIT`]).
pub(super) async fn answer(
    m: &Managed,
    session: &Session,
    tool_use_id: &str,
    reply: Reply,
) -> Result<(), Error> {
    let id = session.public_id();
    let deadline = tokio::time::Instant::now() + RESULT_WAIT;
    let (question, events) = loop {
        let entry = m
            .app
            .summaries
            .get(m.app.store.as_ref(), session.id)
            .await
            .map_err(|e| Error::internal(format!("{e:#}")))?;
        let events = current(m, session.id).await?;
        if let (Some(question), Some(_)) = (entry.summary.question, waiting_on(&events)) {
            break (question, events);
        }
        let parking = matches!(reply, Reply::Result(_)) && unanswered(&events, tool_use_id);
        if !parking || tokio::time::Instant::now() >= deadline {
            return Err(Error::conflict(format!(
                "session {id} waits for no tool confirmation or custom tool result"
            )));
        }
        tokio::time::sleep(RESULT_POLL).await;
    };
    let asked = waiting_on(&events).unwrap_or_default();
    if asked != tool_use_id {
        return Err(Error::conflict(format!(
            "session {id} waits for an answer about {asked}, not {tool_use_id}"
        )));
    }
    let custom = kind_of(&events, asked) == Some("agent.custom_tool_use");
    let reply = match (reply, custom) {
        (Reply::Confirm(allow), false) => pod::questions::Reply::Decision(match allow {
            true => pod::ApprovalDecision::AllowOnce,
            false => pod::ApprovalDecision::RejectOnce,
        }),
        (Reply::Result(result), true) => pod::questions::Reply::Result(result),
        (Reply::Confirm(_), true) => {
            return Err(Error::invalid(format!(
                "{asked} is a call of a custom tool: answer it with user.custom_tool_result"
            )))
        }
        (Reply::Result(_), false) => {
            return Err(Error::invalid(format!(
                "{asked} is a call of pod's own tools: answer it with user.tool_confirmation"
            )))
        }
    };
    let bound = crate::runner::Binding {
        session_id: Some(session.id),
        call_id: Some(question.request.call_id.clone()),
    };
    let by = pod::questions::Answerer::via("managed-agents");
    m.app
        .runner
        .answer_parked(session.id, &question, &bound, reply, &by)
        .await?;
    Ok(())
}

/// The event id of the call the session waits on: the first of the last
/// `session.status_idle`'s `requires_action` when it is the last event.
fn waiting_on(events: &[Value]) -> Option<&str> {
    let last = events.last()?;
    (last["type"] == "session.status_idle" && last["stop_reason"]["type"] == "requires_action")
        .then(|| last["stop_reason"]["event_ids"][0].as_str())
        .flatten()
}

/// The type of event `id`.
fn kind_of<'a>(events: &'a [Value], id: &str) -> Option<&'a str> {
    events
        .iter()
        .find(|e| e["id"] == id)
        .and_then(|e| e["type"].as_str())
}

/// Whether `id` is a custom tool's call that has no result yet.
fn unanswered(events: &[Value], id: &str) -> bool {
    kind_of(events, id) == Some("agent.custom_tool_use")
        && !events
            .iter()
            .any(|e| e["custom_tool_use_id"] == id || e["tool_use_id"] == id)
}

/// A session parked on a question takes no message until it is answered.
pub(super) async fn refuse_when_waiting(m: &Managed, session: &Session) -> Result<(), Error> {
    let events = current(m, session.id).await?;
    match waiting_on(&events) {
        Some(asked) => {
            let answer = match kind_of(&events, asked) {
                Some("agent.custom_tool_use") => "user.custom_tool_result",
                _ => "user.tool_confirmation",
            };
            Err(Error::conflict(format!(
                "session {} waits for an answer about {asked}: send {answer} first",
                session.public_id()
            )))
        }
        None => Ok(()),
    }
}
