//! A fleet worker: claims queued sessions from the PostgreSQL store (and
//! the sessions of workers whose leases ran out), resumes each through the
//! launcher with its recorded settings in until-done mode, and runs it until
//! its plan is done, it stops, or the worker stops; then it gives an
//! unfinished session back to the queue.
//!
//! The store holds the lease, renews it and fences every append; the worker
//! decides what to run and reports what it did ([`Report`]), for its front
//! end to show. When the process also serves the HTTP API, the sessions the
//! worker runs ask through it ([`Api`]).
//!
//! It must not know the command line or HTTP.

#![deny(missing_docs)]

pub mod capacity;
mod outage;
mod run;
pub mod schedule;

use pod::{Approver, CancellationToken, PodHandle};
use pod_launch::Launcher;
use pod_store_pg::{Availability, PgStore};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::task::JoinSet;
use uuid::Uuid;

use outage::OutageNotice;
pub use run::{Ended, RunError};

/// How often an idle worker looks for work.
const POLL: Duration = Duration::from_millis(250);

/// How often a worker looks for due schedules.
const SCHEDULE_POLL: Duration = Duration::from_secs(1);

/// The most sessions one claim takes: a worker with thousands of free
/// slots fills them a batch at a time, and the sessions of one batch start
/// while the next is claimed.
const CLAIM_BATCH: usize = 256;

/// Where a process's HTTP API takes the sessions its worker runs: their
/// questions wait for an answer there, and notes and cancels reach them.
pub trait Api: Send + Sync {
    /// The approver of session `id`'s `ask` calls.
    fn approver(&self, id: Uuid) -> Arc<dyn Approver>;
    /// Session `id` runs here now, through `handle`.
    fn adopt(&self, id: Uuid, handle: PodHandle, meter: pod_launch::Meter);
    /// The worker is done with session `id`.
    fn release(&self, id: Uuid);
}

/// A fleet worker.
pub struct Worker {
    /// The fleet's store.
    pub store: PgStore,
    /// Starts the sessions it claims (in the same place as `store`).
    pub launcher: Launcher,
    /// Sessions it runs at once at most (`--workers`); fewer when `files`
    /// cannot serve them: the rest stay queued in the store.
    pub slots: u32,
    /// The process's open-file limit, if it has one: it admits what the
    /// limit serves ([`capacity::Files::sessions`]), and more while its
    /// sessions wait on shared HTTP/2 connections
    /// ([`capacity::Files::sessions_now`]).
    pub files: Option<capacity::Files>,
    /// Stop once every fleet session is idle (none queued, none running).
    pub exit_when_idle: bool,
    /// The process's HTTP API, if it serves one.
    pub api: Option<Arc<dyn Api>>,
    /// How long the database must stay unreachable before the config
    /// file's `[notify]` is told (and told again when it is back); `None`:
    /// never.
    pub outage_notify_after: Option<Duration>,
}

/// What the worker did, for its front end to show (one line each).
#[derive(Debug)]
pub enum Report {
    /// It started.
    Started {
        /// The worker's name in the store.
        owner: String,
        /// The store.
        location: String,
        /// Sessions at once.
        slots: u32,
        /// Its leases' length.
        lease_ttl: Duration,
    },
    /// It claimed a session.
    Claimed {
        /// The session.
        id: Uuid,
        /// Its previous worker died (its lease ran out).
        orphaned: bool,
    },
    /// Claiming failed (the database, say); it tries again later.
    ClaimFailed(String),
    /// Waking the sessions a shared limit paused failed (at the worker's
    /// start, or after `[limits]` changed); they wake at their window's end.
    WakeFailed(String),
    /// The database cannot be reached: sessions pause (nothing is sent to
    /// a model whose answer could not be recorded) and no session is
    /// claimed until it is back.
    StoreDown {
        /// The store.
        location: String,
        /// Since when.
        since: chrono::DateTime<chrono::Utc>,
    },
    /// The database is back: sessions continue.
    StoreBack {
        /// The store.
        location: String,
        /// How long it was down.
        after: Duration,
    },
    /// A session's run ended.
    Finished {
        /// The session.
        id: Uuid,
        /// How.
        ended: Ended,
    },
    /// A session could not be run here, or its run failed.
    Dropped {
        /// The session.
        id: Uuid,
        /// Why.
        error: RunError,
    },
    /// A session found no file descriptor although the worker ran fewer
    /// than its slots: from now on it admits at most `admitted` at once
    /// (said the first time; later ones lower it quietly).
    Narrowed {
        /// The sessions it admits at once now.
        admitted: u32,
    },
    /// A session's task panicked or was cancelled.
    TaskFailed(String),
    /// A schedule fired (or skipped a fire time).
    Schedule(schedule::Fired),
    /// Looking for due schedules failed; it tries again.
    ScheduleFailed(String),
    /// Every fleet session is idle: it exits (`exit_when_idle`).
    Idle,
    /// It was told to stop.
    Stopping,
}

