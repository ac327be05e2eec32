//! When a schedule fires: every fixed period from when it was added, or
//! the times of a cron expression in a time zone (croner and chrono-tz:
//! DST follows the zone; a fixed time in a spring-forward gap fires just
//! after it, one in a fall-back overlap once), and catch-up after downtime
//! (the latest passed fire time once, the others counted as missed).
//!
//! Pure computation, no store: the fleet's PostgreSQL schedules
//! (`pod-fleet`) and a single server's file-store schedules
//! ([`crate::schedules`]) both fire by it.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use std::str::FromStr;
use std::time::Duration;

/// The shortest period of `--every`.
pub const MIN_PERIOD: Duration = Duration::from_secs(1);

/// How many passed fire times catch-up counts one by one before it
/// estimates the rest (a minutely schedule after a week's downtime).
const COUNT_LIMIT: i64 = 100_000;

/// When a schedule fires.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Timing {
    /// Every `millis` milliseconds, from when it was added.
    Every {
        /// The period.
        millis: u64,
    },
    /// At the times of a cron expression, in a time zone.
    Cron {
        /// Five fields (minute hour day-of-month month day-of-week) or
        /// six with seconds first, or a nickname (`@daily`).
        expr: String,
        /// An IANA zone (`Europe/Berlin`); `UTC` by default.
        tz: String,
    },
}

/// A timing that cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum TimingError {
    /// The cron expression does not parse.
    #[error("`{expr}` is not a cron expression: {reason}")]
    Cron {
        /// The expression.
        expr: String,
        /// Why.
        reason: String,
    },
    /// The zone is not in the time-zone database.
    #[error(
        "`{0}` is not a time zone (use an IANA name such as Europe/Berlin or America/New_York)"
    )]
    Zone(String),
    /// The period is too short.
    #[error("a schedule's period must be at least {}s", MIN_PERIOD.as_secs())]
    TooOften,
    /// The expression has no next time.
    #[error("`{0}` never fires again")]
    Never(String),
    /// The stored timing is not one this build knows.
    #[error("the schedule's timing cannot be read: {0}")]
    Stored(#[source] serde_json::Error),
}

impl Timing {
    /// Every `period` (at least [`MIN_PERIOD`]).
    pub fn every(period: Duration) -> Result<Self, TimingError> {
        if period < MIN_PERIOD {
            return Err(TimingError::TooOften);
        }
        Ok(Timing::Every {
            millis: u64::try_from(period.as_millis()).unwrap_or(u64::MAX),
        })
    }

    /// The times of cron expression `expr` in zone `tz` (UTC if `None`).
    pub fn cron(expr: &str, tz: Option<&str>) -> Result<Self, TimingError> {
        let timing = Timing::Cron {
            expr: expr.trim().to_string(),
            tz: tz.unwrap_or("UTC").trim().to_string(),
        };
        // Checked now, not at the first fire.
        timing.next_after(Utc::now())?;
        Ok(timing)
    }

    /// As stored.
    pub fn from_json(value: &serde_json::Value) -> Result<Self, TimingError> {
        serde_json::from_value(value.clone()).map_err(TimingError::Stored)
    }

    /// To store.
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::to_value(self).unwrap_or_default()
    }

    /// The first fire time of a schedule added at `now`.
    pub fn first(&self, now: DateTime<Utc>) -> Result<DateTime<Utc>, TimingError> {
        self.next_after(now)
    }

    /// The first fire time strictly after `t`.
    pub fn next_after(&self, t: DateTime<Utc>) -> Result<DateTime<Utc>, TimingError> {
        match self {
            Timing::Every { millis } => Ok(t + period(*millis)),
            Timing::Cron { expr, tz } => {
                let cron = croner::Cron::from_str(expr).map_err(|err| TimingError::Cron {
                    expr: expr.clone(),
                    reason: err.to_string(),
                })?;
                let zone =
                    chrono_tz::Tz::from_str(tz).map_err(|_| TimingError::Zone(tz.clone()))?;
                cron.find_next_occurrence(&t.with_timezone(&zone), false)
                    .map(|next| next.with_timezone(&Utc))
                    .map_err(|_| TimingError::Never(expr.clone()))
            }
        }
    }

    /// Catch-up for a schedule waiting for `due` when `now` has come:
    /// the latest fire time not after `now` (to run once), how many
    /// earlier ones it passes over, and the fire time after `now`.
    pub fn catch_up(
        &self,
        due: DateTime<Utc>,
        now: DateTime<Utc>,
    ) -> Result<(DateTime<Utc>, i64, DateTime<Utc>), TimingError> {
        if let Timing::Every { millis } = self {
            let step = period(*millis);
            let passed = (now - due).num_milliseconds().max(0) / (*millis).max(1) as i64;
            let latest = due + step * i32::try_from(passed).unwrap_or(i32::MAX);
            return Ok((latest, passed, latest + step));
        }
        let (mut latest, mut missed) = (due, 0i64);
        loop {
            let next = self.next_after(latest)?;
            if next > now {
                return Ok((latest, missed, next));
            }
            latest = next;
            missed += 1;
            if missed >= COUNT_LIMIT {
                // Jump to the present; the count stays a lower bound.
                let mut at = now - chrono::Duration::seconds(1);
                while self.next_after(at)? <= now {
                    at = self.next_after(at)?;
                }
                latest = at.max(latest);
                return Ok((latest, missed, self.next_after(latest)?));
            }
        }
    }

    /// In words, for lists.
    pub fn describe(&self) -> String {
        match self {
            Timing::Every { millis } => format!("every {}", every_words(*millis)),
            Timing::Cron { expr, tz } => format!("cron {expr} ({tz})"),
        }
    }
}

