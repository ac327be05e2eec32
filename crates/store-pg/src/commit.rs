//! Group commit: the appends of many sessions that arrive together go to
//! the database as one statement (one transaction, one WAL flush), each
//! still fenced on its own session's epoch.
//!
//! Appends queue on a channel. A committing lane takes everything queued
//! (up to [`MAX_BATCH`]) and inserts it with one `INSERT … SELECT FROM
//! unnest(…)`; while every lane is busy, the next batch grows. Each append
//! is answered only after its batch committed, so "acknowledged means
//! committed" holds as before. One session has at most one append in flight
//! (its writer waits for the answer), so a batch holds at most one record
//! per session and a session's records commit in order.

use crate::pool::{Pool, Pooled};
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{mpsc, oneshot, Semaphore};
use tokio_postgres::error::SqlState;
use uuid::Uuid;

/// The most records in one statement: bounded so that one batch's
/// arrays (and its row locks) stay small even when ten thousand sessions
/// append at once.
pub const MAX_BATCH: usize = 1024;

/// Attempts at a batch that a deadlock or serialization failure aborted,
/// after 200 ms, 400 ms, … 3.2 s. An unreachable database is waited for
/// instead ([`crate::health`]).
const RETRIES: u32 = 5;

/// Inserts the records of the batch whose session row still carries the
/// record's epoch. `FOR SHARE` holds those rows until the commit: a
/// takeover's `UPDATE` waits for the batch, and a batch that starts after
/// it finds the new epoch and inserts nothing for that session (and
/// everything for the others). Rows are locked in id order, as the
/// renewal locks them, so the two never deadlock. A record already stored
/// at its `(session, seq)` is left alone (`ON CONFLICT DO NOTHING`) and
/// judged after the statement: ours (a retry of a commit whose answer was
/// lost), or someone else's.
const INSERT_BATCH: &str = "
    WITH batch AS (
        SELECT * FROM unnest($1::uuid[], $2::bigint[], $3::bigint[], $4::text[])
            AS b(session_id, epoch, seq, record)
    ), fence AS (
        SELECT s.id, s.epoch FROM pod_sessions s
        JOIN (SELECT DISTINCT session_id, epoch FROM batch) w
          ON s.id = w.session_id AND s.epoch = w.epoch
        ORDER BY s.id
        FOR SHARE OF s
    )
    INSERT INTO pod_records (session_id, seq, epoch, record)
    SELECT b.session_id, b.seq, b.epoch, b.record::json
    FROM batch b JOIN fence f ON f.id = b.session_id AND f.epoch = b.epoch
    ON CONFLICT (session_id, seq) DO NOTHING
    RETURNING session_id, seq";

/// What is stored where the batch inserted nothing.
const STORED: &str = "
    SELECT r.session_id, r.seq, r.epoch, r.record::text FROM pod_records r
    JOIN unnest($1::uuid[], $2::bigint[]) AS m(session_id, seq)
      ON r.session_id = m.session_id AND r.seq = m.seq";

/// One record to append.
pub(crate) struct Append {
    pub session: Uuid,
    pub epoch: i64,
    pub seq: i64,
    pub text: String,
    /// Whether its commit must wait for the WAL flush (`synchronous_commit`
    /// on). A batch waits when any of its records must.
    pub durable: bool,
    pub done: oneshot::Sender<Result<(), Refused>>,
}

/// Why an append was not committed.
#[derive(Debug, Clone)]
pub(crate) enum Refused {
    /// Its session's epoch moved on: the lease was taken over.
    Fenced,
    /// Another record of the same epoch is stored at its `seq`.
    Taken,
    /// The database failed (after the retries).
    Failed(Arc<Failure>),
    /// The store is gone.
    Stopped,
}