impl std::fmt::Display for Report {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Report::Started {
                owner,
                location,
                slots,
                lease_ttl,
            } => write!(
                f,
                "pod serve: worker {owner} on {location}, {slots} at a time, leases of {}s",
                lease_ttl.as_secs_f64()
            ),
            Report::Claimed { id, orphaned } => write!(
                f,
                "claimed {id} ({})",
                if *orphaned {
                    "its worker died"
                } else {
                    "queued"
                }
            ),
            Report::ClaimFailed(error) => write!(f, "cannot claim: {error}"),
            Report::WakeFailed(error) => {
                write!(f, "cannot wake the sessions a shared limit paused: {error}")
            }
            Report::StoreDown { location, since } => write!(
                f,
                "pod serve: the database {location} is unreachable since {}; sessions pause until \
                 it is back",
                since.format("%H:%M:%S UTC")
            ),
            Report::StoreBack { location, after } => write!(
                f,
                "pod serve: the database {location} is back after {:.1}s; sessions continue",
                after.as_secs_f64()
            ),
            Report::Finished { id, ended } => write!(f, "finished {id}: {ended}"),
            Report::Dropped { id, error } => {
                write!(f, "dropped {id}: {}", pod_llm::error_chain(error))
            }
            Report::Narrowed { admitted } => write!(
                f,
                "pod serve: this process ran out of open files; it runs at most {admitted} \
                 sessions at once from now on, fewer if it runs out again (pod_fleet_capacity); \
                 the rest stay queued"
            ),
            Report::TaskFailed(error) => write!(f, "a session's task failed: {error}"),
            Report::Schedule(fired) => fired.fmt(f),
            Report::ScheduleFailed(error) => write!(f, "cannot fire schedules: {error}"),
            Report::Idle => f.write_str("pod serve: the fleet is idle; exiting"),
            Report::Stopping => {
                f.write_str("pod serve: stopping; unfinished sessions go back to the queue")
            }
        }
    }
}

