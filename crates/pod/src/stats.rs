//! Process-wide counters of what the stores do, for a front end's metrics
//! (`pod serve`'s `/metrics`): how long log appends take, and how fleet
//! leases fare. Atomics only: counting costs an append two clock reads and
//! a few relaxed adds.

use chrono::{DateTime, Utc};
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::time::Duration;

/// Upper bounds of the append-latency buckets, in seconds.
pub const APPEND_BUCKETS: [f64; 12] = [
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5,
];

static APPEND_COUNTS: [AtomicU64; 12] = [const { AtomicU64::new(0) }; 12];
static APPEND_COUNT: AtomicU64 = AtomicU64::new(0);
static APPEND_NANOS: AtomicU64 = AtomicU64::new(0);
static RENEWALS: AtomicU64 = AtomicU64::new(0);
static RENEWAL_FAILURES: AtomicU64 = AtomicU64::new(0);
static LEASES_LOST: AtomicU64 = AtomicU64::new(0);
static TAKEOVERS: AtomicU64 = AtomicU64::new(0);
static GROUP_COMMITS: AtomicU64 = AtomicU64::new(0);
static GROUP_RECORDS: AtomicU64 = AtomicU64::new(0);
static STORES_DOWN: AtomicU64 = AtomicU64::new(0);
static OUTAGES: AtomicU64 = AtomicU64::new(0);
static OUTAGE_MILLIS: AtomicU64 = AtomicU64::new(0);
static SCHEDULE_STARTED: AtomicU64 = AtomicU64::new(0);
static SCHEDULE_SKIPPED: AtomicU64 = AtomicU64::new(0);
static SCHEDULE_MISSED: AtomicU64 = AtomicU64::new(0);
static TRIGGER_STARTED: AtomicU64 = AtomicU64::new(0);
static TRIGGER_DUPLICATE: AtomicU64 = AtomicU64::new(0);
static TRIGGER_REFUSED: AtomicU64 = AtomicU64::new(0);
static FLEET_RUNNING: AtomicU64 = AtomicU64::new(0);
static FLEET_CAPACITY: AtomicU64 = AtomicU64::new(0);
static FLEET_RELEASED: AtomicU64 = AtomicU64::new(0);
// When the current outage began, in milliseconds since the epoch; 0: none.
static DOWN_SINCE_MS: AtomicI64 = AtomicI64::new(0);

/// A log append took `took` (committed, and synced if asked).
pub fn appended(took: Duration) {
    let seconds = took.as_secs_f64();
    for (bound, count) in APPEND_BUCKETS.iter().zip(&APPEND_COUNTS) {
        if seconds <= *bound {
            count.fetch_add(1, Ordering::Relaxed);
        }
    }
    APPEND_COUNT.fetch_add(1, Ordering::Relaxed);
    let nanos = u64::try_from(took.as_nanos()).unwrap_or(u64::MAX);
    APPEND_NANOS.fetch_add(nanos, Ordering::Relaxed);
}

/// `leases` lease renewals went through (`ok`) or failed (a database
/// error); a store renews all its leases in one statement.
pub fn leases_renewed(ok: bool, leases: u64) {
    match ok {
        true => RENEWALS.fetch_add(leases, Ordering::Relaxed),
        false => RENEWAL_FAILURES.fetch_add(leases, Ordering::Relaxed),
    };
}

/// Another worker took a lease this process held.
pub fn lease_lost() {
    LEASES_LOST.fetch_add(1, Ordering::Relaxed);
}

/// This process took over a session whose worker died (its lease expired).
pub fn lease_taken_over() {
    TAKEOVERS.fetch_add(1, Ordering::Relaxed);
}

/// A store committed `records` log records, of one or more sessions, in
/// one statement (PostgreSQL's group commit).
pub fn group_committed(records: u64) {
    GROUP_COMMITS.fetch_add(1, Ordering::Relaxed);
    GROUP_RECORDS.fetch_add(records, Ordering::Relaxed);
}

/// A store found its database unreachable at `since`: an outage began.
pub fn store_down(since: DateTime<Utc>) {
    if STORES_DOWN.fetch_add(1, Ordering::Relaxed) == 0 {
        DOWN_SINCE_MS.store(since.timestamp_millis().max(1), Ordering::Relaxed);
    }
    OUTAGES.fetch_add(1, Ordering::Relaxed);
}

/// Since when a store of this process cannot reach its database, if one
/// cannot now (for the API to answer 503 instead of 500 meanwhile).
pub fn store_down_since() -> Option<DateTime<Utc>> {
    match DOWN_SINCE_MS.load(Ordering::Relaxed) {
        0 => None,
        ms => DateTime::from_timestamp_millis(ms),
    }
}

/// A store's outage ended after `lasted`.
pub fn store_back(lasted: Duration) {
    // Saturating: a store counts its own outages, one down per back.
    let before =
        STORES_DOWN.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_sub(1));
    if before == Ok(1) {
        DOWN_SINCE_MS.store(0, Ordering::Relaxed);
    }
    let millis = u64::try_from(lasted.as_millis()).unwrap_or(u64::MAX);
    OUTAGE_MILLIS.fetch_add(millis, Ordering::Relaxed);
}

