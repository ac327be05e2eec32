//! Sessions in PostgreSQL, so that any worker of a fleet can run any session
//! and a session outlives the machine that started it.
//!
//! [`PgStore`] is a [`pod::SessionStore`]: a Pod started with it
//! (`PodConfig::store`) keeps its log in two tables, `pod_sessions` (one row
//! per session: its lease) and `pod_records` (one row per log record, keyed
//! by `(session, seq)`, the record's JSON as the file store writes it).
//!
//! # Leases and fencing
//! Opening a session takes its lease: `owner`, an `epoch` bumped by every
//! taker, and an expiry renewed while it is open. Every append is part of
//! a single statement that inserts the record only while the session row
//! still carries the writer's epoch, holding a share lock on that row for
//! the statement, so a takeover (which updates the row) waits for appends in
//! flight and every later append of the old writer finds the new epoch and
//! inserts nothing. The writer then fails with [`pod::PodError::LeaseLost`]
//! and its Pod stops. A worker paused past its lease (SIGSTOP, a partition,
//! a long GC) therefore never writes again once someone else took over.
//!
//! # Connections and group commit
//! A store holds a bounded set of connections
//! ([`PgStoreConfig::connections`], default [`DEFAULT_POOL_SIZE`]) that
//! all its sessions share: an open session holds no connection. Appends of
//! many sessions that arrive together are committed as one statement (one
//! transaction, one WAL flush), each fenced on its own session's epoch: a
//! session whose lease was taken over is refused without failing the
//! others. All of a store's leases are renewed by one statement per
//! renewal period, and fleet claims come in batches
//! ([`PgStore::claim_many`]).
//!
//! # Durability
//! An append is acknowledged once the transaction holding it has
//! committed. Under the `always` and `turn` durability settings the commit
//! is synchronous (the WAL is flushed, on the primary and on synchronous
//! standbys if the server has them); a batch holding only `never` appends
//! commits with `synchronous_commit = off`: a crash of the worker still
//! loses nothing acknowledged, a crash of the database server may lose the
//! last fraction of a second.
//!
//! # Shared limits
//! A profile's `[limits]` (money, tokens, requests per UTC minute, hour or
//! day) are held for the whole fleet in `pod_limit_windows`
//! ([`pod::shared_limits::SharedLimits`] on [`PgStore`]): a request
//! reserves its estimate with a conditional upsert, its answer settles.
//! A session a limit stops is parked until the window ends, or until a
//! worker starts ([`PgStore::wake_limited`]).
//!
//! Schema migrations ship with the crate ([`migrate`]) and run when a store
//! connects, serialized between workers by an advisory lock.
#![deny(missing_docs)]

mod commit;
mod db;
mod documents;
mod error;
mod health;
mod leases;
mod limits;
mod log;
mod pool;
mod queue;
mod releases;
mod schedules;
mod schema;
mod store;
mod url;

pub use commit::MAX_BATCH;
pub use error::PgStoreError;
pub use health::Availability;
pub use pool::DEFAULT_POOL_SIZE;
pub use queue::{Claimed, SessionState};
pub use schedules::{Acted, Fire, Fired, NewSchedule, Overlap, Schedule};
pub use schema::{migrate, SCHEMA_VERSION};
pub use store::{PgStore, PgStoreConfig, StoreStats};
pub use url::{is_postgres_url, redact};
