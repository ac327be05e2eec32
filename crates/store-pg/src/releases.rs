//! Leases given up together: the sessions of a store that end (or are
//! handed to the fleet) at about the same time release their leases in one
//! statement, one transaction and one WAL flush, each fenced on its own
//! epoch.
//!
//! A worker of ten thousand short sessions ends about as many sessions a
//! second as it starts; one `UPDATE` and one synchronous commit each was
//! the database's second largest cost after the records' inserts. Releases
//! queue on a channel; one task takes everything queued (up to
//! [`MAX_BATCH`](crate::commit::MAX_BATCH)) and sends it as one
//! statement, and the next batch grows while it runs. Each release is answered only after its batch committed,
//! as a single one was.

use crate::commit::{with_retries, Attempt, BatchStats, Failure};
use crate::pool::{Pool, Pooled};
use chrono::{DateTime, Utc};
use std::collections::HashSet;
use std::sync::Arc;
use tokio::sync::{mpsc, oneshot};
use uuid::Uuid;

/// Ends the leases of the arrays whose row still carries the epoch: the
/// session becomes `state`, woken at `wake_at`, handed to the fleet if
/// `fleet` (a handed-over session is the fleet's; a released one keeps
/// what it was). Rows are locked in id order, as the renewal and the group
/// commit's fence lock them, so none of the three deadlock. Returns the
/// leases (id, epoch) it ended.
const RELEASE_ALL: &str = "
    WITH r AS (
        SELECT * FROM unnest($1::uuid[], $2::bigint[], $3::text[], $4::timestamptz[], $5::bool[],
                             $6::bool[])
            AS r(id, epoch, state, wake_at, fleet, limited)
    ), mine AS (
        SELECT s.id, r.state, r.wake_at, r.fleet, r.limited FROM pod_sessions s
        JOIN r ON s.id = r.id AND s.epoch = r.epoch
        ORDER BY s.id
        FOR NO KEY UPDATE OF s
    )
    UPDATE pod_sessions s
    SET owner = NULL, lease_until = NULL, state = mine.state, wake_at = mine.wake_at,
        fleet = s.fleet OR mine.fleet, limited = mine.limited
    FROM mine WHERE s.id = mine.id
    RETURNING s.id, s.epoch";

/// What a session becomes when its lease ends.
#[derive(Clone, Copy, Debug)]
pub(crate) enum After {
    /// Idle: nobody runs it until someone resumes it.
    Idle,
    /// The fleet's, queued for any worker.
    Queued,
    /// The fleet's, parked on a question until it is answered or until
    /// `wake_at`.
    Parked { wake_at: Option<DateTime<Utc>> },
    /// The fleet's, parked on its profile's shared limit until `wake_at`
    /// (the window's end) or a worker's start.
    Limited { wake_at: DateTime<Utc> },
}

/// One lease to end.
pub(crate) struct Release {
    pub session: Uuid,
    pub epoch: i64,
    pub after: After,
    /// Whether the row still carried the epoch (else the lease was taken
    /// over), or why the batch failed.
    pub done: oneshot::Sender<Result<bool, Arc<Failure>>>,
}

/// The releaser of one store.
pub(crate) struct Releases {
    queue: mpsc::UnboundedSender<Release>,
    stats: Arc<BatchStats>,
}

impl Releases {
    /// Starts the releaser on `pool`: one batch in flight at a time.
    pub fn start(pool: Arc<Pool>) -> Self {
        // Unbounded: a session releases once, so the queue is bounded by
        // the sessions a worker runs.
        let (queue, releases) = mpsc::unbounded_channel();
        let stats = Arc::new(BatchStats::default());
        tokio::spawn(run(releases, pool, Arc::clone(&stats)));
        Self { queue, stats }
    }

    /// Ends `session`'s lease of `epoch`: `Ok(false)` if the lease was
    /// taken over.
    pub async fn release(
        &self,
        session: Uuid,
        epoch: i64,
        after: After,
    ) -> Result<bool, Arc<Failure>> {
        let (done, outcome) = oneshot::channel();
        let release = Release {
            session,
            epoch,
            after,
            done,
        };
        if self.stats.queue(&self.queue, release).is_err() {
            return Err(Arc::new(Failure::Stopped));
        }
        outcome.await.unwrap_or(Err(Arc::new(Failure::Stopped)))
    }

    /// What it did so far.
    pub fn stats(&self) -> &BatchStats {
        &self.stats
    }
}

async fn run(
    mut releases: mpsc::UnboundedReceiver<Release>,
    pool: Arc<Pool>,
    stats: Arc<BatchStats>,
) {
    while let Some(first) = releases.recv().await {
        let batch = stats.take(first, &mut releases);
        // One batch at a time: the next grows meanwhile.
        match with_retries(&batch, &pool, "releasing leases").await {
            Ok(released) => {
                for release in batch {
                    let ours = released.contains(&(release.session, release.epoch));
                    let _ = release.done.send(Ok(ours));
                }
            }
            Err(err) => {
                let err = Arc::new(err);
                for release in batch {
                    let _ = release.done.send(Err(Arc::clone(&err)));
                }
            }
        }
    }
}

impl Attempt for Vec<Release> {
    type Outcome = HashSet<(Uuid, i64)>;

    async fn on(&self, conn: &mut Pooled) -> Result<Self::Outcome, tokio_postgres::Error> {
        let ids: Vec<Uuid> = self.iter().map(|r| r.session).collect();
        let epochs: Vec<i64> = self.iter().map(|r| r.epoch).collect();
        let mut states: Vec<&str> = Vec::with_capacity(self.len());
        let mut wakes: Vec<Option<DateTime<Utc>>> = Vec::with_capacity(self.len());
        let mut fleet: Vec<bool> = Vec::with_capacity(self.len());
        let mut limited: Vec<bool> = Vec::with_capacity(self.len());
        for release in self {
            let (state, wake_at, handed) = match release.after {
                After::Idle => ("idle", None, false),
                After::Queued => ("queued", None, true),
                After::Parked { wake_at } => ("parked", wake_at, true),
                After::Limited { wake_at } => ("parked", Some(wake_at), true),
            };
            states.push(state);
            wakes.push(wake_at);
            fleet.push(handed);
            limited.push(matches!(release.after, After::Limited { .. }));
        }
        let statement = conn.prepared(RELEASE_ALL).await?;
        let rows = conn
            .client
            .query(
                &statement,
                &[&ids, &epochs, &states, &wakes, &fleet, &limited],
            )
            .await?;
        Ok(rows.iter().map(|row| (row.get(0), row.get(1))).collect())
    }

    fn len(&self) -> usize {
        self.len()
    }
}