impl Worker {
    /// Claims and runs fleet sessions until `stop` (or, with
    /// `exit_when_idle`, until the fleet has nothing left); `report` hears
    /// what it does.
    pub async fn run(self, stop: CancellationToken, mut report: impl FnMut(Report)) {
        let store = &self.store;
        report(Report::Started {
            owner: store.owner().to_string(),
            location: pod::SessionStore::location(store),
            slots: self.slots,
            lease_ttl: store.lease_ttl(),
        });
        // Sessions parked on a shared limit are tried again now: this
        // worker may run with the limit raised.
        if let Err(err) = store.wake_limited().await {
            report(Report::WakeFailed(pod_llm::error_chain(&err)));
        }
        let mut running: JoinSet<(Uuid, Result<Ended, RunError>)> = JoinSet::new();
        let mut pacing = ClaimPacing::default();
        let mut availability = store.watch_availability();
        let mut schedules_at = Instant::now();
        // Fires and outages are told to the config file's [notify] (when it
        // lists their events); a bad table is the sessions' error to report.
        let notifier = self.launcher.fleet_notifier().unwrap_or_else(|err| {
            tracing::warn!(error = %pod_llm::error_chain(&err), "fires and outages send no notifications");
            None
        });
        let mut outages = outage::Outages::new(
            notifier
                .clone()
                .zip(self.outage_notify_after)
                .map(|(notifier, after)| OutageNotice { notifier, after }),
            pod::SessionStore::location(store),
            store.owner().to_string(),
        );
        let mut limits = LimitsWatch::new();
        // What it admits: what its files serve, raised while its sessions
        // share HTTP/2 connections, and lowered for good when a session
        // finds no descriptor anyway (the process holds more files than
        // reckoned).
        let slots = self.slots.max(1);
        let floor = self
            .files
            .map_or(slots, |files| files.sessions().min(slots));
        let mut admitted = floor;
        let mut narrowed = false;
        loop {
            outages.tick();
            if let Some(files) = self.files.filter(|_| !narrowed && floor < slots) {
                let running = u32::try_from(running.len()).unwrap_or(u32::MAX);
                let now = files.sessions_now(running, pod_providers::http2_in_use());
                admitted = now.clamp(floor, slots);
            }
            if !stop.is_cancelled() && limits.changed(Instant::now()) && !store.is_down() {
                // An operator edited `[limits]` (raised one, perhaps):
                // the sessions they paused are tried again.
                if let Err(err) = store.wake_limited().await {
                    report(Report::WakeFailed(pod_llm::error_chain(&err)));
                }
            }
            if !stop.is_cancelled() && Instant::now() >= schedules_at && !store.is_down() {
                schedules_at = Instant::now() + SCHEDULE_POLL;
                match schedule::fire_due(store).await {
                    Ok(fired) => {
                        for fired in fired {
                            if let (Some(notifier), Some(event)) = (&notifier, fired.event()) {
                                notifier.send(event);
                            }
                            report(Report::Schedule(fired));
                        }
                    }
                    Err(err) => {
                        if !store.is_down() {
                            report(Report::ScheduleFailed(pod_llm::error_chain(&err)));
                        }
                    }
                }
            }
            while running.len() < admitted as usize
                && !stop.is_cancelled()
                && pacing.may_claim(Instant::now())
            {
                let free = (admitted as usize - running.len()).min(CLAIM_BATCH);
                match store.claim_many(free).await {
                    Ok(claims) => {
                        let full = claims.len() == free;
                        pacing.claimed(full, Instant::now());
                        for claimed in claims {
                            report(Report::Claimed {
                                id: claimed.id,
                                orphaned: claimed.orphaned,
                            });
                            let session = run::Claim {
                                id: claimed.id,
                                launcher: self.launcher.clone(),
                                store: store.clone(),
                                api: self.api.clone(),
                                stop: stop.clone(),
                            };
                            running.spawn(async move { (session.id, session.run().await) });
                        }
                        if !full {
                            break;
                        }
                    }
                    Err(err) => {
                        // An outage is said once, when it begins.
                        if !store.is_down() {
                            report(Report::ClaimFailed(pod_llm::error_chain(&err)));
                        }
                        pacing.claimed(false, Instant::now());
                        break;
                    }
                }
            }
            if stop.is_cancelled() && running.is_empty() {
                break;
            }
            if self.exit_when_idle
                && running.is_empty()
                && store.fleet_idle().await.unwrap_or(false)
            {
                report(Report::Idle);
                break;
            }
            // For `/metrics`: what runs here against what it admits.
            pod::stats::fleet_admitted(running.len() as u64, u64::from(admitted));
            tokio::select! {
                Some(joined) = running.join_next(), if !running.is_empty() => match joined {
                    Ok((id, Ok(ended @ Ended::Released { .. }))) => {
                        report(Report::Finished { id, ended });
                        // It ran `running.len() + 1` when the descriptor
                        // was missing: no more than the others from now.
                        let fewer = u32::try_from(running.len()).unwrap_or(u32::MAX).max(1);
                        if fewer < admitted {
                            admitted = fewer;
                            // Said once: releases come in bursts, each
                            // lowering it by one; /metrics has the latest.
                            if !narrowed {
                                narrowed = true;
                                report(Report::Narrowed { admitted });
                            }
                        }
                        // Not at once: the queue holds it again.
                        pacing.claimed(false, Instant::now());
                    }
                    Ok((id, Ok(ended))) => report(Report::Finished { id, ended }),
                    Ok((id, Err(error))) => report(Report::Dropped { id, error }),
                    Err(err) => report(Report::TaskFailed(err.to_string())),
                },
                Ok(()) = availability.changed() => {
                    let now = *availability.borrow_and_update();
                    let location = pod::SessionStore::location(store);
                    match now {
                        Availability::Down { since } => {
                            if outages.down(since) {
                                report(Report::StoreDown { location, since });
                            }
                        }
                        Availability::Up => {
                            if let Some(after) = outages.back() {
                                report(Report::StoreBack { location, after });
                            }
                        }
                    }
                }
                _ = tokio::time::sleep(POLL) => {}
                _ = stop.cancelled(), if !stop.is_cancelled() => report(Report::Stopping),
            }
        }
    }
}

