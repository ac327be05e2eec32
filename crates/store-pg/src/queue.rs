//! The fleet's queue: sessions submitted for workers, claimed (with their
//! leases) in batches, given back, and the queue's state. The
//! [`SessionStore`](pod::SessionStore) side of the store is in `store.rs`.

use crate::store::{Claim, PgStore};
use chrono::{DateTime, Utc};
use pod::log::{LogRecord, SessionHeader};
use pod::PodError;
use std::collections::HashMap;
use uuid::Uuid;

/// Takes the lease of the `$3` oldest claimable fleet sessions (see
/// [`PgStore::claim`]). `SKIP LOCKED`: workers claiming at once never wait
/// for each other nor get the same session.
const CLAIM: &str = "
    WITH next AS (
        SELECT id, state, created_at FROM pod_sessions
        WHERE fleet AND (state = 'queued'
              OR (state = 'running' AND (lease_until IS NULL
                  OR lease_until < now() - $4::bigint * interval '1 millisecond'))
              OR (state = 'parked' AND wake_at <= now()))
        ORDER BY created_at
        LIMIT $3::bigint
        FOR UPDATE SKIP LOCKED
    )
    UPDATE pod_sessions s
    SET owner = $1::text, epoch = s.epoch + 1, state = 'running', wake_at = NULL, limited = false,
        lease_until = now() + $2::bigint * interval '1 millisecond'
    FROM next WHERE s.id = next.id
    RETURNING s.id, s.epoch, next.state, next.created_at";

/// Where a session stands in the fleet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SessionState {
    /// Waiting for a fleet worker.
    Queued,
    /// Someone holds its lease, or held it until it expired.
    Running,
    /// Nobody should pick it up.
    Idle,
    /// It waits for a person's answer (see [`pod::questions`]): the answer
    /// queues it again, and so does its question's timeout.
    Parked,
}

impl SessionState {
    fn as_str(self) -> &'static str {
        match self {
            SessionState::Queued => "queued",
            SessionState::Running => "running",
            SessionState::Idle => "idle",
            SessionState::Parked => "parked",
        }
    }
}

/// A session a fleet worker claimed: its lease is held, and [`PgStore`]'s
/// next `open` of it uses that lease.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Claimed {
    /// The session.
    pub id: Uuid,
    /// The lease's epoch.
    pub epoch: i64,
    /// Whether its previous worker died with it (an expired lease), rather
    /// than it waiting in the queue.
    pub orphaned: bool,
}

impl PgStore {
    /// Queues a new session for the fleet: a worker claims it, takes its
    /// lease and runs it. Its log is its `header` and then `first` (the
    /// task, as a user item), written in one transaction; the worker reads
    /// how to run it from the header's `launch`.
    pub async fn submit(
        &self,
        header: &SessionHeader,
        first: &[LogRecord],
    ) -> Result<(), PodError> {
        let mut conn = self.conn().await?;
        self.insert_session(&mut conn.client, header, None, first)
            .await
    }

    /// Queues many sessions at once, as [`submit`](Self::submit) does one:
    /// all of them in one transaction (all or none), in their order in the
    /// queue, with a few statements per thousand sessions.
    pub async fn submit_many(
        &self,
        sessions: &[(SessionHeader, Vec<LogRecord>)],
    ) -> Result<(), PodError> {
        // Bounded so that one statement's arrays stay a few megabytes.
        const CHUNK: usize = 1000;
        let mut conn = self.conn().await?;
        let tx = conn
            .client
            .transaction()
            .await
            .map_err(self.err("queueing sessions"))?;
        for (chunk_no, chunk) in sessions.chunks(CHUNK).enumerate() {
            let mut ids = Vec::with_capacity(chunk.len());
            let mut workspaces = Vec::with_capacity(chunk.len());
            let mut order = Vec::with_capacity(chunk.len());
            let (mut record_ids, mut seqs, mut texts) = (Vec::new(), Vec::new(), Vec::new());
            for (i, (header, first)) in chunk.iter().enumerate() {
                let id = header.session_id;
                ids.push(id);
                workspaces.push(header.workspace.display().to_string());
                order.push(i64::try_from(chunk_no * CHUNK + i).unwrap_or(i64::MAX));
                let header = LogRecord::Header(header.clone());
                for (seq, record) in (0i64..).zip(std::iter::once(&header).chain(first)) {
                    record_ids.push(id);
                    seqs.push(seq);
                    texts.push(serde_json::to_string(record).map_err(PodError::Encode)?);
                }
            }
            // One transaction has one now(): each session is a microsecond
            // younger than the one before it, so claims keep their order.
            tx.execute(
                "INSERT INTO pod_sessions (id, created_at, state, fleet, workspace)
                 SELECT id, now() + n * interval '1 microsecond', 'queued', true, workspace
                 FROM unnest($1::uuid[], $2::bigint[], $3::text[]) AS s(id, n, workspace)",
                &[&ids, &order, &workspaces],
            )
            .await
            .map_err(self.err("queueing sessions"))?;
            tx.execute(
                "INSERT INTO pod_records (session_id, seq, epoch, record)
                 SELECT id, seq, 0, record::json
                 FROM unnest($1::uuid[], $2::bigint[], $3::text[]) AS r(id, seq, record)",
                &[&record_ids, &seqs, &texts],
            )
            .await
            .map_err(self.err("writing the sessions' first records"))?;
        }
        tx.commit().await.map_err(self.err("queueing sessions"))
    }