/// Why a batch failed as a whole.
#[derive(Debug, thiserror::Error)]
pub(crate) enum Failure {
    /// Its statement failed.
    #[error("the batch's statement failed")]
    Db(#[source] tokio_postgres::Error),
    /// No connection could be made.
    #[error("no connection to the database")]
    Connect(#[source] pod::PodError),
    /// The store is gone.
    #[error("the store was closed")]
    Stopped,
}

impl Failure {
    /// Whether the server refused the statement (rather than the
    /// connection failing).
    fn refused_by_server(&self) -> bool {
        matches!(self, Failure::Db(err) if err.as_db_error().is_some())
    }
}

/// A [`Failure`] shared by every append of its batch, as an error of one.
#[derive(Debug)]
pub(crate) struct Shared(pub Arc<Failure>);

impl std::fmt::Display for Shared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

impl std::error::Error for Shared {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.0.source()
    }
}

/// The group committer of one store.
pub(crate) struct GroupCommit {
    queue: mpsc::UnboundedSender<Append>,
    stats: Arc<BatchStats>,
}

/// The queue of a batcher (the group commit, the releases) and what it
/// did.
#[derive(Default)]
pub(crate) struct BatchStats {
    /// Statements sent.
    pub batches: AtomicU64,
    /// What they held (records, releases).
    pub items: AtomicU64,
    /// Queued and not yet in a batch.
    pub waiting: AtomicU64,
}

impl BatchStats {
    /// Queues `item` on `queue`; gives it back if the batcher is gone.
    pub fn queue<T>(&self, queue: &mpsc::UnboundedSender<T>, item: T) -> Result<(), T> {
        self.waiting.fetch_add(1, Ordering::Relaxed);
        queue.send(item).map_err(|refused| {
            self.waiting.fetch_sub(1, Ordering::Relaxed);
            refused.0
        })
    }

    /// `first` and whatever else `queue` holds now, up to [`MAX_BATCH`]:
    /// the next batch, counted.
    pub fn take<T>(&self, first: T, queue: &mut mpsc::UnboundedReceiver<T>) -> Vec<T> {
        let mut batch = vec![first];
        while batch.len() < MAX_BATCH {
            match queue.try_recv() {
                Ok(item) => batch.push(item),
                Err(_) => break,
            }
        }
        let taken = batch.len() as u64;
        self.waiting.fetch_sub(taken, Ordering::Relaxed);
        self.batches.fetch_add(1, Ordering::Relaxed);
        self.items.fetch_add(taken, Ordering::Relaxed);
        batch
    }
}

impl GroupCommit {
    /// Starts the committer on `pool` with up to `lanes` batches in flight
    /// at once.
    pub fn start(pool: Arc<Pool>, lanes: usize) -> Self {
        // Unbounded: each open session has at most one append queued, so
        // the queue is bounded by the sessions a worker runs.
        let (queue, appends) = mpsc::unbounded_channel();
        let stats = Arc::new(BatchStats::default());
        tokio::spawn(run(appends, pool, lanes.max(1), Arc::clone(&stats)));
        Self { queue, stats }
    }

    /// Queues `append`; its `done` hears the outcome.
    pub fn submit(&self, append: Append) {
        if let Err(refused) = self.stats.queue(&self.queue, append) {
            let _ = refused.done.send(Err(Refused::Stopped));
        }
    }

