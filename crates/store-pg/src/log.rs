//! The writer of one open session: a connection of its own, every append
//! fenced on the lease's epoch, and a task renewing the lease.

use crate::error::query;
use crate::store::{connect_raw, Lease};
use pod::log::LogRecord;
use pod::store::{LogSink, Waits};
use pod::{Durability, PodError};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::Mutex;
use tokio::task::JoinHandle;
use tokio_postgres::error::SqlState;
use tokio_postgres::{Client, Statement};

/// Inserts the record only while the session row carries the writer's
/// epoch. `FOR SHARE` holds the row for the statement: a takeover's update
/// waits for this insert to commit, and an insert that starts after the
/// takeover sees the new epoch and inserts nothing.
const APPEND: &str = "
    WITH fence AS (
        SELECT 1 FROM pod_sessions WHERE id = $1::uuid AND epoch = $2::bigint FOR SHARE
    )
    INSERT INTO pod_records (session_id, seq, epoch, record)
    SELECT $1::uuid, $3::bigint, $2::bigint, $4::text::json FROM fence";

const RENEW: &str = "
    UPDATE pod_sessions SET lease_until = now() + $3::bigint * interval '1 millisecond'
    WHERE id = $1::uuid AND epoch = $2::bigint";

const RELEASE: &str = "
    UPDATE pod_sessions SET owner = NULL, lease_until = NULL, state = 'idle', wake_at = NULL
    WHERE id = $1::uuid AND epoch = $2::bigint";

/// Releases the lease and hands the session to the fleet's workers in one
/// step: parked on a question (`$3 = 'parked'`, woken at `$4` if set) or
/// queued. Nothing can claim it between the two.
const HAND_OVER: &str = "
    UPDATE pod_sessions
    SET owner = NULL, lease_until = NULL, state = $3::text, fleet = true, wake_at = $4
    WHERE id = $1::uuid AND epoch = $2::bigint";

/// Reconnections tried for one append before it fails.
const RETRIES: u32 = 5;

struct Conn {
    client: Client,
    append: Statement,
    next_seq: i64,
    closed: bool,
}

/// The [`LogSink`] of a session in PostgreSQL.
pub(crate) struct PgLog {
    lease: Lease,
    url: Arc<str>,
    location: String,
    durability: Durability,
    conn: Arc<Mutex<Conn>>,
    lost: Arc<AtomicBool>,
    renewer: JoinHandle<()>,
}

impl std::fmt::Debug for PgLog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PgLog")
            .field("session", &self.lease.id)
            .field("epoch", &self.lease.epoch)
            .field("location", &self.location)
            .finish_non_exhaustive()
    }
}

impl PgLog {
    /// Starts the writer of `lease`'s session on `client`, whose next record
    /// is `next_seq`, and the task renewing the lease every third of `ttl`.
    pub(crate) async fn start(
        client: Client,
        lease: Lease,
        next_seq: i64,
        url: Arc<str>,
        location: String,
        durability: Durability,
        ttl: Duration,
    ) -> Result<Self, PodError> {
        let client = configure(client, durability, &location).await?;
        let append = client
            .prepare(APPEND)
            .await
            .map_err(|e| query(&location, "preparing appends", e))?;
        let conn = Arc::new(Mutex::new(Conn {
            client,
            append,
            next_seq,
            closed: false,
        }));
        let lost = Arc::new(AtomicBool::new(false));
        let renewer = tokio::spawn(renew(
            Arc::clone(&conn),
            Renewal {
                lease: lease.clone(),
                ttl,
                url: Arc::clone(&url),
                location: location.clone(),
                durability,
            },
            Arc::clone(&lost),
        ));
        Ok(Self {
            lease,
            url,
            location,
            durability,
            conn,
            lost,
            renewer,
        })
    }

    fn lease_lost(&self) -> PodError {
        self.lost.store(true, Ordering::SeqCst);
        PodError::LeaseLost {
            id: self.lease.id,
            epoch: self.lease.epoch,
        }
    }

    async fn reconnect(&self, conn: &mut Conn) -> Result<(), PodError> {
        reconnect(conn, &self.url, self.durability, &self.location).await
    }

    /// Whether the record at `seq` is `text`: an append whose commit was
    /// not acknowledged because the connection dropped.
    async fn already_committed(&self, conn: &Conn, seq: i64, text: &str) -> bool {
        let row = conn
            .client
            .query_opt(
                "SELECT record::text FROM pod_records WHERE session_id = $1::uuid AND seq = $2::bigint",
                &[&self.lease.id, &seq],
            )
            .await;
        matches!(row, Ok(Some(row)) if row.get::<_, String>(0) == text)
    }
}

impl Drop for PgLog {
    fn drop(&mut self) {
        self.renewer.abort();
    }
}

#[async_trait::async_trait]
impl LogSink for PgLog {
    async fn append(&self, record: &LogRecord, _sync: bool) -> Result<(), PodError> {
        if self.lost.load(Ordering::SeqCst) {
            return Err(self.lease_lost());
        }
        let text = serde_json::to_string(record).map_err(PodError::Encode)?;
        let mut conn = self.conn.lock().await;
        if conn.closed {
            return Err(PodError::LogClosed);
        }
        let seq = conn.next_seq;
        let mut attempt = 0;
        loop {
            let params: [&(dyn tokio_postgres::types::ToSql + Sync); 4] =
                [&self.lease.id, &self.lease.epoch, &seq, &text];
            let result = conn.client.execute(&conn.append, &params).await;
            match result {
                Ok(1) => break,
                Ok(_) => return Err(self.lease_lost()),
                Err(err)
                    if attempt > 0
                        && err.code() == Some(&SqlState::UNIQUE_VIOLATION)
                        && self.already_committed(&conn, seq, &text).await =>
                {
                    break
                }
                Err(err) if err.as_db_error().is_none() && attempt < RETRIES => {
                    attempt += 1;
                    tracing::warn!(
                        session = %self.lease.id,
                        attempt,
                        err = %err,
                        "session store connection failed; reconnecting"
                    );
                    tokio::time::sleep(Duration::from_millis(100 << attempt)).await;
                    if let Err(err) = self.reconnect(&mut conn).await {
                        tracing::warn!(session = %self.lease.id, err = %err, "reconnect failed");
                    }
                }
                Err(err) => return Err(query(&self.location, "appending a record", err)),
            }
        }
        conn.next_seq += 1;
        Ok(())
    }

