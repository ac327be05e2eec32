//! A profile's shared limits in a replay: the recording's model spends
//! nothing, and the windows it was refused by are other sessions' too, so
//! the replay is refused exactly where the recording was (after as many
//! granted requests as the recording had answers before the stop) and
//! granted everywhere else, taking no room in any real window.

use pod::log::LogRecord;
use pod::shared_limits::{Amounts, Cap, Reservation, Reserve, SharedLimits, SharedLimitsConfig};
use pod::{ItemKind, Limit, PodError};
use std::collections::VecDeque;

/// A shared limit's stop in the recording: after how many answers, and
/// what it said.
#[derive(Debug, Clone, PartialEq)]
struct Stop {
    answers: u64,
    cap: Cap,
    spent: u64,
}

/// The recording's refusals, in order.
#[derive(Debug, Default)]
pub(crate) struct Replayed {
    // The stops not replayed yet and the requests granted so far. Held
    // for a comparison and an update, never across an await.
    state: std::sync::Mutex<(VecDeque<Stop>, u64)>,
}

/// The shared limits a replay of `records` runs with: `None` when no
/// shared limit stopped the recording.
pub(crate) fn config(records: &[LogRecord]) -> Option<SharedLimitsConfig> {
    let mut answers = 0;
    let mut stops = VecDeque::new();
    let mut profile = None;
    for record in records {
        match record {
            LogRecord::Item(item) if matches!(item.kind, ItemKind::Assistant { .. }) => {
                answers += 1
            }
            LogRecord::Stopped(stopped) => {
                if let Limit::Shared {
                    profile: name,
                    measure,
                    window,
                    max,
                    spent,
                } = &stopped.limit
                {
                    profile.get_or_insert_with(|| name.clone());
                    stops.push_back(Stop {
                        answers,
                        cap: Cap {
                            measure: *measure,
                            window: *window,
                            max: *max,
                        },
                        spent: *spent,
                    });
                }
            }
            _ => {}
        }
    }
    let first = stops.front()?.cap;
    Some(SharedLimitsConfig {
        profile: profile?,
        caps: vec![first],
        prices: None,
        output_estimate: 0,
        backend: Some(std::sync::Arc::new(Replayed {
            state: std::sync::Mutex::new((stops, 0)),
        })),
    })
}

#[pod::async_trait]
impl SharedLimits for Replayed {
    async fn reserve(
        &self,
        profile: &str,
        _caps: &[Cap],
        ask: Amounts,
    ) -> Result<Reserve, PodError> {
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let (stops, granted) = &mut *state;
        if let Some(stop) = stops.front().filter(|stop| stop.answers == *granted) {
            let stop = stop.clone();
            stops.pop_front();
            return Ok(Reserve::Refused {
                cap: stop.cap,
                spent: stop.spent,
                until: chrono::Utc::now(),
            });
        }
        *granted += 1;
        Ok(Reserve::Granted(Reservation {
            profile: profile.to_string(),
            windows: Vec::new(),
            amounts: ask,
        }))
    }

    async fn settle(&self, _reservation: &Reservation, _actual: Amounts) -> Result<(), PodError> {
        Ok(())
    }
}