    /// What it did so far.
    pub fn stats(&self) -> &BatchStats {
        &self.stats
    }
}

async fn run(
    mut appends: mpsc::UnboundedReceiver<Append>,
    pool: Arc<Pool>,
    lanes: usize,
    stats: Arc<BatchStats>,
) {
    let lanes = Arc::new(Semaphore::new(lanes));
    while let Some(first) = appends.recv().await {
        // Waiting for a lane is when a batch grows.
        let Ok(lane) = Arc::clone(&lanes).acquire_owned().await else {
            return;
        };
        let batch = stats.take(first, &mut appends);
        let pool = Arc::clone(&pool);
        tokio::spawn(async move {
            commit(batch, &pool).await;
            drop(lane);
        });
    }
}

/// Commits `batch` and answers each append. A batch the database refuses
/// as a whole (not a lost connection) is split into single appends, so a
/// record the server will not take fails alone.
async fn commit(batch: Vec<Append>, pool: &Arc<Pool>) {
    match with_retries(&batch, pool, "a group commit").await {
        Ok(outcomes) => answer(batch, outcomes),
        Err(err) if batch.len() > 1 && err.refused_by_server() => {
            tracing::warn!(records = batch.len(), err = %err, "a group commit failed; committing its records one by one");
            for append in batch {
                let one = vec![append];
                match with_retries(&one, pool, "a group commit").await {
                    Ok(outcomes) => answer(one, outcomes),
                    Err(err) => fail(one, err),
                }
            }
        }
        Err(err) => fail(batch, err),
    }
}

/// Answers each append of a committed statement, counting what it stored.
fn answer(batch: Vec<Append>, outcomes: Vec<Result<(), Refused>>) {
    pod::stats::group_committed(outcomes.iter().filter(|o| o.is_ok()).count() as u64);
    for (append, outcome) in batch.into_iter().zip(outcomes) {
        let _ = append.done.send(outcome);
    }
}

fn fail(batch: Vec<Append>, err: Failure) {
    let err = Arc::new(err);
    for append in batch {
        let _ = append.done.send(Err(Refused::Failed(Arc::clone(&err))));
    }
}

/// Whether `err` may pass with a new connection or a second attempt: the
/// connection failed (no server error, a connection exception, or the
/// server ending it: a restart, a failover, `pg_terminate_backend`), or a
/// deadlock or serialization failure aborted the transaction.
pub(crate) fn transient(err: &tokio_postgres::Error) -> bool {
    let Some(db) = err.as_db_error() else {
        return true;
    };
    let code = db.code().code();
    code.starts_with("08")
        || code.starts_with("57P")
        || db.code() == &SqlState::T_R_DEADLOCK_DETECTED
        || db.code() == &SqlState::T_R_SERIALIZATION_FAILURE
}

/// One statement (or transaction) of a batch, which [`with_retries`] runs
/// again on a new connection when the connection failed.
pub(crate) trait Attempt {
    /// What the batch's statement answered.
    type Outcome;
    /// Runs it once on `conn`.
    async fn on(&self, conn: &mut Pooled) -> Result<Self::Outcome, tokio_postgres::Error>;
    /// How many sessions it is for (for the logs).
    fn len(&self) -> usize;
}

impl Attempt for Vec<Append> {
    type Outcome = Vec<Result<(), Refused>>;

    async fn on(&self, conn: &mut Pooled) -> Result<Self::Outcome, tokio_postgres::Error> {
        insert_on(conn, self).await
    }

