//! Schedules in the fleet's database: rows that start sessions by
//! themselves (`pod schedule`).
//!
//! A schedule's `next_fire` is the fire time it waits for. Every worker
//! reads the due ones; firing one is a single transaction that moves
//! `next_fire` on only if it still holds what the worker read (a
//! compare-and-set under the row's lock), queues the session, and records
//! the fire under the primary key `(schedule, fire_at)`. Any number of
//! workers reading the same due schedule therefore start one session per
//! fire time: the second finds `next_fire` moved and does nothing. A
//! heartbeat's fire ([`Fire::Continue`]) appends its message to an
//! existing session and queues it in the same transaction, under that
//! session's row lock, only if nobody runs it or appended since. When
//! the times come is the caller's (`pod_fleet::schedule`): this module
//! stores them and never parses them.

use crate::store::PgStore;
use chrono::{DateTime, Utc};
use pod::log::{LogRecord, SessionHeader};
use pod::PodError;
use tokio_postgres::Row;
use uuid::Uuid;

/// What a schedule does when its fire time comes while the session it
/// started last is still going.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Overlap {
    /// Records the fire time as skipped (the default).
    Skip,
    /// Starts another session anyway.
    Allow,
}

impl Overlap {
    /// Its name in the store and on the command line.
    pub fn as_str(self) -> &'static str {
        match self {
            Overlap::Skip => "skip",
            Overlap::Allow => "allow",
        }
    }

    fn parse(text: &str) -> Self {
        match text {
            "allow" => Overlap::Allow,
            _ => Overlap::Skip,
        }
    }
}

/// A new schedule.
#[derive(Clone, Debug)]
pub struct NewSchedule {
    /// Its name, unique in the store.
    pub name: String,
    /// When it fires, as the caller encodes it.
    pub timing: serde_json::Value,
    /// The task of each session it starts.
    pub task: String,
    /// The header its sessions start from (a fresh id and time each).
    pub template: SessionHeader,
    /// The limits each of its sessions records before its task.
    pub limits: Option<pod::SessionBudget>,
    /// What a fire does while the last session still runs.
    pub overlap: Overlap,
    /// Its first fire time.
    pub next_fire: DateTime<Utc>,
    /// A heartbeat's session: each fire time continues it with `task` as
    /// its next message instead of starting a new session.
    pub session: Option<Uuid>,
}

/// A schedule as stored, with how its last session stands.
#[derive(Clone, Debug)]
pub struct Schedule {
    /// Its name.
    pub name: String,
    /// When it fires, as the caller encoded it.
    pub timing: serde_json::Value,
    /// The task of each session it starts.
    pub task: String,
    /// The header its sessions start from.
    pub template: SessionHeader,
    /// The limits each of its sessions records before its task.
    pub limits: Option<pod::SessionBudget>,
    /// What a fire does while the last session still runs.
    pub overlap: Overlap,
    /// Paused: it fires nothing until resumed.
    pub paused: bool,
    /// The fire time it waits for.
    pub next_fire: DateTime<Utc>,
    /// When it was added.
    pub created_at: DateTime<Utc>,
    /// Its last fire time acted on (started or skipped).
    pub last_fire: Option<DateTime<Utc>>,
    /// The session it started last.
    pub last_session: Option<Uuid>,
    /// Whether that session is still queued, running or parked.
    pub last_running: bool,
    /// Sessions it started.
    pub fires: i64,
    /// Fire times skipped because the last session still ran.
    pub skipped: i64,
    /// Fire times passed over while no worker ran (catch-up runs only the
    /// latest of them).
    pub missed: i64,
    /// The database's clock when this was read.
    pub read_at: DateTime<Utc>,
    /// A heartbeat's session (see [`NewSchedule::session`]).
    pub session: Option<Uuid>,
}

/// One fire time acted on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Fired {
    /// The fire time.
    pub fire_at: DateTime<Utc>,
    /// The session it started; `None`: skipped.
    pub session: Option<Uuid>,
    /// When a worker acted on it.
    pub fired_at: DateTime<Utc>,
}

