//! Parked sessions that can go on (the file store): nobody holds them, so
//! the server looks for them and continues each. Those whose question was
//! answered elsewhere (`pod approve`) run the call as answered; those whose
//! question timed out have their approval gate record the "no" (`via:
//! timeout`) and go on without the call. On PostgreSQL a fleet worker
//! claims them instead (the resume here refuses a session queued for the
//! fleet).

use crate::api::AppState;
use chrono::Utc;
use pod_launch::sessions::Status;
use std::collections::HashSet;
use std::time::Duration;
use uuid::Uuid;

/// How often the server looks.
const EVERY: Duration = Duration::from_secs(2);

/// Continues parked sessions that were answered or whose question timed
/// out, until the server stops. Each session is tried once per state (its
/// log's length) per process: a session this server may not run (wider
/// than it allows) is not retried every few seconds.
pub async fn sweep(app: AppState) {
    let mut tried: HashSet<(Uuid, usize)> = HashSet::new();
    loop {
        tokio::select! {
            _ = app.stop.cancelled() => return,
            _ = tokio::time::sleep(EVERY) => {}
        }
        let entries = match app.summaries.all(app.store.as_ref()).await {
            Ok(entries) => entries,
            Err(err) => {
                tracing::warn!(err = %pod_llm::error_chain(&err), "cannot list sessions for question timeouts");
                continue;
            }
        };
        let now = Utc::now();
        for entry in entries {
            let summary = &entry.summary;
            let id = summary.id;
            let why = match (&summary.question, summary.status) {
                (_, Status::Answered) => "answered",
                (Some(q), _) if q.expires_at.is_some_and(|at| at <= now) => "question timed out",
                _ => continue,
            };
            if summary.holder.is_some()
                || app.runner.is_live(id)
                || !tried.insert((id, entry.records))
            {
                continue;
            }
            match app.runner.continue_parked(id).await {
                Ok(()) => tracing::info!(session = %id, why, "continuing a parked session"),
                Err(err) => {
                    tracing::info!(session = %id, why, error = %err.message(), "a parked session is not continued here")
                }
            }
        }
    }
}
