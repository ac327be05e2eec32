//! The writer of one open session: its appends go through the store's
//! group commit, fenced on the lease's epoch; the store renews its lease
//! with all the others. It holds no connection of its own.

use crate::commit::{Append, Refused, Shared};
use crate::db::{Db, Lease};
use crate::error::query;
use crate::releases::After;
use pod::log::LogRecord;
use pod::store::{LogSink, Waits};
use pod::{Durability, PodError};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use tokio::sync::{oneshot, Mutex};

const RENEW: &str = "
    UPDATE pod_sessions SET lease_until = now() + $3::bigint * interval '1 millisecond'
    WHERE id = $1::uuid AND epoch = $2::bigint";

/// Where the next record goes.
struct Tail {
    next_seq: i64,
    closed: bool,
}

/// The [`LogSink`] of a session in PostgreSQL.
pub(crate) struct PgLog {
    lease: Lease,
    db: Arc<Db>,
    durability: Durability,
    // Held across an append's commit: one append in flight per session,
    // so its records commit in order and a batch holds one of its records.
    tail: Mutex<Tail>,
    lost: Arc<AtomicBool>,
}

impl std::fmt::Debug for PgLog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PgLog")
            .field("session", &self.lease.id)
            .field("epoch", &self.lease.epoch)
            .field("location", &self.db.location)
            .finish_non_exhaustive()
    }
}

impl PgLog {
    /// The writer of `lease`'s session, whose next record is `next_seq`;
    /// its lease is renewed with the store's others from now on.
    pub(crate) fn start(db: Arc<Db>, lease: Lease, next_seq: i64, durability: Durability) -> Self {
        let lost = db.leases.hold(lease.id, lease.epoch);
        Self {
            lease,
            db,
            durability,
            tail: Mutex::new(Tail {
                next_seq,
                closed: false,
            }),
            lost,
        }
    }

    fn lease_lost(&self) -> PodError {
        self.lost.store(true, Ordering::SeqCst);
        PodError::LeaseLost {
            id: self.lease.id,
            epoch: self.lease.epoch,
        }
    }

    fn location(&self) -> &str {
        &self.db.location
    }
}

impl Drop for PgLog {
    fn drop(&mut self) {
        self.db.leases.forget(self.lease.id, self.lease.epoch);
    }
}

#[async_trait::async_trait]
impl LogSink for PgLog {
    async fn append(&self, record: &LogRecord, _sync: bool) -> Result<(), PodError> {
        if self.lost.load(Ordering::SeqCst) {
            return Err(self.lease_lost());
        }
        let text = serde_json::to_string(record).map_err(PodError::Encode)?;
        let mut tail = self.tail.lock().await;
        if tail.closed {
            return Err(PodError::LogClosed);
        }
        let seq = tail.next_seq;
        let (done, outcome) = oneshot::channel();
        self.db.commits.submit(Append {
            session: self.lease.id,
            epoch: self.lease.epoch,
            seq,
            text,
            durable: self.durability != Durability::Never,
            done,
        });
        match outcome.await.unwrap_or(Err(Refused::Stopped)) {
            Ok(()) => {
                tail.next_seq += 1;
                Ok(())
            }
            Err(Refused::Fenced) => Err(self.lease_lost()),
            Err(Refused::Taken) => Err(PodError::Store {
                store: self.location().to_string(),
                what: "appending a record".into(),
                source: format!(
                    "record {seq} of session {} is already another record of the same lease",
                    self.lease.id
                )
                .into(),
            }),
            Err(Refused::Failed(failure)) => Err(PodError::Store {
                store: self.location().to_string(),
                what: "appending a record".into(),
                source: Box::new(Shared(failure)),
            }),
            Err(Refused::Stopped) => Err(PodError::LogClosed),
        }
    }

    async fn sync(&self) -> Result<(), PodError> {
        if self.durability != Durability::Never {
            // Every append already committed synchronously.
            return Ok(());
        }
        // One synchronous commit flushes the WAL up to it, the asynchronous
        // commits before it included.
        let tail = self.tail.lock().await;
        if tail.closed {
            return Ok(());
        }
        let location = self.location();
        let mut conn = self.db.pool.get().await?;
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
        self.release(After::Idle).await
    }

    async fn hand_over(&self, waits: Waits) -> Result<bool, PodError> {
        let after = match waits {
            // The lease ends and the session is the fleet's in one step:
            // nothing can claim it between the two.
            Waits::Answer { wake_at } => After::Parked { wake_at },
            Waits::Worker => After::Queued,
            Waits::Until { at } => After::Parked { wake_at: Some(at) },
            Waits::Limit { until } => After::Limited { wake_at: until },
        };
        self.release(after).await.map(|()| true)
    }
}

impl PgLog {
    /// Ends the lease (fenced on its epoch), once, with the store's other
    /// releases of the moment.
    async fn release(&self, after: After) -> Result<(), PodError> {
        let mut tail = self.tail.lock().await;
        if tail.closed {
            return Ok(());
        }
        tail.closed = true;
        self.db.leases.forget(self.lease.id, self.lease.epoch);
        match self
            .db
            .releases
            .release(self.lease.id, self.lease.epoch, after)
            .await
        {
            Ok(true) => Ok(()),
            Ok(false) => Err(self.lease_lost()),
            Err(failure) => Err(PodError::Store {
                store: self.location().to_string(),
                what: "releasing the lease".into(),
                source: Box::new(Shared(failure)),
            }),
        }
    }
}