/// What to do at a fire time.
#[derive(Debug)]
pub enum Fire {
    /// Queue this session for the fleet.
    Start {
        /// Its header (the schedule's template with a fresh id).
        header: Box<SessionHeader>,
        /// Its first records (the task).
        first: Vec<LogRecord>,
    },
    /// Continue a heartbeat's session: append `records` (its message) to
    /// it and queue it, if it is still idle and its log still holds
    /// `after` records; else the fire time is recorded as skipped.
    Continue {
        /// The session.
        session: Uuid,
        /// How many records its log held when the caller read it (checked
        /// again under the row's lock: nothing may have been appended).
        after: i64,
        /// What to append.
        records: Vec<LogRecord>,
    },
    /// Record the fire time as skipped.
    Skip,
}

/// What a fire did ([`PgStore::fire_schedule`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Acted {
    /// It queued a new session.
    Started,
    /// It appended a heartbeat's message to its session and queued it.
    Continued,
    /// It recorded the fire time as skipped (asked to, or a heartbeat's
    /// session was busy or had changed).
    Skipped,
}

impl Acted {
    fn as_str(self) -> &'static str {
        match self {
            Acted::Started => "started",
            Acted::Continued => "continued",
            Acted::Skipped => "skipped",
        }
    }
}

const COLUMNS: &str = "
    s.name, s.timing::text, s.task, s.template::text, s.overlap, s.paused, s.next_fire,
    s.created_at, s.last_fire, s.last_session,
    coalesce(l.state IN ('queued', 'running', 'parked'), false),
    s.fires, s.skipped, s.missed, now(), s.limits::text, s.session";

impl PgStore {
    /// Adds a schedule; `false` if one of that name exists.
    pub async fn add_schedule(&self, new: &NewSchedule) -> Result<bool, PodError> {
        let template = serde_json::to_string(&new.template).map_err(PodError::Encode)?;
        let limits = match &new.limits {
            Some(limits) => Some(serde_json::to_string(limits).map_err(PodError::Encode)?),
            None => None,
        };
        let timing = new.timing.to_string();
        let conn = self.conn().await?;
        let added = conn
            .client
            .execute(
                "INSERT INTO pod_schedules
                     (name, timing, task, template, overlap, next_fire, limits, session,
                      last_session)
                 VALUES ($1::text, $2::text::jsonb, $3::text, $4::text::json, $5::text, $6,
                         $7::text::json, $8::uuid, $8::uuid)
                 ON CONFLICT (name) DO NOTHING",
                &[
                    &new.name,
                    &timing,
                    &new.task,
                    &template,
                    &new.overlap.as_str(),
                    &new.next_fire,
                    &limits,
                    &new.session,
                ],
            )
            .await
            .map_err(self.err("adding a schedule"))?;
        Ok(added == 1)
    }

    /// Every schedule, by name.
    pub async fn schedules(&self) -> Result<Vec<Schedule>, PodError> {
        self.read_schedules("TRUE ORDER BY s.name", &[]).await
    }

    /// The schedule called `name`.
    pub async fn schedule(&self, name: &str) -> Result<Option<Schedule>, PodError> {
        Ok(self
            .read_schedules("s.name = $1::text", &[&name])
            .await?
            .pop())
    }

    /// The schedules whose fire time has come (not paused).
    pub async fn due_schedules(&self) -> Result<Vec<Schedule>, PodError> {
        self.read_schedules("NOT s.paused AND s.next_fire <= now()", &[])
            .await
    }

    async fn read_schedules(
        &self,
        filter: &str,
        params: &[&(dyn tokio_postgres::types::ToSql + Sync)],
    ) -> Result<Vec<Schedule>, PodError> {
        let conn = self.conn().await?;
        let rows = conn
            .client
            .query(
                &format!(
                    "SELECT {COLUMNS} FROM pod_schedules s
                     LEFT JOIN pod_sessions l ON l.id = s.last_session
                     WHERE {filter}"
                ),
                params,
            )
            .await
            .map_err(self.err("reading schedules"))?;
        rows.iter().map(|row| self.schedule_of(row)).collect()
    }

