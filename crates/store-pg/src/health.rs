//! Whether the database can be reached, as every statement of a store
//! finds out.
//!
//! A database that cannot be reached (down, restarting, failing over) is
//! not a failed session: the batched writes (appends, releases, renewals)
//! wait for it with backoff and jitter, so a Pod whose record waits sends
//! no model request it could not record, and continues when the database
//! is back. [`Health`] turns the errors of all of a store's connections into
//! one state, so that an outage is one line when it begins and one when it
//! ends, not one per session, and bounds the wait when the operator asks
//! ([`PgStoreConfig::outage_limit`](crate::PgStoreConfig::outage_limit)).

use chrono::{DateTime, Utc};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};
use tokio::sync::{watch, Notify};

/// Whether a store's database can be reached.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Availability {
    /// Statements go through.
    Up,
    /// Connecting or a statement failed because the database could not be
    /// reached, since `since`; writes wait for it.
    Down {
        /// When it was first found unreachable.
        since: DateTime<Utc>,
    },
}

/// The state of one store's database, shared by its connections.
pub(crate) struct Health {
    location: String,
    limit: Option<Duration>,
    // Read on every statement; the lock below is taken only when it flips.
    down: AtomicBool,
    state: parking_lot::Mutex<State>,
    watch: watch::Sender<Availability>,
    back: Notify,
}

#[derive(Default)]
struct State {
    since: Option<(Instant, DateTime<Utc>)>,
    back_at: Option<Instant>,
}

impl Health {
    /// The health of the database at `location`; writes wait for it at
    /// most `limit` (for ever when `None`).
    pub fn new(location: String, limit: Option<Duration>) -> Self {
        Self {
            location,
            limit,
            down: AtomicBool::new(false),
            state: parking_lot::Mutex::new(State::default()),
            watch: watch::channel(Availability::Up).0,
            back: Notify::new(),
        }
    }

    /// Whether it is down now (one atomic read: asked on every statement).
    pub fn is_down(&self) -> bool {
        self.down.load(Ordering::Relaxed)
    }

    /// Now and as it changes.
    pub fn subscribe(&self) -> watch::Receiver<Availability> {
        self.watch.subscribe()
    }

    /// Resolves when an outage ends (for the lease renewal, which renews
    /// at once then).
    pub async fn back(&self) {
        self.back.notified().await;
    }

    /// The database could not be reached (`cause`): the outage begins
    /// unless it already did.
    pub fn unreachable(&self, cause: &dyn std::fmt::Display) {
        if self.down.swap(true, Ordering::Relaxed) {
            return;
        }
        let since = Utc::now();
        self.state.lock().since = Some((Instant::now(), since));
        pod::stats::store_down(since);
        tracing::warn!(
            store = %self.location,
            "the session store is unreachable ({cause}); sessions pause until it is back"
        );
        self.watch.send_replace(Availability::Down { since });
    }

    /// A statement went through: an outage ends.
    pub fn reachable(&self) {
        if !self.down.load(Ordering::Relaxed) || !self.down.swap(false, Ordering::Relaxed) {
            return;
        }
        let lasted = {
            let mut state = self.state.lock();
            state.back_at = Some(Instant::now());
            state.since.take().map(|(at, _)| at.elapsed())
        }
        .unwrap_or_default();
        pod::stats::store_back(lasted);
        tracing::warn!(
            store = %self.location,
            "the session store is back after {:.1}s; sessions continue",
            lasted.as_secs_f64()
        );
        self.watch.send_replace(Availability::Up);
        self.back.notify_waiters();
    }

    /// Whether the outage has lasted longer than the operator allows.
    pub fn exhausted(&self) -> bool {
        let Some(limit) = self.limit else {
            return false;
        };
        self.state
            .lock()
            .since
            .is_some_and(|(at, _)| at.elapsed() >= limit)
    }

    /// Whether an outage ended less than `within` ago.
    pub fn back_within(&self, within: Duration) -> bool {
        self.state
            .lock()
            .back_at
            .is_some_and(|at| at.elapsed() < within)
    }
}

/// Whether `err` means the database could not be reached: the connection
/// closed or failed at the socket (an I/O error), a connection exception
/// (class 08), or the server shutting down or starting up (class 57P:
/// admin shutdown, crash shutdown, cannot connect now). A client-side
/// error (a value that does not convert, say) is not an outage: waiting
/// for it would wait for ever.
pub(crate) fn unreachable(err: &tokio_postgres::Error) -> bool {
    match err.as_db_error() {
        None => err.is_closed() || io_cause(err),
        Some(db) => {
            let code = db.code().code();
            code.starts_with("08") || code.starts_with("57P")
        }
    }
}

/// Whether an I/O error is among `err`'s causes.
fn io_cause(err: &(dyn std::error::Error + 'static)) -> bool {
    let mut cause = err.source();
    while let Some(inner) = cause {
        if inner.is::<std::io::Error>() {
            return true;
        }
        cause = inner.source();
    }
    false
}

/// The wait before attempt `attempt` (from 1) at an unreachable database:
/// doubling from 200 ms up to 5 s, each with up to a quarter more at
/// random, so that many waiters do not knock at the same instant.
pub(crate) fn backoff(attempt: u32) -> Duration {
    let base = Duration::from_millis(100u64 << attempt.clamp(1, 6)).min(Duration::from_secs(5));
    let jitter = (uuid::Uuid::new_v4().as_u128() % 1000) as u64;
    base + base.mul_f64(jitter as f64 / 4000.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_outage_is_one_change_down_and_one_back() {
        let health = Health::new("db".into(), None);
        let mut seen = health.subscribe();
        assert_eq!(*seen.borrow_and_update(), Availability::Up);
        health.reachable();
        assert!(!seen.has_changed().unwrap_or(true), "up stays up quietly");
        health.unreachable(&"refused");
        health.unreachable(&"refused again");
        assert!(health.is_down());
        assert!(matches!(
            *seen.borrow_and_update(),
            Availability::Down { .. }
        ));
        assert!(!health.exhausted(), "no limit: never exhausted");
        health.reachable();
        assert_eq!(*seen.borrow_and_update(), Availability::Up);
        assert!(health.back_within(Duration::from_secs(60)));
        assert!(!health.is_down());
    }

    #[test]
    fn a_limited_wait_is_exhausted_after_its_limit() {
        let health = Health::new("db".into(), Some(Duration::ZERO));
        assert!(!health.exhausted(), "not while up");
        health.unreachable(&"refused");
        assert!(health.exhausted());
    }

    #[test]
    fn the_backoff_grows_to_five_seconds_with_jitter() {
        let first = backoff(1);
        assert!(first >= Duration::from_millis(200) && first <= Duration::from_millis(250));
        let late = backoff(30);
        assert!(late >= Duration::from_secs(5) && late <= Duration::from_millis(6250));
    }
}
