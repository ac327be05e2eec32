//! Limits shared by every session of a profile in a store (`[limits]`):
//! money, tokens and requests per UTC minute, hour or day, held across all
//! the workers of a fleet.
//!
//! A request *reserves* its estimate before it is sent, in every window
//! of its profile's limits at once, and is refused when a window's spent
//! plus reserved plus the estimate would pass the limit; its answer
//! *settles*: the reservation is replaced by what the answer cost. N
//! sessions in flight therefore pass a limit by at most what their
//! answers cost beyond their estimates, at most one request each.
//!
//! The store keeps the windows: [`SessionStore::shared_limits`]
//! (PostgreSQL: one row per profile, measure and window, reserved with one
//! conditional `UPDATE`). A store without one (the file store) uses
//! [`InProcessLimits`], whose windows are this process's: a single `pod
//! serve` holds them, separate `pod run` processes do not share them.
//!
//! [`SessionStore::shared_limits`]: crate::SessionStore::shared_limits

use crate::error::PodError;
use chrono::{DateTime, TimeZone, Utc};
use pod_llm::{Item, Prices, Usage};
pub use pod_worker::{Measure, Window};
use std::collections::HashMap;
use std::sync::{Arc, LazyLock};

/// One limit of a profile: at most `max` of `measure` per `window`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Cap {
    /// What it counts.
    pub measure: Measure,
    /// Over which window.
    pub window: Window,
    /// The most, in the measure's units (money in millionths).
    pub max: u64,
}

/// Amounts of every measure: what a request reserves or what its answer
/// cost.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Amounts {
    /// Money, in millionths.
    pub money: u64,
    /// Tokens.
    pub tokens: u64,
    /// Requests.
    pub requests: u64,
}

impl Amounts {
    /// The amount of `measure`.
    pub fn of(&self, measure: Measure) -> u64 {
        match measure {
            Measure::Money => self.money,
            Measure::Tokens => self.tokens,
            Measure::Requests => self.requests,
        }
    }

    /// What an answer of `usage` cost, at `prices` when there are some.
    pub fn of_usage(usage: &Usage, prices: Option<&Prices>) -> Self {
        Self {
            money: prices.map_or(0, |p| p.charge(usage).micros()),
            tokens: usage.prompt_tokens + usage.completion_tokens,
            requests: 1,
        }
    }
}

/// A reservation granted: what was reserved, in which windows (each
/// named by its start, so that the answer settles in the window it was
/// reserved in, even after the window rolled over).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reservation {
    /// The profile.
    pub profile: String,
    /// The windows reserved in, by their start.
    pub windows: Vec<(Cap, DateTime<Utc>)>,
    /// What was reserved in each.
    pub amounts: Amounts,
}

/// How a reservation went.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reserve {
    /// Reserved: send the request, then settle.
    Granted(Reservation),
    /// The limit `cap` has no room for the request until `until` (the end
    /// of its window); `spent` is what its window holds, spent and
    /// reserved.
    Refused {
        /// The limit.
        cap: Cap,
        /// Spent and reserved in its window.
        spent: u64,
        /// When its window ends.
        until: DateTime<Utc>,
    },
}

/// Where a store keeps its profiles' windows.
#[async_trait::async_trait]
pub trait SharedLimits: Send + Sync + std::fmt::Debug {
    /// Reserves `ask` in the current window of every cap of `profile`, all
    /// or none.
    async fn reserve(&self, profile: &str, caps: &[Cap], ask: Amounts)
        -> Result<Reserve, PodError>;

    /// Replaces `reservation` by `actual` (zero when the request got no
    /// answer) in the windows it was made in.
    async fn settle(&self, reservation: &Reservation, actual: Amounts) -> Result<(), PodError>;
}

