//! Session summaries for the API, read from the store and kept until the
//! session's log changes: listing a thousand sessions every second must not
//! replay a thousand logs every second.

use parking_lot::Mutex;
use pod::{SessionStat, SessionStore, TodoItem};
use pod_launch::sessions::{self as session, Summary};
use pod_launch::LaunchError;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};
use uuid::Uuid;

/// A session as the API shows it.
#[derive(Clone)]
pub struct Entry {
    pub summary: Summary,
    pub todos: Vec<TodoItem>,
    /// Records after the header (the last sequence number).
    pub records: usize,
}

/// The cache, by session; an entry is good while the session's stat is
/// the same.
#[derive(Clone, Default)]
pub struct Summaries {
    entries: Arc<Mutex<HashMap<Uuid, Cached>>>,
}

/// An entry with the stat it was read at and when.
struct Cached {
    stat: SessionStat,
    at: Instant,
    entry: Entry,
}

/// How long a running session's summary is trusted with an unchanged stat:
/// a log's modification time moves in clock ticks, so several writes in
/// one tick leave it the same.
const RUNNING_TTL: Duration = Duration::from_secs(1);

impl Summaries {
    /// Session `id`'s summary and todos.
    pub async fn get(&self, store: &dyn SessionStore, id: Uuid) -> Result<Entry, LaunchError> {
        let stat = store
            .stat(id)
            .await
            .map_err(|err| LaunchError::pod(format!("cannot stat session {id}"), err))?;
        if let Some(cached) = self.entries.lock().get(&id) {
            let fresh = stat.holder.is_none() || cached.at.elapsed() < RUNNING_TTL;
            if cached.stat == stat && fresh {
                return Ok(cached.entry.clone());
            }
        }
        let entry = match session::load(store, id).await {
            Ok(loaded) => Entry {
                records: loaded.records.len(),
                summary: loaded.summary,
                todos: loaded.todos,
            },
            Err(err) if matches!(err.pod_error(), Some(pod::PodError::NoSuchSession { .. })) => {
                return Err(err)
            }
            // A log that cannot be read is shown as damaged, with where;
            // it is read again only when it changes.
            Err(err) => Entry {
                records: 0,
                summary: session::damaged(id, Some(stat.clone()), store.log_location(id), &err),
                todos: Vec::new(),
            },
        };
        let cached = Cached {
            stat,
            at: Instant::now(),
            entry: entry.clone(),
        };
        self.entries.lock().insert(id, cached);
        Ok(entry)
    }

    /// Every session's, most recently updated first; a damaged log is a
    /// `damaged` entry, and a session removed meanwhile is left out.
    pub async fn all(&self, store: &dyn SessionStore) -> Result<Vec<Entry>, LaunchError> {
        let ids = store
            .list()
            .await
            .map_err(|err| LaunchError::pod("cannot list the sessions", err))?;
        let mut entries = Vec::with_capacity(ids.len());
        for id in ids {
            match self.get(store, id).await {
                Ok(entry) => entries.push(entry),
                Err(err) => {
                    tracing::warn!(session = %id, err = %pod_llm::error_chain(&err), "session left out")
                }
            }
        }
        entries.sort_by(|a, b| {
            b.summary
                .updated_at
                .cmp(&a.summary.updated_at)
                .then(a.summary.id.cmp(&b.summary.id))
        });
        Ok(entries)
    }
}
