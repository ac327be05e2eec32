//! The file store: `$POD_HOME/sessions/<id>/log.jsonl`, one process at a
//! time per session through an exclusive file lock.

use super::{LogWriter, OpenedLog, SessionStat, SessionStore};
use crate::durability::Durability;
use crate::error::PodError;
use crate::home::PodHome;
use crate::log::{
    is_locked, read_appended, read_log, read_log_before_damage, FileLog, LogContents, LogCursor,
    LogRecord, SessionHeader,
};
use chrono::{DateTime, Utc};
use std::sync::Arc;
use uuid::Uuid;

/// Sessions as files under a [`PodHome`]. Every append is written to the
/// file before it is acknowledged; the durability setting decides when it
/// is fsynced.
#[derive(Debug, Clone)]
pub struct FileStore {
    home: PodHome,
}

impl FileStore {
    /// The store under `home`.
    pub fn new(home: PodHome) -> Self {
        Self { home }
    }

    /// Its home.
    pub fn home(&self) -> &PodHome {
        &self.home
    }

    fn missing(&self, id: Uuid) -> PodError {
        PodError::NoSuchSession {
            id: id.to_string(),
            store: self.location(),
        }
    }
}

#[async_trait::async_trait]
impl SessionStore for FileStore {
    fn location(&self) -> String {
        self.home.path().display().to_string()
    }

    async fn create(
        &self,
        header: &SessionHeader,
        _durability: Durability,
    ) -> Result<LogWriter, PodError> {
        let id = header.session_id;
        let dir = self.home.create_session_dir(id)?;
        let path = dir.join(crate::home::LOG_FILE);
        let log = FileLog::create(&path, &LogRecord::Header(header.clone()))?;
        Ok(LogWriter::new(id, Arc::new(log)))
    }

    async fn open(&self, id: Uuid, _durability: Durability) -> Result<OpenedLog, PodError> {
        let path = self.home.log_path(id);
        if !path.is_file() {
            return Err(self.missing(id));
        }
        let (log, contents) = FileLog::open(&path)?;
        if let Some(header) = contents.header.as_ref().filter(|h| h.session_id != id) {
            // A log copied into another session's directory would otherwise
            // be resumed under the wrong id.
            return Err(PodError::CorruptLog {
                path,
                line: 1,
                reason: format!(
                    "the header names session {}, but the log is in the directory of {id}",
                    header.session_id
                ),
            });
        }
        Ok(OpenedLog {
            contents,
            writer: LogWriter::new(id, Arc::new(log)),
        })
    }

    async fn read(&self, id: Uuid) -> Result<LogContents, PodError> {
        let path = self.home.log_path(id);
        if !path.is_file() {
            return Err(self.missing(id));
        }
        // A long log takes a while to read: keep it off the async workers.
        tokio::task::spawn_blocking(move || read_log(&path))
            .await
            .map_err(|_| PodError::Closed)?
    }

    async fn read_before_damage(&self, id: Uuid) -> Result<LogContents, PodError> {
        let path = self.home.log_path(id);
        if !path.is_file() {
            return Err(self.missing(id));
        }
        tokio::task::spawn_blocking(move || read_log_before_damage(&path))
            .await
            .map_err(|_| PodError::Closed)?
    }

    async fn read_since(
        &self,
        id: Uuid,
        cursor: LogCursor,
    ) -> Result<(Vec<LogRecord>, LogCursor), PodError> {
        if cursor.bytes == 0 {
            // Nothing read yet, not even the header: read it whole.
            let mut contents = self.read(id).await?;
            let after = contents
                .records
                .split_off(cursor.records.min(contents.records.len()));
            return Ok((after, contents.cursor()));
        }
        let path = self.home.log_path(id);
        if !path.is_file() {
            return Err(self.missing(id));
        }
        // Usually a few lines, but a reader far behind reads more: off the
        // async workers, as `read`.
        tokio::task::spawn_blocking(move || read_appended(&path, cursor))
            .await
            .map_err(|_| PodError::Closed)?
    }

    async fn list(&self) -> Result<Vec<Uuid>, PodError> {
        self.home.session_ids()
    }

    async fn stat(&self, id: Uuid) -> Result<SessionStat, PodError> {
        let path = self.home.log_path(id);
        let modified = std::fs::metadata(&path)
            .and_then(|m| m.modified())
            .map_err(|source| match source.kind() {
                std::io::ErrorKind::NotFound => self.missing(id),
                _ => PodError::Io {
                    path: path.clone(),
                    source,
                },
            })?;
        Ok(SessionStat {
            updated_at: modified.into(),
            holder: is_locked(&path).then(|| "a pod process on this machine".to_string()),
            queued: false,
        })
    }

    fn log_location(&self, id: Uuid) -> String {
        self.home.log_path(id).display().to_string()
    }

    async fn remove(&self, id: Uuid) -> Result<(), PodError> {
        self.home.remove_session(id)
    }

    async fn import(
        &self,
        header: &SessionHeader,
        records: &[LogRecord],
        updated_at: DateTime<Utc>,
    ) -> Result<(), PodError> {
        // Refused here if the log exists: nothing of it is touched.
        let log = self.create(header, Durability::Always).await?;
        let mut written = Ok(());
        for record in records {
            written = log.append(record, false).await;
            if written.is_err() {
                break;
            }
        }
        let closed = log.shutdown().await;
        let id = header.session_id;
        let result = written
            .and(closed)
            .and_then(|()| set_modified(&self.home.log_path(id), updated_at));
        if result.is_err() {
            // No partial copy is left behind to be taken for a whole one.
            let _ = self.remove(id).await;
        }
        result
    }
}

/// Sets the log's modification time, which [`SessionStore::stat`] reads as
/// when the session was last written.
fn set_modified(path: &std::path::Path, at: DateTime<Utc>) -> Result<(), PodError> {
    std::fs::File::options()
        .write(true)
        .open(path)
        .and_then(|file| file.set_modified(at.into()))
        .map_err(|source| PodError::Io {
            path: path.to_path_buf(),
            source,
        })
}
