//! When schedules fire, and firing the due ones.
//!
//! A schedule fires at the times of its [`Timing`]: every fixed period
//! from when it was added, or a cron expression in a time zone (DST follows
//! the zone: a fixed time that falls in a spring-forward gap fires just
//! after it, one in a fall-back overlap fires once). Every fleet worker
//! looks for due schedules once a second; the store's compare-and-set
//! makes each fire time start one session however many look
//! ([`pod_store_pg::PgStore::fire_schedule`]).
//!
//! After downtime (no worker ran while fire times passed) a schedule runs
//! the latest passed fire time once and counts the others as missed. A
//! fire time that comes while the schedule's last session is still queued,
//! running or parked is skipped (overlap `skip`, the default) or starts
//! another session (`allow`).
//!
//! A heartbeat (a schedule with a session) continues that session at each
//! fire time instead: its message is appended to the session's log and the
//! session queued, in the fire's transaction, so its plan, recorded
//! settings and limits hold. A fire time that finds the session queued,
//! running, parked, or with a call left open in its log is skipped.

use chrono::{DateTime, Utc};
use pod::log::{LogRecord, Origin, SessionHeader};
use pod::Item;
use pod_store_pg::{Acted, Fire, Overlap, PgStore, Schedule};
use std::path::PathBuf;
use uuid::Uuid;

pub use pod_launch::timing::{Timing, TimingError, MIN_PERIOD};

/// What a worker did with a due schedule.
#[derive(Debug)]
pub enum Fired {
    /// It queued `session` for fire time `fire_at`, passing over `missed`
    /// earlier ones.
    Started {
        /// The schedule.
        name: String,
        /// The fire time.
        fire_at: DateTime<Utc>,
        /// Fire times passed over (downtime).
        missed: i64,
        /// The session.
        session: Uuid,
        /// Its workspace.
        workspace: PathBuf,
    },
    /// It continued heartbeat session `session` for fire time `fire_at`.
    Continued {
        /// The schedule.
        name: String,
        /// The fire time.
        fire_at: DateTime<Utc>,
        /// Fire times passed over (downtime).
        missed: i64,
        /// The session.
        session: Uuid,
        /// Its workspace.
        workspace: PathBuf,
    },
    /// It skipped fire time `fire_at`: the last session still runs.
    Skipped {
        /// The schedule.
        name: String,
        /// The fire time.
        fire_at: DateTime<Utc>,
        /// The session still going (the schedule's last, or a heartbeat's).
        session: Option<Uuid>,
        /// The schedule's workspace.
        workspace: PathBuf,
    },
    /// The schedule cannot fire (its timing cannot be read).
    Broken {
        /// The schedule.
        name: String,
        /// Why.
        error: TimingError,
    },
}

impl std::fmt::Display for Fired {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let at = |t: &DateTime<Utc>| t.format("%Y-%m-%d %H:%M:%S UTC").to_string();
        match self {
            Fired::Started {
                name,
                fire_at,
                missed,
                session,
                ..
            } => {
                write!(
                    f,
                    "schedule {name} fired for {}: queued {session}",
                    at(fire_at)
                )?;
                if *missed > 0 {
                    write!(
                        f,
                        " ({missed} earlier fire times missed while no worker ran)"
                    )?;
                }
                Ok(())
            }
            Fired::Continued {
                name,
                fire_at,
                session,
                ..
            } => write!(
                f,
                "schedule {name} fired for {}: continued {session}",
                at(fire_at)
            ),
            Fired::Skipped { name, fire_at, .. } => write!(
                f,
                "schedule {name} skipped {}: its last session is still going",
                at(fire_at)
            ),
            Fired::Broken { name, error } => write!(f, "schedule {name} cannot fire: {error}"),
        }
    }
}

impl Fired {
    /// The notification of this fire (`schedule.fired`,
    /// `schedule.skipped`); `None` for a broken schedule (the worker's
    /// output says it).
    pub fn event(&self) -> Option<pod_notify::Event> {
        use pod_notify::{Event, Kind};
        let (kind, name, fire_at, outcome, missed, session, workspace) = match self {
            Fired::Started {
                name,
                fire_at,
                missed,
                session,
                workspace,
            } => (
                Kind::ScheduleFired,
                name,
                fire_at,
                "started",
                *missed,
                Some(*session),
                workspace,
            ),
            Fired::Continued {
                name,
                fire_at,
                missed,
                session,
                workspace,
            } => (
                Kind::ScheduleFired,
                name,
                fire_at,
                "continued",
                *missed,
                Some(*session),
                workspace,
            ),
            Fired::Skipped {
                name,
                fire_at,
                session,
                workspace,
            } => (
                Kind::ScheduleSkipped,
                name,
                fire_at,
                "skipped",
                0,
                *session,
                workspace,
            ),
            Fired::Broken { .. } => return None,
        };
        let mut event = Event::new(kind, session.unwrap_or_default(), workspace.clone());
        event.schedule = Some(serde_json::json!({
            "name": name,
            "fire_at": fire_at,
            "outcome": outcome,
            "missed": missed,
        }));
        if kind == Kind::ScheduleSkipped {
            event.reason = Some("its last session is still going".into());
        }
        Some(event)
    }
}