    /// Claims the oldest fleet session that is queued, whose worker died
    /// (its lease expired while it ran), or that is parked on a question
    /// whose timeout has come, taking its lease; `None` when there is none.
    /// Workers claiming at once never get the same session.
    pub async fn claim(&self) -> Result<Option<Claimed>, PodError> {
        Ok(self.claim_many(1).await?.pop())
    }

    /// Claims up to `n` sessions as [`claim`](Self::claim) does, in one
    /// statement, oldest first.
    pub async fn claim_many(&self, n: usize) -> Result<Vec<Claimed>, PodError> {
        if n == 0 {
            return Ok(Vec::new());
        }
        let limit = i64::try_from(n).unwrap_or(i64::MAX);
        // For a lease after an outage: every worker's leases ran out while
        // nobody could renew them. Their living workers renew as soon as
        // the database is back; until they had a lease's time to, an
        // expired lease is not yet an orphan.
        let health = self.inner.db.pool.health();
        let grace = if health.is_down() || health.back_within(self.lease_ttl()) {
            self.ttl_ms()
        } else {
            0
        };
        let mut conn = self.conn().await?;
        let statement = conn
            .prepared(CLAIM)
            .await
            .map_err(self.err("claiming sessions"))?;
        let rows = conn
            .client
            .query(&statement, &[&self.owner(), &self.ttl_ms(), &limit, &grace])
            .await
            .map_err(self.err("claiming sessions"))?;
        health.reachable();
        let mut claimed: Vec<Claimed> = rows
            .iter()
            .map(|row| Claimed {
                id: row.get(0),
                epoch: row.get(1),
                orphaned: row.get::<_, String>(2) == "running",
            })
            .collect();
        // UPDATE … RETURNING keeps no order: oldest first again.
        let order: HashMap<Uuid, DateTime<Utc>> =
            rows.iter().map(|row| (row.get(0), row.get(3))).collect();
        claimed.sort_by_key(|c| order.get(&c.id).copied());
        let mut held = self.inner.claimed.lock();
        for c in &claimed {
            if c.orphaned {
                pod::stats::lease_taken_over();
            }
            held.insert(
                c.id,
                Claim {
                    epoch: c.epoch,
                    read: None,
                },
            );
            // Renewed from the claim on: a worker starting hundreds of
            // claimed sessions may take longer than a lease to open the
            // last of them.
            self.inner.db.leases.hold(c.id, c.epoch);
        }
        Ok(claimed)
    }

    /// Gives back a claimed session that was never opened: its lease ends
    /// now and it becomes `state` (queued again, or idle when it cannot
    /// run, so that no worker claims it over and over).
    pub async fn unclaim(&self, id: Uuid, state: SessionState) -> Result<(), PodError> {
        let Some(Claim { epoch, .. }) = self.inner.claimed.lock().remove(&id) else {
            return Ok(());
        };
        self.inner.db.leases.forget(id, epoch);
        let conn = self.conn().await?;
        let client = &conn.client;
        client
            .execute(
                "UPDATE pod_sessions SET owner = NULL, lease_until = NULL, state = $3::text
                 WHERE id = $1::uuid AND epoch = $2::bigint",
                &[&id, &epoch, &state.as_str()],
            )
            .await
            .map_err(self.err("giving a session back"))?;
        Ok(())
    }

    /// Whether the fleet has nothing left: no fleet session is queued,
    /// running (a running one whose lease expired counts: it will be
    /// claimed again) or parked with a timeout (it wakes by itself); a
    /// session parked until someone answers does not count.
    pub async fn fleet_idle(&self) -> Result<bool, PodError> {
        let conn = self.conn().await?;
        let client = &conn.client;
        let row = client
            .query_one(
                "SELECT count(*) FROM pod_sessions
                 WHERE fleet AND state <> 'idle' AND NOT (state = 'parked' AND wake_at IS NULL)",
                &[],
            )
            .await
            .map_err(self.err("reading the queue"))?;
        Ok(row.get::<_, i64>(0) == 0)
    }

    /// Sets the fleet state of a session nobody holds: `Queued` hands it
    /// (back) to the fleet, `Idle` takes it out. Returns whether it changed
    /// (not while a lease on it is live).
    pub async fn set_state(&self, id: Uuid, state: SessionState) -> Result<bool, PodError> {
        let conn = self.conn().await?;
        let client = &conn.client;
        let changed = client
            .execute(
                "UPDATE pod_sessions
                 SET state = $2::text, fleet = fleet OR $2::text = 'queued', wake_at = NULL,
                     limited = false
                 WHERE id = $1::uuid AND (owner IS NULL OR lease_until < now())",
                &[&id, &state.as_str()],
            )
            .await
            .map_err(self.err("setting a session's state"))?;
        Ok(changed > 0)
    }
}
