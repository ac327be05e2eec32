//! The read-before-edit tracker: which files the model has read, and what
//! they held at that moment.
//!
//! `edit_file` and an overwriting `write_file` are refused on a file the
//! model has not read, or that changed on disk since (compared by content
//! hash), so the model never edits from a stale or imagined copy. State is
//! session-lifetime: the tools attach a [`FileMeta`] to every successful
//! result, and the tracker records it when the result is committed (its
//! [`ToolState`]), live and on replay alike; nothing is stored anywhere else.

use parking_lot::Mutex;
use pod_worker::{CommittedCall, ToolState};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fs::Metadata;
use std::sync::Arc;
use std::time::UNIX_EPOCH;

/// The key under which a tool result's meta carries its [`FileMeta`].
pub const FILE_META_KEY: &str = "file";

/// What a file held at one moment.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileStamp {
    /// `xxh3-128:` and the hex digest of the content.
    pub hash: String,
    /// Size in bytes.
    pub size: u64,
    /// Modification time, nanoseconds since the Unix epoch, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mtime_ns: Option<u64>,
}

impl FileStamp {
    /// The stamp of `content` with the file's metadata.
    pub fn new(content: &[u8], metadata: Option<&Metadata>) -> Self {
        let mtime_ns = metadata
            .and_then(|m| m.modified().ok())
            .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
            .and_then(|d| u64::try_from(d.as_nanos()).ok());
        Self {
            hash: content_hash(content),
            size: content.len() as u64,
            mtime_ns,
        }
    }
}

/// The content hash used in stamps. xxh3 is not cryptographic: it detects
/// change, it does not resist a forger, and nobody here forges.
pub fn content_hash(content: &[u8]) -> String {
    format!("xxh3-128:{:032x}", xxhash_rust::xxh3::xxh3_128(content))
}

/// Replay data a file tool attaches to a successful result.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileMeta {
    /// The path relative to the workspace root.
    pub path: String,
    /// What the file held after the call.
    #[serde(flatten)]
    pub stamp: FileStamp,
}

impl FileMeta {
    /// The meta value to attach to a tool result.
    pub fn to_value(&self) -> serde_json::Value {
        serde_json::json!({ FILE_META_KEY: self })
    }

    /// Reads a result's meta, if it carries a file stamp.
    pub fn from_value(meta: &serde_json::Value) -> Option<Self> {
        serde_json::from_value(meta.get(FILE_META_KEY)?.clone()).ok()
    }
}

/// Why a write to an existing file is refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum StaleError {
    /// Never read in this session.
    #[error("`{0}` has not been read in this session. Call read_file on it first, then retry")]
    NotRead(String),
    /// Read before a compaction: the model's copy is gone from its context.
    #[error(
        "`{0}` was read before the context was compacted, so its content is no longer in view. \
         Call read_file on it again, then retry"
    )]
    ReadRequired(String),
    /// Changed on disk since the model read or wrote it.
    #[error(
        "`{path}` changed on disk since you last read it ({before} bytes then, {after} bytes now). \
         Call read_file on it again and make your change against the current content"
    )]
    Changed {
        /// The path.
        path: String,
        /// Size when read.
        before: u64,
        /// Size now.
        after: u64,
    },
}

#[derive(Clone, Debug)]
struct Known {
    stamp: FileStamp,
    read_required: bool,
}

#[derive(Debug, Default)]
struct Inner {
    // Keyed by path relative to the workspace root, ordered so lists are stable.
    files: BTreeMap<String, Known>,
}

/// The session's read-before-edit state, shared between the file tools and
/// the session owner. The lock is held only to look up or update one entry.
#[derive(Clone, Debug, Default)]
pub struct FileTracker(Arc<Mutex<Inner>>);

impl FileTracker {
    /// A tracker that knows no file.
    pub fn new() -> Self {
        Self::default()
    }

    /// The model now knows `path` as `stamp` (it read or wrote it). In a
    /// session only the committed results of the file tools call this,
    /// through the tracker's [`ToolState`].
    pub fn record(&self, path: &str, stamp: FileStamp) {
        self.0.lock().files.insert(
            path.to_string(),
            Known {
                stamp,
                read_required: false,
            },
        );
    }

    /// Checks that the model may overwrite `path`, which holds `current`.
    pub fn check_writable(&self, path: &str, current: &FileStamp) -> Result<(), StaleError> {
        let inner = self.0.lock();
        let Some(known) = inner.files.get(path) else {
            return Err(StaleError::NotRead(path.into()));
        };
        if known.read_required {
            return Err(StaleError::ReadRequired(path.into()));
        }
        if known.stamp.hash != current.hash {
            return Err(StaleError::Changed {
                path: path.into(),
                before: known.stamp.size,
                after: current.size,
            });
        }
        Ok(())
    }

    /// The stamp the model knows for `path`, if any.
    pub fn stamp(&self, path: &str) -> Option<FileStamp> {
        self.0.lock().files.get(path).map(|k| k.stamp.clone())
    }

    /// After a compaction: every known file must be read again before it is
    /// edited. Returns those files, sorted.
    pub fn mark_read_required(&self) -> Vec<String> {
        let mut inner = self.0.lock();
        inner
            .files
            .iter_mut()
            .map(|(path, known)| {
                known.read_required = true;
                path.clone()
            })
            .collect()
    }

    /// Every file the tracker knows, sorted.
    pub fn known(&self) -> Vec<String> {
        self.0.lock().files.keys().cloned().collect()
    }

    /// Files that must be read again before editing, sorted.
    pub fn read_required(&self) -> Vec<String> {
        let inner = self.0.lock();
        inner
            .files
            .iter()
            .filter(|(_, k)| k.read_required)
            .map(|(p, _)| p.clone())
            .collect()
    }
}

/// The file tools' shared state: a committed, successful result of
/// `read_file`, `write_file` or `edit_file` records the stamp it carries; an
/// error or skipped call changed nothing.
impl ToolState for FileTracker {
    fn apply(&self, call: &CommittedCall<'_>) {
        if call.is_error {
            return;
        }
        if let Some(file) = call.meta.and_then(FileMeta::from_value) {
            self.record(&file.path, file.stamp);
        }
    }

    /// Every file the model knew is out of view once a summary replaces the
    /// reads: it must read them again before editing.
    fn compacted(&self) {
        self.mark_read_required();
    }

    fn clear(&self) {
        self.0.lock().files.clear();
    }
}
