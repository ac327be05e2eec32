//! The profiles' shared limits (`[limits]`, [`pod::shared_limits`]) for
//! every worker of a fleet: one row per profile, measure and UTC window in
//! `pod_limit_windows`. A reservation is one conditional upsert per limit,
//! in one transaction (all or none): the database's row lock makes
//! workers reserving at once take turns, and a reservation that would
//! pass a limit changes nothing. The windows start at the database's
//! clock, so workers whose clocks differ agree on them.

use crate::store::PgStore;
use chrono::{DateTime, Utc};
use pod::shared_limits::{Amounts, Cap, Reservation, Reserve, SharedLimits};
use pod::PodError;

/// Reserves `$5` in the current window of limit `$4` (profile `$1`,
/// measure `$2`, window `$3`) if it has room: inserts the window's row
/// or adds to it; returns the window's start, or nothing when the
/// limit has no room (an estimate above the limit itself never has).
const RESERVE: &str = "
    INSERT INTO pod_limit_windows AS l (profile, measure, window_kind, window_start, reserved)
    SELECT $1::text, $2::text, $3::text,
           date_trunc($3::text, now() AT TIME ZONE 'UTC') AT TIME ZONE 'UTC', $5::bigint
    WHERE $5::bigint <= $4::bigint
    ON CONFLICT (profile, measure, window_kind, window_start)
    DO UPDATE SET reserved = l.reserved + $5::bigint
        WHERE l.spent + l.reserved + $5::bigint <= $4::bigint
    RETURNING l.window_start";

/// What the current window of a limit holds (spent and reserved) and when
/// it ends, for a refusal.
const HELD: &str = "
    WITH w AS (SELECT date_trunc($3::text, now() AT TIME ZONE 'UTC') AT TIME ZONE 'UTC' AS start)
    SELECT coalesce((SELECT l.spent + l.reserved FROM pod_limit_windows l
                     WHERE l.profile = $1::text AND l.measure = $2::text
                       AND l.window_kind = $3::text AND l.window_start = w.start), 0),
           w.start + ('1 ' || $3::text)::interval
    FROM w";

/// Replaces a reservation of `$5` by `$6` spent in one window.
const SETTLE: &str = "
    UPDATE pod_limit_windows
    SET reserved = greatest(reserved - $5::bigint, 0), spent = spent + $6::bigint
    WHERE profile = $1::text AND measure = $2::text AND window_kind = $3::text
      AND window_start = $4::timestamptz";

/// An amount as the database's `bigint`.
fn big(amount: u64) -> i64 {
    i64::try_from(amount).unwrap_or(i64::MAX)
}

/// The caps in one order every worker uses, so that two transactions
/// reserving in the same windows lock their rows in the same order and
/// never deadlock.
fn ordered(caps: &[Cap]) -> Vec<Cap> {
    let mut caps = caps.to_vec();
    caps.sort_by_key(|cap| (cap.measure, cap.window));
    caps
}

#[async_trait::async_trait]
impl SharedLimits for PgStore {
    async fn reserve(
        &self,
        profile: &str,
        caps: &[Cap],
        ask: Amounts,
    ) -> Result<Reserve, PodError> {
        let mut conn = self.conn().await?;
        let tx = conn
            .client
            .transaction()
            .await
            .map_err(self.err("reserving in the shared limits"))?;
        let mut windows = Vec::with_capacity(caps.len());
        for cap in ordered(caps) {
            let (measure, window) = (cap.measure.as_str(), cap.window.as_str());
            let amount = big(ask.of(cap.measure));
            let row = tx
                .query_opt(
                    RESERVE,
                    &[&profile, &measure, &window, &big(cap.max), &amount],
                )
                .await
                .map_err(self.err("reserving in the shared limits"))?;
            match row {
                Some(row) => windows.push((cap, row.get::<_, DateTime<Utc>>(0))),
                None => {
                    let held = tx
                        .query_one(HELD, &[&profile, &measure, &window])
                        .await
                        .map_err(self.err("reading a shared limit"))?;
                    // Nothing of this reservation stays: the transaction
                    // is dropped, so rolled back.
                    return Ok(Reserve::Refused {
                        cap,
                        spent: u64::try_from(held.get::<_, i64>(0)).unwrap_or(0),
                        until: held.get(1),
                    });
                }
            }
        }
        tx.commit()
            .await
            .map_err(self.err("reserving in the shared limits"))?;
        Ok(Reserve::Granted(Reservation {
            profile: profile.to_string(),
            windows,
            amounts: ask,
        }))
    }

    async fn settle(&self, reservation: &Reservation, actual: Amounts) -> Result<(), PodError> {
        let conn = self.conn().await?;
        // One statement a window, each its own transaction: a settlement
        // holds no row while it waits for another (a reservation holds
        // them in order, see `ordered`).
        for (cap, start) in &reservation.windows {
            conn.client
                .execute(
                    SETTLE,
                    &[
                        &reservation.profile,
                        &cap.measure.as_str(),
                        &cap.window.as_str(),
                        start,
                        &big(reservation.amounts.of(cap.measure)),
                        &big(actual.of(cap.measure)),
                    ],
                )
                .await
                .map_err(self.err("settling in the shared limits"))?;
        }
        Ok(())
    }
}

impl PgStore {
    /// Wakes every fleet session parked on a shared limit, so that a
    /// worker tries it again now rather than at its window's end: a worker
    /// starting (perhaps with a limit raised in its config file) calls it.
    /// Those still over a limit park again. Returns how many it woke.
    /// It also deletes windows that ended over a day ago (kept that long
    /// for whoever looks at yesterday's spend).
    pub async fn wake_limited(&self) -> Result<u64, PodError> {
        let conn = self.conn().await?;
        conn.client
            .execute(
                "DELETE FROM pod_limit_windows WHERE window_start < now() - interval '2 days'",
                &[],
            )
            .await
            .map_err(self.err("deleting old windows of the shared limits"))?;
        conn.client
            .execute(
                "UPDATE pod_sessions SET wake_at = now()
                 WHERE state = 'parked' AND limited AND wake_at > now()",
                &[],
            )
            .await
            .map_err(self.err("waking sessions parked on a shared limit"))
    }

    /// What the current windows of `profile` hold, spent (settled) and
    /// reserved, by measure and window: `(measure, window, spent,
    /// reserved)`.
    pub async fn limit_windows(
        &self,
        profile: &str,
    ) -> Result<Vec<(String, String, i64, i64)>, PodError> {
        let conn = self.conn().await?;
        let rows = conn
            .client
            .query(
                "SELECT measure, window_kind, spent, reserved FROM pod_limit_windows
                 WHERE profile = $1::text
                   AND window_start = date_trunc(window_kind, now() AT TIME ZONE 'UTC')
                                      AT TIME ZONE 'UTC'
                 ORDER BY measure, window_kind",
                &[&profile],
            )
            .await
            .map_err(self.err("reading the shared limits"))?;
        Ok(rows
            .iter()
            .map(|row| (row.get(0), row.get(1), row.get(2), row.get(3)))
            .collect())
    }
}