    fn len(&self) -> usize {
        self.len()
    }
}

/// Runs `batch` on a connection of `pool`, again on a new one while a
/// deadlock or serialization failure aborts it (after 200 ms, 400 ms, …
/// 3.2 s), and for as long as the database cannot be reached (an outage:
/// backoff with jitter up to 5 s between attempts, bounded only by the
/// store's outage limit). A connection that failed is not given back.
pub(crate) async fn with_retries<A: Attempt>(
    batch: &A,
    pool: &Arc<Pool>,
    what: &'static str,
) -> Result<A::Outcome, Failure> {
    let health = pool.health();
    let (mut attempt, mut waits) = (0, 0);
    loop {
        let conn = match pool.get().await {
            Ok(conn) => conn,
            Err(err) => {
                // Connecting failed: the server is down or restarting (the
                // pool told the store's health).
                if !health.is_down() || health.exhausted() {
                    return Err(Failure::Connect(err));
                }
                waits += 1;
                tracing::debug!(waits, err = %err, "{what} waits for the session store");
                tokio::time::sleep(crate::health::backoff(waits)).await;
                continue;
            }
        };
        match run_on(conn, batch).await {
            Ok(outcomes) => {
                health.reachable();
                return Ok(outcomes);
            }
            Err(err) if crate::health::unreachable(&err) => {
                health.unreachable(&err);
                if health.exhausted() {
                    return Err(Failure::Db(err));
                }
                waits += 1;
                tracing::debug!(waits, sessions = batch.len(), err = %err, "{what} waits for the session store");
                tokio::time::sleep(crate::health::backoff(waits)).await;
            }
            Err(err) if transient(&err) && attempt < RETRIES => {
                attempt += 1;
                tracing::warn!(
                    attempt,
                    sessions = batch.len(),
                    err = %err,
                    "{what} failed; trying again"
                );
                tokio::time::sleep(Duration::from_millis(100 << attempt)).await;
            }
            Err(err) => return Err(Failure::Db(err)),
        }
    }
}

/// One attempt of `batch` on `conn`. A connection that failed is not
/// given back.
async fn run_on<A: Attempt>(
    mut conn: Pooled,
    batch: &A,
) -> Result<A::Outcome, tokio_postgres::Error> {
    let result = batch.on(&mut conn).await;
    if let Err(err) = &result {
        if transient(err) || conn.client.is_closed() {
            conn.discard();
        }
    }
    result
}

/// The batch's statement on `conn`, then what is stored where it
/// inserted nothing.
async fn insert_on(
    conn: &mut Pooled,
    batch: &[Append],
) -> Result<Vec<Result<(), Refused>>, tokio_postgres::Error> {
    let sessions: Vec<Uuid> = batch.iter().map(|a| a.session).collect();
    let epochs: Vec<i64> = batch.iter().map(|a| a.epoch).collect();
    let seqs: Vec<i64> = batch.iter().map(|a| a.seq).collect();
    let texts: Vec<&str> = batch.iter().map(|a| a.text.as_str()).collect();
    let statement = conn.prepared(INSERT_BATCH).await?;
    let params: [&(dyn tokio_postgres::types::ToSql + Sync); 4] =
        [&sessions, &epochs, &seqs, &texts];
    let inserted = if batch.iter().any(|a| a.durable) {
        conn.client.query(&statement, &params).await?
    } else {
        // Nothing in it asks for the flush: commit without waiting for it
        // (`durability = never`; `sync` flushes later).
        let tx = conn.client.transaction().await?;
        tx.batch_execute("SET LOCAL synchronous_commit = off")
            .await?;
        let rows = tx.query(&statement, &params).await?;
        tx.commit().await?;
        rows
    };
    let mut done: HashMap<Uuid, i64> = HashMap::with_capacity(inserted.len());
    for row in &inserted {
        done.insert(row.get(0), row.get(1));
    }
    let missing: Vec<usize> = (0..batch.len())
        .filter(|&i| done.get(&batch[i].session) != Some(&batch[i].seq))
        .collect();
    let mut outcomes: Vec<Result<(), Refused>> = vec![Ok(()); batch.len()];
    if missing.is_empty() {
        return Ok(outcomes);
    }
    let ids: Vec<Uuid> = missing.iter().map(|&i| batch[i].session).collect();
    let at: Vec<i64> = missing.iter().map(|&i| batch[i].seq).collect();
    let statement = conn.prepared(STORED).await?;
    let stored = conn.client.query(&statement, &[&ids, &at]).await?;
    let mut found: HashMap<(Uuid, i64), (i64, String)> = HashMap::with_capacity(stored.len());
    for row in &stored {
        found.insert((row.get(0), row.get(1)), (row.get(2), row.get(3)));
    }
    for i in missing {
        let append = &batch[i];
        outcomes[i] = match found.get(&(append.session, append.seq)) {
            // Committed by an attempt whose answer was lost.
            Some((epoch, text)) if *epoch == append.epoch && *text == append.text => Ok(()),
            Some((epoch, _)) if *epoch == append.epoch => Err(Refused::Taken),
            // Nothing stored (the fence refused it) or another epoch's.
            _ => Err(Refused::Fenced),
        };
    }
    Ok(outcomes)
}