/// A session's shared limits: its profile's caps, how a request is
/// estimated, and the store that keeps the windows.
#[derive(Clone, Debug)]
pub struct SharedLimitsConfig {
    /// The profile whose windows the session counts in.
    pub profile: String,
    /// Its caps (none: the guard is not installed).
    pub caps: Vec<Cap>,
    /// Its prices (money caps need them).
    pub prices: Option<Prices>,
    /// The output tokens a request's estimate assumes (its input is
    /// estimated from the request).
    pub output_estimate: u64,
    /// Where the windows are; `None`: the store's, else this process's.
    pub backend: Option<Arc<dyn SharedLimits>>,
}

/// Default of [`SharedLimitsConfig::output_estimate`]: a long answer of
/// an agent's turn (a tool call with a file's contents), more than most
/// answers and far less than a model's output limit, which would refuse
/// requests that fit.
pub const DEFAULT_OUTPUT_ESTIMATE: u64 = 1024;

impl SharedLimitsConfig {
    /// What a request of `request` reserves: one request, its input
    /// estimated from its items plus `overhead` (the system prompt and
    /// the tools' specs), [`output_estimate`](Self::output_estimate)
    /// output tokens, and their price (input at the fresh-input price).
    pub fn estimate(&self, request: &[Item], overhead: u64) -> Amounts {
        let items: u64 = request
            .iter()
            .map(pod_llm::tokens::estimate_item_tokens)
            .sum();
        let input = items + overhead;
        let usage = Usage {
            prompt_tokens: input,
            completion_tokens: self.output_estimate,
            ..Usage::default()
        };
        Amounts::of_usage(&usage, self.prices.as_ref())
    }
}

/// The start of the `window` that holds `at`.
pub fn window_start(window: Window, at: DateTime<Utc>) -> DateTime<Utc> {
    let secs = at.timestamp();
    let start = secs - secs.rem_euclid(window.secs());
    Utc.timestamp_opt(start, 0).single().unwrap_or(at)
}

/// The end of the window starting at `start`.
pub fn window_end(window: Window, start: DateTime<Utc>) -> DateTime<Utc> {
    start + chrono::Duration::seconds(window.secs())
}

/// A window of one limit of one profile, by its start.
type WindowKey = (String, Cap, DateTime<Utc>);

/// Windows kept in this process (the file store's): what one `pod serve`
/// holds across its sessions.
#[derive(Debug, Default)]
pub struct InProcessLimits {
    // (profile, measure, window, start) → (spent, reserved). Held for a
    // few additions, never across an await.
    windows: parking_lot::Mutex<HashMap<WindowKey, (u64, u64)>>,
}

/// This process's windows, for every session whose store keeps none.
pub fn in_process() -> Arc<dyn SharedLimits> {
    static LIMITS: LazyLock<Arc<InProcessLimits>> = LazyLock::new(Default::default);
    Arc::clone(&*LIMITS) as Arc<dyn SharedLimits>
}

impl InProcessLimits {
    /// [`SharedLimits::reserve`] at `now`.
    pub fn reserve_at(
        &self,
        profile: &str,
        caps: &[Cap],
        ask: Amounts,
        now: DateTime<Utc>,
    ) -> Reserve {
        let mut windows = self.windows.lock();
        // Windows over for a day, with nothing reserved, are forgotten: a
        // server of per-minute limits would otherwise keep every minute.
        let forget = now - chrono::Duration::days(1);
        windows.retain(|(_, cap, start), (_, reserved)| {
            *reserved > 0 || window_end(cap.window, *start) > forget
        });
        let keyed: Vec<_> = caps
            .iter()
            .map(|cap| (profile.to_string(), *cap, window_start(cap.window, now)))
            .collect();
        for key in &keyed {
            let (spent, reserved) = windows.get(key).copied().unwrap_or_default();
            let cap = key.1;
            let held = spent.saturating_add(reserved);
            if held.saturating_add(ask.of(cap.measure)) > cap.max {
                return Reserve::Refused {
                    cap,
                    spent: held,
                    until: window_end(cap.window, key.2),
                };
            }
        }
        let mut reserved_in = Vec::with_capacity(keyed.len());
        for key in keyed {
            let amount = ask.of(key.1.measure);
            reserved_in.push((key.1, key.2));
            let entry = windows.entry(key).or_default();
            entry.1 = entry.1.saturating_add(amount);
        }
        Reserve::Granted(Reservation {
            profile: profile.to_string(),
            windows: reserved_in,
            amounts: ask,
        })
    }
}