    fn schedule_of(&self, row: &Row) -> Result<Schedule, PodError> {
        let name: String = row.get(0);
        let damaged = |what: &str, err: serde_json::Error| PodError::Store {
            store: self.location().to_string(),
            what: format!("reading schedule {name}'s {what}"),
            source: Box::new(err),
        };
        let timing = serde_json::from_str(row.get(1)).map_err(|e| damaged("timing", e))?;
        let template = serde_json::from_str(row.get(3)).map_err(|e| damaged("template", e))?;
        let limits = match row.get::<_, Option<&str>>(15) {
            Some(text) => Some(serde_json::from_str(text).map_err(|e| damaged("limits", e))?),
            None => None,
        };
        Ok(Schedule {
            timing,
            task: row.get(2),
            template,
            limits,
            overlap: Overlap::parse(row.get(4)),
            paused: row.get(5),
            next_fire: row.get(6),
            created_at: row.get(7),
            last_fire: row.get(8),
            last_session: row.get(9),
            last_running: row.get(10),
            fires: row.get(11),
            skipped: row.get(12),
            missed: row.get(13),
            read_at: row.get(14),
            session: row.get(16),
            name,
        })
    }

    /// The fire times schedule `name` acted on, newest first, at most
    /// `limit`.
    pub async fn schedule_fires(&self, name: &str, limit: i64) -> Result<Vec<Fired>, PodError> {
        let conn = self.conn().await?;
        let rows = conn
            .client
            .query(
                "SELECT fire_at, session, fired_at FROM pod_schedule_fires
                 WHERE schedule = $1::text ORDER BY fire_at DESC LIMIT $2::bigint",
                &[&name, &limit],
            )
            .await
            .map_err(self.err("reading a schedule's fires"))?;
        Ok(rows
            .iter()
            .map(|row| Fired {
                fire_at: row.get(0),
                session: row.get(1),
                fired_at: row.get(2),
            })
            .collect())
    }

    /// Pauses or resumes schedule `name`; a resumed one waits for
    /// `next_fire` (the first fire time after now: what passed while it
    /// was paused is not caught up). `false` if there is none.
    pub async fn set_schedule_paused(
        &self,
        name: &str,
        paused: bool,
        next_fire: Option<DateTime<Utc>>,
    ) -> Result<bool, PodError> {
        let conn = self.conn().await?;
        let changed = conn
            .client
            .execute(
                "UPDATE pod_schedules SET paused = $2, next_fire = coalesce($3, next_fire)
                 WHERE name = $1::text",
                &[&name, &paused, &next_fire],
            )
            .await
            .map_err(self.err("pausing a schedule"))?;
        Ok(changed == 1)
    }

    /// Removes schedule `name` and its record of fires (not the sessions
    /// it started). `false` if there is none.
    pub async fn remove_schedule(&self, name: &str) -> Result<bool, PodError> {
        let conn = self.conn().await?;
        let removed = conn
            .client
            .execute("DELETE FROM pod_schedules WHERE name = $1::text", &[&name])
            .await
            .map_err(self.err("removing a schedule"))?;
        Ok(removed == 1)
    }

