//! What a worker tells an operator about its database going away: one
//! report when it does and one when it is back (never one per session),
//! and, when the outage outlasts the operator's threshold, a notification
//! each way through the `[notify]` table.

use chrono::{DateTime, Utc};
use pod_notify::{FleetEvent, Kind, Notifier};
use std::time::{Duration, Instant};

/// Where and when to notify about an outage.
#[derive(Clone, Debug)]
pub(crate) struct OutageNotice {
    /// Where the notifications go (the top-level `[notify]` table).
    pub(crate) notifier: Notifier,
    /// How long the database must have been unreachable before anyone is
    /// told: a blip the store's waits absorb pages nobody.
    pub(crate) after: Duration,
}

/// One worker's view of its database's outages.
pub(crate) struct Outages {
    notice: Option<OutageNotice>,
    database: String,
    worker: String,
    /// The current outage: when it began (this process's clock and the
    /// store's), and whether it was notified.
    current: Option<Current>,
}

struct Current {
    at: Instant,
    since: DateTime<Utc>,
    notified: bool,
}

impl Outages {
    pub(crate) fn new(notice: Option<OutageNotice>, database: String, worker: String) -> Self {
        Self {
            notice,
            database,
            worker,
            current: None,
        }
    }

    /// The database became unreachable at `since`; whether this is news.
    pub(crate) fn down(&mut self, since: DateTime<Utc>) -> bool {
        if self.current.is_some() {
            return false;
        }
        self.current = Some(Current {
            at: Instant::now(),
            since,
            notified: false,
        });
        true
    }

    /// The database is back: how long it was away, if it was.
    pub(crate) fn back(&mut self) -> Option<Duration> {
        let current = self.current.take()?;
        let lasted = current.at.elapsed();
        if current.notified {
            self.send(Kind::DatabaseBack, current.since, lasted);
        }
        Some(lasted)
    }

    /// Notifies once the current outage has lasted past the threshold.
    pub(crate) fn tick(&mut self) {
        let Some(after) = self.notice.as_ref().map(|n| n.after) else {
            return;
        };
        let Some(current) = &mut self.current else {
            return;
        };
        let lasted = current.at.elapsed();
        if current.notified || lasted < after {
            return;
        }
        current.notified = true;
        let since = current.since;
        self.send(Kind::DatabaseDown, since, lasted);
    }

    fn send(&self, kind: Kind, since: DateTime<Utc>, lasted: Duration) {
        if let Some(notice) = &self.notice {
            notice.notifier.send_fleet(FleetEvent {
                kind,
                at: Utc::now(),
                database: self.database.clone(),
                worker: self.worker.clone(),
                since,
                down_secs: (lasted.as_secs_f64() * 10.0).round() / 10.0,
            });
        }
    }
}
