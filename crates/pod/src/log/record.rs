//! What a log line holds.

use chrono::{DateTime, Utc};
use pod_llm::Item;
use serde::{Deserialize, Serialize};
use std::path::PathBuf;
use uuid::Uuid;

/// Version of the log format (framing and record kinds).
pub const LOG_FORMAT_VERSION: u32 = 1;

/// One line of a session log.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LogRecord {
    /// The first line: what the session is.
    Header(SessionHeader),
    /// A committed history item.
    Item(Item),
}

/// The first line of every session log.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SessionHeader {
    /// Log format version ([`LOG_FORMAT_VERSION`]).
    pub format_version: u32,
    /// Item JSON version ([`pod_llm::ITEM_FORMAT_VERSION`]).
    pub item_format_version: u32,
    /// The session id (also the directory name).
    pub session_id: Uuid,
    /// When the session was created.
    pub created_at: DateTime<Utc>,
    /// The model the session started with.
    pub model: String,
    /// The workspace directory.
    pub workspace: PathBuf,
    /// The session this one was forked from, with the item count taken.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub forked_from: Option<(Uuid, usize)>,
}

impl SessionHeader {
    /// A header for a new session.
    pub fn new(session_id: Uuid, model: String, workspace: PathBuf) -> Self {
        Self {
            format_version: LOG_FORMAT_VERSION,
            item_format_version: pod_llm::ITEM_FORMAT_VERSION,
            session_id,
            created_at: Utc::now(),
            model,
            workspace,
            forked_from: None,
        }
    }
}