/// A new session of `schedule` for `fire_at`.
pub fn session_of(schedule: &Schedule, fire_at: DateTime<Utc>) -> (SessionHeader, Vec<LogRecord>) {
    let mut header = schedule.template.clone();
    header.session_id = Uuid::new_v4();
    header.created_at = Utc::now();
    header.origin = Some(Origin::Schedule {
        name: schedule.name.clone(),
        fire_at,
    });
    let mut first = Vec::with_capacity(2);
    // The session's limits before its task, as `pod submit` records them:
    // the worker that claims it holds them.
    if let Some(limits) = schedule.limits.filter(|l| l.is_set()) {
        first.push(LogRecord::Limits(pod::log::LimitsRecord::now(
            limits, "schedule",
        )));
    }
    first.push(LogRecord::Item(Item::user(schedule.task.clone())));
    (header, first)
}

/// What firing `schedule` at `fire_at` does: a new session, or a
/// heartbeat's continuation of its session; `skip` when the schedule's last
/// session still runs and its overlap policy skips.
pub async fn fire_of(
    store: &PgStore,
    schedule: &Schedule,
    fire_at: DateTime<Utc>,
    skip: bool,
) -> Result<Fire, pod::PodError> {
    if skip {
        return Ok(Fire::Skip);
    }
    let Some(session) = schedule.session else {
        let (header, first) = session_of(schedule, fire_at);
        return Ok(Fire::Start {
            header: Box::new(header),
            first,
        });
    };
    // A log left inside a tool call (a crash mid-call) is closed by the
    // next resume: a message appended now would come before the calls'
    // results and make the history invalid for a model's API.
    let records = match pod::SessionStore::read(store, session).await {
        Ok(contents) => contents.records,
        // Removed since: the fire time is skipped.
        Err(pod::PodError::NoSuchSession { .. }) => return Ok(Fire::Skip),
        Err(err) => return Err(err),
    };
    if !pod::replay::replay(&records).interrupted.is_empty() {
        return Ok(Fire::Skip);
    }
    // The header is record 0 of the store's rows; `records` follow it.
    let after = i64::try_from(records.len()).unwrap_or(i64::MAX) + 1;
    Ok(Fire::Continue {
        session,
        after,
        records: vec![LogRecord::Item(Item::user(schedule.task.clone()))],
    })
}

/// Fires every due schedule of `store` once (the ones another worker fires
/// first are left to it); what it did.
pub async fn fire_due(store: &PgStore) -> Result<Vec<Fired>, pod::PodError> {
    let mut done = Vec::new();
    for schedule in store.due_schedules().await? {
        let timing = match Timing::from_json(&schedule.timing) {
            Ok(timing) => timing,
            Err(error) => {
                done.push(Fired::Broken {
                    name: schedule.name,
                    error,
                });
                continue;
            }
        };
        let (fire_at, missed, next) = match timing.catch_up(schedule.next_fire, schedule.read_at) {
            Ok(times) => times,
            Err(error) => {
                done.push(Fired::Broken {
                    name: schedule.name,
                    error,
                });
                continue;
            }
        };
        let skip = schedule.overlap == Overlap::Skip && schedule.last_running;
        let fire = fire_of(store, &schedule, fire_at, skip).await?;
        let session = match &fire {
            Fire::Start { header, .. } => Some(header.session_id),
            Fire::Continue { session, .. } => Some(*session),
            Fire::Skip => None,
        };
        let acted = store
            .fire_schedule(
                &schedule.name,
                schedule.next_fire,
                fire_at,
                next,
                missed,
                fire,
            )
            .await?;
        let Some(acted) = acted else {
            continue;
        };
        pod::stats::schedule_fired(acted != Acted::Skipped, u64::try_from(missed).unwrap_or(0));
        let (name, workspace) = (schedule.name, schedule.template.workspace);
        done.push(match (acted, session) {
            (Acted::Started, Some(session)) => Fired::Started {
                name,
                fire_at,
                missed,
                session,
                workspace,
            },
            (Acted::Continued, Some(session)) => Fired::Continued {
                name,
                fire_at,
                missed,
                session,
                workspace,
            },
            _ => Fired::Skipped {
                name,
                fire_at,
                session: schedule.session.or(schedule.last_session),
                workspace,
            },
        });
    }
    Ok(done)
}
