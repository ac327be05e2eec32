//! Where session logs live: a [`SessionStore`] holds them, and a
//! [`LogWriter`] is the one writer of an open session.
//!
//! The Pod only ever talks to these two: it creates or opens a session,
//! replays the records it is given, and appends through the writer. Two
//! stores exist: [`FileStore`] (a directory per session under
//! [`PodHome`](crate::PodHome), the default, needing no setup) and the
//! PostgreSQL store of the `pod-store-pg` crate (a fleet of workers sharing
//! sessions). Both keep the records' JSON shape; both refuse a second
//! writer (a file lock here, a lease with an epoch there).
//!
//! A writer acknowledges an append only once the record is committed the
//! way its store commits: written to the file (and synced when asked) for
//! the file store, committed in a transaction for PostgreSQL. A writer that
//! lost its claim on the session (a lease taken over by another worker)
//! refuses every later append with [`PodError::LeaseLost`], so a paused or
//! partitioned worker can never write into a session someone else runs.

mod file;

pub use crate::log::LogContents;
pub use file::FileStore;

use crate::durability::Durability;
use crate::error::PodError;
use crate::log::{LogCursor, LogRecord, SessionHeader};
use chrono::{DateTime, Utc};
use std::fmt;
use std::path::Path;
use std::sync::Arc;
use uuid::Uuid;

/// A store of session logs, shared by every Pod that uses it.
#[async_trait::async_trait]
pub trait SessionStore: Send + Sync + fmt::Debug {
    /// Where the store is, for messages (a directory, or a database URL
    /// without its password).
    fn location(&self) -> String;

    /// Creates a session whose log starts with `header` and opens it for
    /// appending; the header is durable when this returns.
    async fn create(
        &self,
        header: &SessionHeader,
        durability: Durability,
    ) -> Result<LogWriter, PodError>;

    /// Opens session `id` for appending: its verified records and the writer
    /// that continues after them. Only one writer at a time: a session open
    /// elsewhere is refused with [`PodError::SessionBusy`].
    async fn open(&self, id: Uuid, durability: Durability) -> Result<OpenedLog, PodError>;

    /// Reads session `id`'s log without opening it (it may be running).
    async fn read(&self, id: Uuid) -> Result<LogContents, PodError>;

    /// Reads session `id`'s log up to its first damaged line, which ends the
    /// read instead of failing it ([`LogContents::damage`] says where). A
    /// store whose records cannot be damaged apart (a database's rows)
    /// reads them all.
    async fn read_before_damage(&self, id: Uuid) -> Result<LogContents, PodError> {
        self.read(id).await
    }

    /// Where this store keeps the windows of its profiles' shared limits
    /// (`[limits]`), for every process using it; `None` (the default, the
    /// file store's): each process keeps its own
    /// ([`crate::shared_limits::in_process`]).
    fn shared_limits(&self) -> Option<std::sync::Arc<dyn crate::shared_limits::SharedLimits>> {
        None
    }

    /// The records of session `id` after its first `skip` (the header not
    /// counted): what a watcher polling a session by sequence has not seen.
    async fn read_after(&self, id: Uuid, skip: usize) -> Result<Vec<LogRecord>, PodError> {
        let mut records = self.read(id).await?.records;
        Ok(records.split_off(skip.min(records.len())))
    }

    /// What session `id`'s log gained after `cursor` (from [`read`]'s
    /// [`LogContents::cursor`] or an earlier call), and the cursor after
    /// it: what one reader following a running session reads each time.
    /// A store that can reads only what was appended (the file store: the
    /// bytes after the cursor); the default reads [`read_after`]. A record
    /// still being written is not returned until it is whole.
    ///
    /// [`read`]: Self::read
    /// [`read_after`]: Self::read_after
    async fn read_since(
        &self,
        id: Uuid,
        cursor: LogCursor,
    ) -> Result<(Vec<LogRecord>, LogCursor), PodError> {
        let records = self.read_after(id, cursor.records).await?;
        let cursor = LogCursor {
            records: cursor.records + records.len(),
            ..cursor
        };
        Ok((records, cursor))
    }

    /// Every session's id, unordered.
    async fn list(&self) -> Result<Vec<Uuid>, PodError>;

    /// When session `id` was last written and who has it open.
    async fn stat(&self, id: Uuid) -> Result<SessionStat, PodError>;

    /// Where session `id`'s log is, for people: a file path, or the
    /// database and the session.
    fn log_location(&self, id: Uuid) -> String;

    /// Deletes session `id`; refused with [`PodError::SessionBusy`] while
    /// it is open.
    async fn remove(&self, id: Uuid) -> Result<(), PodError>;

