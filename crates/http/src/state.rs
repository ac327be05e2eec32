//! What the server's handlers and readers share: the runner, the store,
//! the summaries, who serves and the stop; and the rows and questions they
//! build from them. A leaf under the handlers (`api`), the session tails
//! (`tail`) and the list's reader (`listing`).

use super::runner::{PendingApproval, Runner};
use super::summaries::Summaries;
use pod::Store;
use pod_launch::sessions::Summary;
use serde::Serialize;
use uuid::Uuid;

/// What every handler and reader reads.
#[derive(Clone)]
pub struct Shared {
    pub runner: Runner,
    pub store: Store,
    pub summaries: Summaries,
    /// Who serves (for the fleet view): the store and this process.
    pub server: String,
    /// Fires when the server stops: event streams end.
    pub stop: pod::CancellationToken,
}

/// One row of `GET /api/sessions`.
#[derive(Serialize)]
pub struct Row {
    #[serde(flatten)]
    pub summary: Summary,
    /// Running in this server now.
    pub live: bool,
}

/// The questions the logs of `entries` hold.
pub fn logged_questions(entries: &[super::summaries::Entry]) -> Vec<PendingApproval> {
    entries
        .iter()
        .filter_map(|entry| question_of(&entry.summary))
        .collect()
}

pub(crate) fn question_of(summary: &Summary) -> Option<PendingApproval> {
    let question = summary.question.as_ref()?;
    Some(PendingApproval {
        // A process holds it: it asks the question itself.
        parked: summary.holder.is_none(),
        ..PendingApproval::parked(summary.id, question)
    })
}

/// The questions the logs hold (`logged`) and those waiting in this
/// process (`live`; of session `only`, when given), oldest first.
pub fn with_live(
    mut waiting: Vec<PendingApproval>,
    live: Vec<PendingApproval>,
    only: Option<Uuid>,
) -> Vec<PendingApproval> {
    // A subagent's question asked here is in its own log too: listed once,
    // as asked here (where it is answered).
    waiting.retain(|logged| {
        !live.iter().any(|asked| {
            asked.request.call_id == logged.request.call_id
                && asked
                    .request
                    .subagent
                    .as_ref()
                    .is_some_and(|s| s.session_id == logged.session_id)
        })
    });
    waiting.extend(
        live.into_iter()
            .filter(|a| only.is_none_or(|id| a.session_id == id)),
    );
    waiting.sort_by_key(|a| a.asked_at);
    waiting
}