    /// Acts on schedule `name`'s fire time `fire_at`, if its `next_fire`
    /// still is `expected` (nobody fired it since it was read): queues the
    /// session of `fire`, continues a heartbeat's session, or records a
    /// skip; records the fire; and moves `next_fire` to `next`, passing
    /// over `missed` fire times, all in one transaction. Returns what it
    /// did; `None` means another worker fired it (or the schedule was
    /// paused or removed meanwhile).
    #[allow(clippy::too_many_arguments)]
    pub async fn fire_schedule(
        &self,
        name: &str,
        expected: DateTime<Utc>,
        fire_at: DateTime<Utc>,
        next: DateTime<Utc>,
        missed: i64,
        fire: Fire,
    ) -> Result<Option<Acted>, PodError> {
        let mut conn = self.conn().await?;
        let err = self.err("firing a schedule");
        let tx = conn.client.transaction().await.map_err(&err)?;
        // A worker stopped inside this transaction (SIGSTOP, a partition)
        // must not hold the schedule's row for ever: the server ends it.
        tx.batch_execute("SET LOCAL idle_in_transaction_session_timeout = '10s'")
            .await
            .map_err(&err)?;
        let (session, acted) = match &fire {
            Fire::Start { header, .. } => (Some(header.session_id), Acted::Started),
            Fire::Continue { session, after, .. } => {
                // Under the session's row lock until the commit: nobody
                // takes its lease or appends between the check and ours.
                match self.idle_at(&tx, *session, *after).await? {
                    true => (Some(*session), Acted::Continued),
                    false => (None, Acted::Skipped),
                }
            }
            Fire::Skip => (None, Acted::Skipped),
        };
        let started = i64::from(session.is_some());
        let moved = tx
            .execute(
                "UPDATE pod_schedules
                 SET next_fire = $3, last_fire = $4, last_session = coalesce($5, last_session),
                     fires = fires + $6::bigint, skipped = skipped + 1 - $6::bigint,
                     missed = missed + $7::bigint
                 WHERE name = $1::text AND next_fire = $2 AND NOT paused",
                &[
                    &name, &expected, &next, &fire_at, &session, &started, &missed,
                ],
            )
            .await
            .map_err(&err)?;
        if moved == 0 {
            return Ok(None);
        }
        let recorded = tx
            .execute(
                "INSERT INTO pod_schedule_fires (schedule, fire_at, session, outcome)
                 VALUES ($1::text, $2, $3, $4::text)
                 ON CONFLICT (schedule, fire_at) DO NOTHING",
                &[&name, &fire_at, &session, &acted.as_str()],
            )
            .await
            .map_err(&err)?;
        if recorded == 0 {
            // Fired already (a run-now at the same instant, say).
            return Ok(None);
        }
        match (&fire, acted) {
            (Fire::Start { header, first }, _) => {
                self.insert_rows(&tx, header, None, first).await?
            }
            (
                Fire::Continue {
                    session,
                    after,
                    records,
                },
                Acted::Continued,
            ) => {
                self.continue_session(&tx, *session, *after, records)
                    .await?
            }
            _ => {}
        }
        tx.commit().await.map_err(&err)?;
        Ok(Some(acted))
    }

    /// Locks session `id`'s row and says whether nobody runs it, it waits
    /// for nothing (not queued, not parked) and its log still holds
    /// `after` records (not: it does not exist, a process or worker holds
    /// it, or something was appended since the caller read it).
    async fn idle_at(
        &self,
        tx: &tokio_postgres::Transaction<'_>,
        id: Uuid,
        after: i64,
    ) -> Result<bool, PodError> {
        let row = tx
            .query_opt(
                "SELECT s.state = 'idle' OR (s.state = 'running' AND NOT s.fleet),
                        s.owner IS NOT NULL AND s.lease_until IS NOT NULL
                            AND s.lease_until >= now(),
                        (SELECT coalesce(max(seq) + 1, 0) FROM pod_records r
                         WHERE r.session_id = s.id)
                 FROM pod_sessions s WHERE s.id = $1::uuid FOR UPDATE",
                &[&id],
            )
            .await
            .map_err(self.err("reading a heartbeat's session"))?;
        Ok(row.is_some_and(|row| {
            let (resting, leased, next): (bool, bool, i64) = (row.get(0), row.get(1), row.get(2));
            resting && !leased && next == after
        }))
    }

    /// Appends `records` to session `id` from seq `after` (under its
    /// current epoch, which nobody holds) and queues it for the fleet.
    async fn continue_session(
        &self,
        tx: &tokio_postgres::Transaction<'_>,
        id: Uuid,
        after: i64,
        records: &[LogRecord],
    ) -> Result<(), PodError> {
        let err = self.err("continuing a heartbeat's session");
        for (seq, record) in (after..).zip(records) {
            let text = serde_json::to_string(record).map_err(PodError::Encode)?;
            tx.execute(
                "INSERT INTO pod_records (session_id, seq, epoch, record)
                 SELECT $1::uuid, $2::bigint, epoch, $3::text::json
                 FROM pod_sessions WHERE id = $1::uuid",
                &[&id, &seq, &text],
            )
            .await
            .map_err(&err)?;
        }
        tx.execute(
            "UPDATE pod_sessions
             SET state = 'queued', fleet = true, wake_at = NULL, owner = NULL,
                 lease_until = NULL
             WHERE id = $1::uuid",
            &[&id],
        )
        .await
        .map_err(&err)?;
        Ok(())
    }
}