    /// Writes a whole session copied from another store (`pod store
    /// import`, `export`): `header`, then `records`, so that
    /// [`stat`](Self::stat) says it was last written at `updated_at`, as
    /// the original was, not when it was copied. Refused if the session is
    /// here already; a copy that fails part way is removed.
    async fn import(
        &self,
        header: &SessionHeader,
        records: &[LogRecord],
        updated_at: DateTime<Utc>,
    ) -> Result<(), PodError>;
}

/// What a store knows about a session besides its records.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionStat {
    /// When its log was last written.
    pub updated_at: DateTime<Utc>,
    /// Who has it open now, if anyone: a process on this machine, or the
    /// fleet worker holding its lease.
    pub holder: Option<String>,
    /// Whether it waits for a fleet worker: queued, or its worker died
    /// and another will claim it.
    pub queued: bool,
}

/// A shared handle to a store.
pub type Store = Arc<dyn SessionStore>;

/// A session opened for appending.
#[derive(Debug)]
pub struct OpenedLog {
    /// What the log holds: header, records and (file store) torn tail.
    pub contents: LogContents,
    /// The session's writer, continuing after `contents`.
    pub writer: LogWriter,
}

/// The writing end of one open session, as a store implements it.
#[async_trait::async_trait]
pub trait LogSink: Send + Sync + fmt::Debug {
    /// Appends `record`; returns once it is committed (and, where the store
    /// tells the two apart, made durable if `sync`).
    async fn append(&self, record: &LogRecord, sync: bool) -> Result<(), PodError>;

    /// Makes everything appended so far durable.
    async fn sync(&self) -> Result<(), PodError>;

    /// Makes everything durable and gives the session up (releases its
    /// lock or lease), so it can be opened again at once.
    async fn shutdown(&self) -> Result<(), PodError>;

    /// Gives the session up like [`shutdown`](Self::shutdown), saying what
    /// it waits for: a store whose workers continue sessions (PostgreSQL)
    /// hands it to them so, in the same step as it releases the lease.
    /// Returns whether it did; a store without workers (the file store)
    /// only shuts down and returns `false`: whoever resumes the session
    /// next continues it.
    async fn hand_over(&self, waits: Waits) -> Result<bool, PodError> {
        let _ = waits;
        self.shutdown().await.map(|()| false)
    }

    /// The log file, for the file store.
    fn path(&self) -> Option<&Path> {
        None
    }
}

/// What a session given up waits for ([`LogSink::hand_over`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Waits {
    /// A person's answer to its open question: a worker continues it once
    /// answered, or at `wake_at` (the question's timeout) if there is one.
    Answer {
        /// When the question times out.
        wake_at: Option<DateTime<Utc>>,
    },
    /// Nothing but a worker: it has an answer to act on.
    Worker,
    /// Its time: a follow-up the agent scheduled (`schedule_followup`); a
    /// worker continues it at `at`.
    Until {
        /// When.
        at: DateTime<Utc>,
    },
    /// A limit its profile shares with other sessions ([`crate::shared_limits`]):
    /// a worker continues it once the limit's window ends at `until`, or
    /// when a worker starts (with a limit raised, perhaps).
    Limit {
        /// When the window ends.
        until: DateTime<Utc>,
    },
}

/// The cloneable writer of one open session.
#[derive(Clone, Debug)]
pub struct LogWriter {
    session_id: Uuid,
    sink: Arc<dyn LogSink>,
}

impl LogWriter {
    /// A writer for session `session_id` over `sink`.
    pub fn new(session_id: Uuid, sink: Arc<dyn LogSink>) -> Self {
        Self { session_id, sink }
    }

    /// The session this writer appends to.
    pub fn session_id(&self) -> Uuid {
        self.session_id
    }

    /// The log file, for a session in the file store.
    pub fn path(&self) -> Option<&Path> {
        self.sink.path()
    }

    /// Appends a record; returns once it is committed (and synced if `sync`).
    pub async fn append(&self, record: &LogRecord, sync: bool) -> Result<(), PodError> {
        let start = std::time::Instant::now();
        let appended = self.sink.append(record, sync).await;
        if appended.is_ok() {
            crate::stats::appended(start.elapsed());
        }
        appended
    }

    /// Syncs everything appended so far.
    pub async fn sync(&self) -> Result<(), PodError> {
        self.sink.sync().await
    }

    /// Syncs and gives the session up.
    pub async fn shutdown(&self) -> Result<(), PodError> {
        self.sink.shutdown().await
    }

    /// Syncs and gives the session up to what it `waits` for; whether the
    /// store hands it to its workers (see [`LogSink::hand_over`]).
    pub async fn hand_over(&self, waits: Waits) -> Result<bool, PodError> {
        self.sink.hand_over(waits).await
    }
}