/// A schedule's fire time started a session (`started`) or was skipped
/// while the last one still ran, passing over `missed` earlier fire times.
pub fn schedule_fired(started: bool, missed: u64) {
    match started {
        true => SCHEDULE_STARTED.fetch_add(1, Ordering::Relaxed),
        false => SCHEDULE_SKIPPED.fetch_add(1, Ordering::Relaxed),
    };
    SCHEDULE_MISSED.fetch_add(missed, Ordering::Relaxed);
}

/// This process's fleet worker runs `running` sessions now and admits at
/// most `capacity` at once (what its open-file limit can serve).
pub fn fleet_admitted(running: u64, capacity: u64) {
    FLEET_RUNNING.store(running, Ordering::Relaxed);
    FLEET_CAPACITY.store(capacity, Ordering::Relaxed);
}

/// The fleet worker gave a session back to the queue because its model
/// connection found no file descriptor.
pub fn fleet_released() {
    FLEET_RELEASED.fetch_add(1, Ordering::Relaxed);
}

/// What a webhook delivery did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Delivery {
    /// It started a session.
    Started,
    /// Its session was started by an earlier delivery of the same id.
    Duplicate,
    /// It was refused (signature, size, rate, unknown trigger).
    Refused,
}

/// A webhook delivery was handled.
pub fn trigger_delivered(delivery: Delivery) {
    let counter = match delivery {
        Delivery::Started => &TRIGGER_STARTED,
        Delivery::Duplicate => &TRIGGER_DUPLICATE,
        Delivery::Refused => &TRIGGER_REFUSED,
    };
    counter.fetch_add(1, Ordering::Relaxed);
}

/// The counters now.
#[derive(Debug, Clone, PartialEq)]
pub struct Stats {
    /// Appends at or under each of [`APPEND_BUCKETS`] (cumulative).
    pub append_buckets: Vec<(f64, u64)>,
    /// Appends.
    pub appends: u64,
    /// Their total time, in seconds.
    pub append_seconds: f64,
    /// Lease renewals that went through.
    pub renewals: u64,
    /// Lease renewals that failed.
    pub renewal_failures: u64,
    /// Leases another worker took.
    pub leases_lost: u64,
    /// Sessions taken over from a worker that died.
    pub takeovers: u64,
    /// Statements that committed log records (group commits).
    pub group_commits: u64,
    /// The records they committed.
    pub group_commit_records: u64,
    /// Stores whose database is unreachable now.
    pub stores_down: u64,
    /// Outages that began (a store found its database unreachable).
    pub outages: u64,
    /// How long the outages that ended lasted, in seconds.
    pub outage_seconds: f64,
    /// Schedules' fire times that started a session.
    pub schedule_started: u64,
    /// Fire times skipped while the last session still ran.
    pub schedule_skipped: u64,
    /// Fire times passed over while no worker ran.
    pub schedule_missed: u64,
    /// Webhook deliveries that started a session.
    pub trigger_started: u64,
    /// Deliveries whose session an earlier one started.
    pub trigger_duplicate: u64,
    /// Deliveries refused.
    pub trigger_refused: u64,
    /// Sessions this process's fleet worker runs now.
    pub fleet_running: u64,
    /// The most it runs at once; 0 when the process runs no fleet worker.
    pub fleet_capacity: u64,
    /// Sessions it gave back to the queue for want of a file descriptor.
    pub fleet_released: u64,
}

/// What has been counted in this process.
pub fn snapshot() -> Stats {
    let load = |c: &AtomicU64| c.load(Ordering::Relaxed);
    Stats {
        append_buckets: APPEND_BUCKETS
            .iter()
            .zip(&APPEND_COUNTS)
            .map(|(bound, count)| (*bound, load(count)))
            .collect(),
        appends: load(&APPEND_COUNT),
        append_seconds: load(&APPEND_NANOS) as f64 / 1e9,
        renewals: load(&RENEWALS),
        renewal_failures: load(&RENEWAL_FAILURES),
        leases_lost: load(&LEASES_LOST),
        takeovers: load(&TAKEOVERS),
        group_commits: load(&GROUP_COMMITS),
        group_commit_records: load(&GROUP_RECORDS),
        stores_down: load(&STORES_DOWN),
        outages: load(&OUTAGES),
        outage_seconds: load(&OUTAGE_MILLIS) as f64 / 1e3,
        schedule_started: load(&SCHEDULE_STARTED),
        schedule_skipped: load(&SCHEDULE_SKIPPED),
        schedule_missed: load(&SCHEDULE_MISSED),
        trigger_started: load(&TRIGGER_STARTED),
        trigger_duplicate: load(&TRIGGER_DUPLICATE),
        trigger_refused: load(&TRIGGER_REFUSED),
        fleet_running: load(&FLEET_RUNNING),
        fleet_capacity: load(&FLEET_CAPACITY),
        fleet_released: load(&FLEET_RELEASED),
    }
}
