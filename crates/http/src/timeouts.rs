//! Questions that time out while their session is parked here (the file
//! store): nobody holds such a session, so the server looks for them and
//! continues each; its approval gate then records the "no" (`via:
//! timeout`) and the turn goes on without the call. On PostgreSQL a fleet
//! worker claims a parked session at its question's timeout instead (the
//! resume here refuses a session queued for the fleet).

use crate::api::AppState;
use chrono::Utc;
use std::collections::HashSet;
use std::time::Duration;
use uuid::Uuid;

/// How often the server looks.
const EVERY: Duration = Duration::from_secs(2);

/// Continues parked sessions whose question timed out, until the server
/// stops. Each question is tried once per process: a session this server
/// may not run (wider than it allows) is not retried every few seconds.
pub async fn sweep(app: AppState) {
    let mut tried: HashSet<Uuid> = HashSet::new();
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
            let id = entry.summary.id;
            let Some(question) = entry.summary.question else {
                continue;
            };
            let due = question.expires_at.is_some_and(|at| at <= now);
            if !due || app.runner.is_live(id) || !tried.insert(question.id) {
                continue;
            }
            match app.runner.continue_parked(id).await {
                Ok(()) => {
                    tracing::info!(session = %id, question = %question.id, "question timed out; continuing the session")
                }
                Err(err) => {
                    tracing::info!(session = %id, question = %question.id, error = %err.message(), "question timed out; not continued here")
                }
            }
        }
    }
}