/// Between two reads of the config file's `[limits]`: an edit is seen
/// within this, at the cost of one small file read (parsed only when its
/// text changed) per interval.
const LIMITS_POLL: Duration = Duration::from_secs(2);

/// The config file's `[limits]` as last read.
struct LimitsWatch {
    tables: Option<String>,
    next: Instant,
}

impl LimitsWatch {
    fn new() -> Self {
        Self {
            tables: pod_launch::limits::tables_now(),
            next: Instant::now() + LIMITS_POLL,
        }
    }

    /// Whether `[limits]` changed since the last read (read at most once
    /// per [`LIMITS_POLL`]).
    fn changed(&mut self, now: Instant) -> bool {
        if now < self.next {
            return false;
        }
        self.next = now + LIMITS_POLL;
        let tables = pod_launch::limits::tables_now();
        let changed = tables != self.tables;
        self.tables = tables;
        changed
    }
}

/// When the worker claims again. A claim that filled every free slot may
/// have left more queued: the next one goes at once. A claim that came
/// back short (or failed) found the queue empty, and a session ending is
/// no news about the queue: the next claim waits for the poll interval.
/// Claiming on every session's end was one claim statement per session,
/// each scanning the running sessions for expired leases; at 10,000
/// sessions their ends kept a database core busy for ten seconds after
/// the last request (BENCHMARKS.md section 15).
#[derive(Debug, Default)]
struct ClaimPacing {
    /// When a claim last found nothing more to take.
    short_at: Option<Instant>,
}

impl ClaimPacing {
    /// Whether a claim may go out at `now`.
    fn may_claim(&self, now: Instant) -> bool {
        self.short_at
            .is_none_or(|at| now.saturating_duration_since(at) >= POLL)
    }

    /// A claim went out at `now`; `full` when it took all it asked for.
    fn claimed(&mut self, full: bool, now: Instant) {
        self.short_at = (!full).then_some(now);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_short_claim_holds_the_next_for_the_poll_interval() {
        let start = Instant::now();
        let mut pacing = ClaimPacing::default();
        assert!(pacing.may_claim(start), "the first claim goes at once");
        // Full: there may be more queued, claim again at once.
        pacing.claimed(true, start);
        assert!(pacing.may_claim(start));
        // Short: the queue is empty; sessions ending meanwhile claim nothing.
        pacing.claimed(false, start);
        assert!(!pacing.may_claim(start));
        assert!(!pacing.may_claim(start + POLL / 2));
        assert!(pacing.may_claim(start + POLL));
        // A failed claim waits the same way, and a full one lifts the wait.
        let later = start + POLL;
        pacing.claimed(false, later);
        assert!(!pacing.may_claim(later + POLL / 4));
        pacing.claimed(true, later + POLL);
        assert!(pacing.may_claim(later + POLL));
    }
}
