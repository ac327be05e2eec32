//! The leases a store holds, renewed together: one statement per renewal
//! period for all of a worker's sessions, however many it runs.

use crate::pool::Pool;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Weak};
use std::time::Duration;
use uuid::Uuid;

/// Extends every lease of the arrays whose row still carries its epoch and
/// returns the ids it extended. Rows are locked in id order (as the group
/// commit's fence takes them), so a renewal and a batch never deadlock.
const RENEW_ALL: &str = "
    WITH mine AS (
        SELECT s.id FROM pod_sessions s
        JOIN unnest($1::uuid[], $2::bigint[]) AS l(id, epoch)
          ON s.id = l.id AND s.epoch = l.epoch
        ORDER BY s.id
        FOR NO KEY UPDATE OF s
    )
    UPDATE pod_sessions s
    SET lease_until = now() + $3::bigint * interval '1 millisecond'
    FROM mine WHERE s.id = mine.id
    RETURNING s.id";

/// A lease this store holds: its epoch, and the flag its writer reads.
struct Held {
    epoch: i64,
    lost: Arc<AtomicBool>,
}

/// The leases of one store's open sessions.
#[derive(Default)]
pub(crate) struct Leases {
    // Held for an insert, a removal or a copy of the list; never across an
    // await.
    held: parking_lot::Mutex<HashMap<Uuid, Held>>,
}

impl Leases {
    /// Renews session `id`'s lease of `epoch` from now on; the flag turns
    /// true when a renewal finds it taken over.
    pub fn hold(&self, id: Uuid, epoch: i64) -> Arc<AtomicBool> {
        let lost = Arc::new(AtomicBool::new(false));
        self.held.lock().insert(
            id,
            Held {
                epoch,
                lost: Arc::clone(&lost),
            },
        );
        lost
    }

    /// Stops renewing session `id`'s lease of `epoch` (a later lease of the
    /// same session stays).
    pub fn forget(&self, id: Uuid, epoch: i64) {
        let mut held = self.held.lock();
        if held.get(&id).is_some_and(|h| h.epoch == epoch) {
            held.remove(&id);
        }
    }

    /// How many it holds.
    pub fn len(&self) -> usize {
        self.held.lock().len()
    }

    fn snapshot(&self) -> (Vec<Uuid>, Vec<i64>) {
        self.held
            .lock()
            .iter()
            .map(|(id, h)| (*id, h.epoch))
            .unzip()
    }

    /// Marks the leases of `ids`/`epochs` that `renewed` lacks as lost.
    fn mark_lost(&self, ids: &[Uuid], epochs: &[i64], renewed: &[Uuid]) -> usize {
        let renewed: std::collections::HashSet<&Uuid> = renewed.iter().collect();
        let held = self.held.lock();
        let mut lost = 0;
        for (id, epoch) in ids.iter().zip(epochs) {
            if renewed.contains(id) {
                continue;
            }
            // Forgotten (released) since the snapshot: not lost.
            if let Some(h) = held.get(id).filter(|h| h.epoch == *epoch) {
                tracing::warn!(session = %id, epoch, "lease taken over by another worker");
                h.lost.store(true, Ordering::SeqCst);
                lost += 1;
            }
        }
        lost
    }
}

/// Renews every lease of `leases` every `period` until the store is gone,
/// and at once when an outage ends (before the fleet's claims, after an
/// outage, treat expired leases as orphans: see [`crate::PgStore::claim_many`]).
/// A renewal that fails (the database is down) is tried again next
/// period; a lease it cannot renew for a whole TTL expires, and the next
/// append's fence finds out.
pub(crate) async fn renew(leases: Weak<Leases>, pool: Arc<Pool>, ttl_ms: i64, period: Duration) {
    let health = Arc::clone(pool.health());
    loop {
        tokio::select! {
            _ = tokio::time::sleep(period) => {}
            _ = health.back() => {}
        }
        let Some(leases) = leases.upgrade() else {
            return;
        };
        let (ids, epochs) = leases.snapshot();
        if ids.is_empty() {
            continue;
        }
        match renew_once(&pool, &ids, &epochs, ttl_ms).await {
            Ok(renewed) => {
                health.reachable();
                pod::stats::leases_renewed(true, renewed.len() as u64);
                for _ in 0..leases.mark_lost(&ids, &epochs, &renewed) {
                    pod::stats::lease_lost();
                }
            }
            Err(err) => {
                pod::stats::leases_renewed(false, ids.len() as u64);
                if let Some(db) = err.downcast_ref::<tokio_postgres::Error>() {
                    if crate::health::unreachable(db) {
                        health.unreachable(db);
                    }
                }
                // An outage is said once, by the store's health.
                if health.is_down() {
                    tracing::debug!(leases = ids.len(), err = %err, "cannot renew the leases");
                } else {
                    tracing::warn!(leases = ids.len(), err = %err, "cannot renew the leases");
                }
            }
        }
    }
}

async fn renew_once(
    pool: &Arc<Pool>,
    ids: &[Uuid],
    epochs: &[i64],
    ttl_ms: i64,
) -> Result<Vec<Uuid>, Box<dyn std::error::Error + Send + Sync>> {
    let mut conn = pool.get().await?;
    let statement = conn.prepared(RENEW_ALL).await?;
    let rows = conn
        .client
        .query(&statement, &[&ids, &epochs, &ttl_ms])
        .await?;
    Ok(rows.iter().map(|row| row.get(0)).collect())
}
