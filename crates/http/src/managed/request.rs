//! What the API's resources share to make the native API's requests: a
//! session's request for the runner (checked against the ceiling), and a
//! `user.message`'s text. A leaf under agents, environments, sessions and
//! events.

use super::error::Error;
use crate::runner::CreateSession;
use serde_json::{json, Value};

/// The native API's request for a session on `workspace` starting with
/// `task`: what the runner checks against the ceiling and starts.
pub(crate) fn request(
    task: &str,
    profile: Option<String>,
    workspace: &std::path::Path,
    network: Option<bool>,
) -> Result<CreateSession, Error> {
    let mut value = json!({"task": task, "workspace": workspace});
    if let Some(profile) = profile {
        value["profile"] = json!(profile);
    }
    if let Some(network) = network {
        value["network"] = json!(network);
    }
    serde_json::from_value(value)
        .map_err(|e| Error::internal(format!("cannot make the session's request: {e}")))
}

/// The text of a `user.message` event: its text blocks, joined.
pub(crate) fn message_text(event: &Value) -> Result<String, Error> {
    let Some(blocks) = event.get("content").and_then(Value::as_array) else {
        return Err(Error::invalid(
            "a user.message needs `content`: a list of blocks",
        ));
    };
    let text = blocks_text(blocks, "messages")?;
    if text.trim().is_empty() {
        return Err(Error::invalid("the user.message has no text"));
    }
    Ok(text)
}

/// The text of content `blocks` (in `what`, for the error naming a block
/// pod does not take): their text, joined by newlines.
pub(crate) fn blocks_text(blocks: &[Value], what: &str) -> Result<String, Error> {
    let mut text = Vec::new();
    for block in blocks {
        match block.get("type").and_then(Value::as_str) {
            Some("text") => match block.get("text").and_then(Value::as_str) {
                Some(t) => text.push(t),
                None => return Err(Error::invalid("a text block needs `text`")),
            },
            Some(other) => return Err(Error::unsupported(&format!("{other} blocks in {what}"))),
            None => return Err(Error::invalid("a content block needs a `type`")),
        }
    }
    Ok(text.join("\n"))
}
