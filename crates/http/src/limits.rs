//! `PATCH /api/sessions/{id}`: raise (or set) a session's limits, within
//! the server's ceiling. The limits are recorded in the session's log
//! (`pod budget` does the same from a terminal); a session a limit had
//! stopped goes on: on a fleet its workers take it from the queue, else
//! this server continues it.

use super::api::AppState;
use super::error::{parse, ApiError};
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::Json;
use serde::Deserialize;
use serde_json::json;

/// What `PATCH /api/sessions/{id}` takes: any of the session's limits.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PatchLimits {
    /// Money over the session's life, at its profile's prices.
    #[serde(default)]
    pub max_cost: Option<pod_llm::Cost>,
    /// Seconds from the session's creation.
    #[serde(default)]
    pub max_wall_secs: Option<u64>,
    /// Model requests over the session's life.
    #[serde(default)]
    pub max_session_requests: Option<u64>,
    /// Tokens over the session's life.
    #[serde(default)]
    pub max_session_tokens: Option<u64>,
}

impl PatchLimits {
    /// The limits it sets; none, or a zero, is refused.
    fn limits(&self) -> Result<pod::SessionBudget, ApiError> {
        let zero = [
            ("max_wall_secs", self.max_wall_secs == Some(0)),
            ("max_session_requests", self.max_session_requests == Some(0)),
            ("max_session_tokens", self.max_session_tokens == Some(0)),
            ("max_cost", self.max_cost == Some(pod_llm::Cost::default())),
        ];
        if let Some((name, _)) = zero.iter().find(|(_, zero)| *zero) {
            return Err(ApiError::bad_request(format!("{name} must be more than 0")));
        }
        let limits = pod::SessionBudget {
            requests: self.max_session_requests,
            tokens: self.max_session_tokens,
            cost: self.max_cost,
            wall_secs: self.max_wall_secs,
        };
        match limits.is_set() {
            true => Ok(limits),
            false => Err(ApiError::bad_request(
                "give a limit: max_cost, max_wall_secs, max_session_requests or \
                 max_session_tokens",
            )),
        }
    }
}

/// `PATCH /api/sessions/{id}`: the session's limits from now on, what they
/// were, what had stopped it, and whether it goes on (`queued` for a
/// fleet, `continued` here).
pub async fn patch(
    State(app): State<AppState>,
    Path(id): Path<String>,
    body: Bytes,
) -> Result<Json<serde_json::Value>, ApiError> {
    let request: PatchLimits = parse(&body)?;
    let over = request.limits()?;
    let id = super::api::resolve(&app, &id).await?;
    let (raised, continued) = app.runner.raise_limits(id, over).await?;
    Ok(Json(json!({
        "session_id": id,
        "limits": raised.limits,
        "before": raised.before,
        "stopped_by": raised.stopped_by,
        "queued": raised.queued,
        "continued": continued,
    })))
}
