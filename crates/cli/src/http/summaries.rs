//! Session summaries for the API, read from the store and kept until the
//! session's log changes: listing a thousand sessions every second must not
//! replay a thousand logs every second.

use crate::session::{self, Summary};
use parking_lot::Mutex;
use pod::{SessionStat, SessionStore, TodoItem};
use std::collections::HashMap;
use std::sync::Arc;
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
    entries: Arc<Mutex<HashMap<Uuid, (SessionStat, Entry)>>>,
}

impl Summaries {
    /// Session `id`'s summary and todos.
    pub async fn get(&self, store: &dyn SessionStore, id: Uuid) -> anyhow::Result<Entry> {
        let stat = store.stat(id).await?;
        if let Some((seen, entry)) = self.entries.lock().get(&id) {
            if *seen == stat {
                return Ok(entry.clone());
            }
        }
        let loaded = session::load(store, id).await?;
        let entry = Entry {
            records: loaded.records.len(),
            summary: loaded.summary,
            todos: loaded.todos,
        };
        self.entries.lock().insert(id, (stat, entry.clone()));
        Ok(entry)
    }

    /// Every session's, most recently updated first; a damaged log is left
    /// out (and logged).
    pub async fn all(&self, store: &dyn SessionStore) -> anyhow::Result<Vec<Entry>> {
        let ids = store.list().await?;
        let mut entries = Vec::with_capacity(ids.len());
        for id in ids {
            match self.get(store, id).await {
                Ok(entry) => entries.push(entry),
                Err(err) => {
                    tracing::warn!(session = %id, err = %format!("{err:#}"), "session left out")
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
