//! Raising (or setting) a session's limits while no Pod runs it: `pod
//! budget ID --max-cost 5`, `PATCH /api/sessions/{id}`. The new limits
//! are appended to the session's log as a [`LogRecord::Limits`], which
//! every later start of the session holds; a session a budget stopped is
//! then handed to the store's workers (a fleet continues it by itself), or
//! left for whoever resumes it.

use crate::error::PodError;
use crate::interceptors::SessionBudget;
use crate::log::LogRecord;
use crate::store::{Store, Waits};
use pod_worker::Limit;
use uuid::Uuid;

/// How [`raise`] went.
#[derive(Debug, Clone, PartialEq)]
pub struct Raised {
    /// The session's limits before.
    pub before: SessionBudget,
    /// Its limits from now on (recorded).
    pub limits: SessionBudget,
    /// The limit that had stopped its last run, if one had.
    pub stopped_by: Option<Limit>,
    /// The store handed it to its workers, which continue it
    /// (PostgreSQL); else whoever resumes it next goes on.
    pub queued: bool,
}

/// What a change does to a session's limits.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Change {
    /// Each limit it sets replaces the session's; the others stay.
    Over(SessionBudget),
    /// The session's own money limit is removed: it falls back to what its
    /// settings give (`unrecorded`'s), none if they give none.
    LiftCost,
}

impl Change {
    /// The limits `before` become, `unrecorded` being the settings'.
    pub fn apply(self, before: SessionBudget, unrecorded: SessionBudget) -> SessionBudget {
        match self {
            Change::Over(over) => before.overlaid(over),
            Change::LiftCost => SessionBudget {
                cost: unrecorded.cost,
                ..before
            },
        }
    }
}

/// Between tries to open a session that is still being closed.
const BUSY_POLL: std::time::Duration = std::time::Duration::from_millis(50);

/// Records `over` over session `session`'s limits (what its log recorded
/// last, or `unrecorded` for a session from before limits were recorded),
/// `via` naming who raised them. The session is opened for the append, so
/// only while no Pod runs it (waiting up to `wait` for one that is
/// closing): a running session is [`PodError::SessionBusy`] or
/// [`PodError::SessionLeased`].
pub async fn raise(
    store: &Store,
    session: Uuid,
    unrecorded: SessionBudget,
    over: SessionBudget,
    via: &str,
    wait: std::time::Duration,
) -> Result<Raised, PodError> {
    change(store, session, unrecorded, Change::Over(over), via, wait).await
}

/// [`raise`] with any [`Change`]: what it makes of the limits is recorded
/// (nothing when they stay the same), and a session a limit had stopped
/// is handed on as there.
pub async fn change(
    store: &Store,
    session: Uuid,
    unrecorded: SessionBudget,
    change: Change,
    via: &str,
    wait: std::time::Duration,
) -> Result<Raised, PodError> {
    let mut waited = std::time::Duration::ZERO;
    let opened = loop {
        match store.open(session, crate::config::Durability::Always).await {
            Err(PodError::SessionBusy { .. } | PodError::SessionLeased { .. }) if waited < wait => {
                tokio::time::sleep(BUSY_POLL).await;
                waited += BUSY_POLL;
            }
            opened => break opened?,
        }
    };
    let records = &opened.contents.records;
    let before = SessionBudget::recorded(records).unwrap_or(unrecorded);
    let limits = change.apply(before, unrecorded);
    let stopped_by = stopped_by(records);
    let appended = match limits == before {
        true => Ok(()),
        false => crate::session::record_limits(&opened.writer, limits, via).await,
    };
    // A budget's stop is over once the limit was raised past it; the
    // workers of a store that has them go on with the session.
    let closed = match (&appended, &stopped_by) {
        (Ok(()), Some(_)) => opened.writer.hand_over(Waits::Worker).await,
        _ => opened.writer.shutdown().await.map(|()| false),
    };
    appended?;
    Ok(Raised {
        before,
        limits,
        stopped_by,
        queued: closed?,
    })
}

/// The limit that stopped the session's last run, if its last run ended
/// so (nothing but bookkeeping after the stop).
pub fn stopped_by(records: &[LogRecord]) -> Option<Limit> {
    records
        .iter()
        .rev()
        .find(|record| {
            !matches!(
                record,
                LogRecord::Limits(_) | LogRecord::Trace(_) | LogRecord::Checkpoint(_)
            )
        })
        .and_then(|record| match record {
            LogRecord::Stopped(stopped) => Some(stopped.limit.clone()),
            _ => None,
        })
}