/// `90000` → `1m30s`.
fn every_words(millis: u64) -> String {
    if !millis.is_multiple_of(1000) {
        return format!("{millis}ms");
    }
    let mut left = millis / 1000;
    let mut out = String::new();
    for (unit, size) in [("d", 86_400), ("h", 3_600), ("m", 60), ("s", 1)] {
        if left >= size {
            out.push_str(&format!("{}{unit}", left / size));
            left %= size;
        }
    }
    out
}

fn period(millis: u64) -> chrono::Duration {
    chrono::Duration::milliseconds(i64::try_from(millis).unwrap_or(i64::MAX))
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    fn utc(y: i32, mo: u32, d: u32, h: u32, mi: u32, s: u32) -> DateTime<Utc> {
        Utc.with_ymd_and_hms(y, mo, d, h, mi, s)
            .single()
            .unwrap_or_else(|| unreachable!())
    }

    #[test]
    fn every_fires_by_its_period_and_catches_up_with_the_latest_once() {
        let timing = Timing::every(Duration::from_secs(2)).unwrap_or_else(|e| panic!("{e}"));
        let due = utc(2026, 1, 1, 0, 0, 0);
        // Not yet passed: runs `due`, nothing missed.
        let (latest, missed, next) = timing.catch_up(due, due).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!((latest, missed, next), (due, 0, utc(2026, 1, 1, 0, 0, 2)));
        // Seven seconds late: 0, 2, 4, 6 passed; runs 6, three missed.
        let now = utc(2026, 1, 1, 0, 0, 7);
        let (latest, missed, next) = timing.catch_up(due, now).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(latest, utc(2026, 1, 1, 0, 0, 6));
        assert_eq!(missed, 3);
        assert_eq!(next, utc(2026, 1, 1, 0, 0, 8));
        assert!(Timing::every(Duration::from_millis(500)).is_err());
    }

    #[test]
    fn cron_follows_its_zone_across_daylight_saving() {
        // 03:00 every day in Berlin: 02:00 UTC in summer, 02:00 UTC+1 in
        // winter; DST ended on 2026-10-25.
        let timing =
            Timing::cron("0 3 * * *", Some("Europe/Berlin")).unwrap_or_else(|e| panic!("{e}"));
        let before = utc(2026, 10, 24, 12, 0, 0);
        let first = timing.next_after(before).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            first,
            utc(2026, 10, 25, 2, 0, 0),
            "03:00 CET after the change"
        );
        let summer = timing
            .next_after(utc(2026, 7, 1, 12, 0, 0))
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(summer, utc(2026, 7, 2, 1, 0, 0), "03:00 CEST");
        // Catch-up after three days down runs the latest once.
        let (latest, missed, next) = timing
            .catch_up(first, utc(2026, 10, 28, 12, 0, 0))
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(latest, utc(2026, 10, 28, 2, 0, 0));
        assert_eq!(missed, 3);
        assert_eq!(next, utc(2026, 10, 29, 2, 0, 0));
    }

    #[test]
    fn bad_expressions_and_zones_are_refused_with_what_was_wrong() {
        let err = Timing::cron("61 * * * *", None)
            .err()
            .map(|e| e.to_string());
        assert!(err.is_some_and(|e| e.contains("61 * * * *")));
        let err = Timing::cron("0 3 * * *", Some("Mars/Olympus"))
            .err()
            .map(|e| e.to_string());
        assert!(err.is_some_and(|e| e.contains("Mars/Olympus")));
        let stored = Timing::every(Duration::from_secs(60)).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(Timing::from_json(&stored.to_json()).ok(), Some(stored));
    }
}