    async fn sync(&self) -> Result<(), PodError> {
        if self.durability != Durability::Never {
            // Every append already committed synchronously.
            return Ok(());
        }
        // One synchronous commit flushes the WAL up to it, the asynchronous
        // commits before it included.
        let mut conn = self.conn.lock().await;
        if conn.closed {
            return Ok(());
        }
        let location = &self.location;
        let tx = conn
            .client
            .transaction()
            .await
            .map_err(|e| query(location, "syncing", e))?;
        tx.batch_execute("SET LOCAL synchronous_commit = on")
            .await
            .map_err(|e| query(location, "syncing", e))?;
        let renewed = tx
            .execute(
                RENEW,
                &[&self.lease.id, &self.lease.epoch, &self.lease.ttl_ms],
            )
            .await
            .map_err(|e| query(location, "syncing", e))?;
        tx.commit()
            .await
            .map_err(|e| query(location, "syncing", e))?;
        match renewed {
            0 => Err(self.lease_lost()),
            _ => Ok(()),
        }
    }

    async fn shutdown(&self) -> Result<(), PodError> {
        self.release(RELEASE, &[&self.lease.id, &self.lease.epoch])
            .await
    }

    async fn hand_over(&self, waits: Waits) -> Result<bool, PodError> {
        let (state, wake_at) = match waits {
            Waits::Answer { wake_at } => ("parked", wake_at),
            Waits::Worker => ("queued", None),
        };
        self.release(
            HAND_OVER,
            &[&self.lease.id, &self.lease.epoch, &state, &wake_at],
        )
        .await
        .map(|()| true)
    }
}

impl PgLog {
    /// Ends the lease with `statement` (fenced on its epoch), once.
    async fn release(
        &self,
        statement: &str,
        params: &[&(dyn tokio_postgres::types::ToSql + Sync)],
    ) -> Result<(), PodError> {
        self.renewer.abort();
        let mut conn = self.conn.lock().await;
        if conn.closed {
            return Ok(());
        }
        conn.closed = true;
        let released = conn
            .client
            .execute(statement, params)
            .await
            .map_err(|e| query(&self.location, "releasing the lease", e))?;
        match released {
            0 => Err(self.lease_lost()),
            _ => Ok(()),
        }
    }
}

/// Replaces a session's lost connection.
async fn reconnect(
    conn: &mut Conn,
    url: &str,
    durability: Durability,
    location: &str,
) -> Result<(), PodError> {
    let client = connect_raw(url)
        .await
        .map_err(|e| query(location, "reconnecting", e))?;
    let client = configure(client, durability, location).await?;
    conn.append = client
        .prepare(APPEND)
        .await
        .map_err(|e| query(location, "preparing appends", e))?;
    conn.client = client;
    Ok(())
}

/// What the renewal task needs.
struct Renewal {
    lease: Lease,
    ttl: Duration,
    url: Arc<str>,
    location: String,
    durability: Durability,
}

/// Applies the durability setting to a session's connection.
async fn configure(
    client: Client,
    durability: Durability,
    location: &str,
) -> Result<Client, PodError> {
    if durability == Durability::Never {
        client
            .batch_execute("SET synchronous_commit = off")
            .await
            .map_err(|e| query(location, "configuring the session connection", e))?;
    }
    Ok(client)
}

/// Renews the lease every third of its time to live until the writer stops
/// (reconnecting when the connection was lost, so that a long model
/// request does not cost the lease); marks the writer lost when the lease
/// was taken over.
async fn renew(conn: Arc<Mutex<Conn>>, renewal: Renewal, lost: Arc<AtomicBool>) {
    let lease = &renewal.lease;
    let period = (renewal.ttl / 3).max(Duration::from_millis(10));
    loop {
        tokio::time::sleep(period).await;
        let mut conn = conn.lock().await;
        if conn.closed {
            return;
        }
        let renewed = conn
            .client
            .execute(RENEW, &[&lease.id, &lease.epoch, &lease.ttl_ms])
            .await;
        match renewed {
            Ok(0) => {
                tracing::warn!(session = %lease.id, epoch = lease.epoch, "lease taken over by another worker");
                pod::stats::lease_lost();
                lost.store(true, Ordering::SeqCst);
                return;
            }
            Ok(_) => pod::stats::lease_renewed(true),
            // A lease that expires meanwhile is caught by the next
            // append's fence.
            Err(err) => {
                pod::stats::lease_renewed(false);
                tracing::warn!(session = %lease.id, err = %err, "cannot renew the lease");
                if err.as_db_error().is_none() || conn.client.is_closed() {
                    let url = &renewal.url;
                    if let Err(err) =
                        reconnect(&mut conn, url, renewal.durability, &renewal.location).await
                    {
                        tracing::warn!(session = %lease.id, err = %err, "reconnect failed");
                    }
                }
            }
        }
    }
}