#[async_trait::async_trait]
impl SharedLimits for InProcessLimits {
    async fn reserve(
        &self,
        profile: &str,
        caps: &[Cap],
        ask: Amounts,
    ) -> Result<Reserve, PodError> {
        Ok(self.reserve_at(profile, caps, ask, Utc::now()))
    }

    async fn settle(&self, reservation: &Reservation, actual: Amounts) -> Result<(), PodError> {
        let mut windows = self.windows.lock();
        for (cap, start) in &reservation.windows {
            let key = (reservation.profile.clone(), *cap, *start);
            let entry = windows.entry(key).or_default();
            entry.1 = entry.1.saturating_sub(reservation.amounts.of(cap.measure));
            entry.0 = entry.0.saturating_add(actual.of(cap.measure));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cap(measure: Measure, window: Window, max: u64) -> Cap {
        Cap {
            measure,
            window,
            max,
        }
    }

    fn at(secs: i64) -> DateTime<Utc> {
        Utc.timestamp_opt(secs, 0).single().unwrap()
    }

    #[test]
    fn windows_are_utc_calendar_minutes_hours_and_days() {
        // 2026-12-04 17:38:21 UTC.
        let now = at(1_796_405_901);
        assert_eq!(window_start(Window::Minute, now), at(1_796_405_880));
        assert_eq!(window_start(Window::Hour, now), at(1_796_403_600));
        assert_eq!(window_start(Window::Day, now), at(1_796_342_400));
        assert_eq!(
            window_end(Window::Day, window_start(Window::Day, now)),
            at(1_796_428_800)
        );
    }

    #[tokio::test]
    async fn a_reservation_is_refused_once_spent_and_reserved_leave_no_room() {
        let limits = InProcessLimits::default();
        let caps = [
            cap(Measure::Requests, Window::Day, 3),
            cap(Measure::Money, Window::Hour, 10),
        ];
        let ask = Amounts {
            money: 4,
            tokens: 0,
            requests: 1,
        };
        let now = at(1_796_405_901);
        let Reserve::Granted(first) = limits.reserve_at("p", &caps, ask, now) else {
            panic!("room for the first")
        };
        let Reserve::Granted(second) = limits.reserve_at("p", &caps, ask, now) else {
            panic!("room for the second")
        };
        // 8 of 10 reserved: a third estimate of 4 does not fit.
        assert_eq!(
            limits.reserve_at("p", &caps, ask, now),
            Reserve::Refused {
                cap: caps[1],
                spent: 8,
                until: at(1_796_407_200)
            }
        );
        // Another profile has its own windows.
        assert!(matches!(
            limits.reserve_at("q", &caps, ask, now),
            Reserve::Granted(_)
        ));
        // Settled below the estimate, the room comes back.
        let cheap = Amounts {
            money: 1,
            tokens: 0,
            requests: 1,
        };
        limits.settle(&first, cheap).await.unwrap();
        limits.settle(&second, cheap).await.unwrap();
        let Reserve::Granted(_) = limits.reserve_at("p", &caps, ask, now) else {
            panic!("2 spent of 10")
        };
        // Three requests a day: the fourth is refused whatever the money.
        assert!(matches!(
            limits.reserve_at("p", &caps, ask, now),
            Reserve::Refused { cap, spent: 3, .. } if cap == caps[0]
        ));
        // The next hour has room for money, not for requests (per day).
        assert!(matches!(
            limits.reserve_at("p", &caps, ask, at(1_796_407_200)),
            Reserve::Refused { cap, .. } if cap == caps[0]
        ));
    }
}
