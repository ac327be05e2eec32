//! Raising a stopped session's limits from the API (`PATCH
//! /api/sessions/{id}`, whose handler is in `limits.rs`): checked against the
//! server's ceiling, recorded, and the session continued.

use super::{Runner, PARKING_WAIT};
use crate::error::ApiError;
use pod::PodError;
use pod_llm::error_chain as chain;
use uuid::Uuid;

impl Runner {
    /// Records `over` over session `id`'s limits (within this server's
    /// ceiling); a session a limit had stopped goes on: on a fleet its
    /// workers take it, else it is continued here. See
    /// `PATCH /api/sessions/{id}`.
    pub async fn raise_limits(
        &self,
        id: Uuid,
        over: pod::SessionBudget,
    ) -> Result<(pod::limits::Raised, bool), ApiError> {
        self.change_limits(id, pod::limits::Change::Over(over))
            .await
    }

    /// [`Runner::raise_limits`] with any change. Lifting a money limit is
    /// checked as leaving none (the ceiling may require one), whatever the
    /// session's settings give.
    pub async fn change_limits(
        &self,
        id: Uuid,
        change: pod::limits::Change,
    ) -> Result<(pod::limits::Raised, bool), ApiError> {
        let _start = self.starting.lock().await;
        if self.is_live(id) {
            return Err(ApiError::conflict(format!(
                "session {id} is running here: change its limits when it stops"
            )));
        }
        let store = self.launcher.place().store.as_ref();
        let loaded = pod_launch::sessions::load(store, id)
            .await
            .map_err(|e| ApiError::internal(chain(&e)))?;
        let before = pod::SessionBudget::recorded(&loaded.records).unwrap_or_default();
        let after = change.apply(before, pod::SessionBudget::default());
        crate::ceiling::check_session_budget(&self.allowed.ceiling, &after)
            .map_err(ApiError::forbidden)?;
        let raised = self
            .launcher
            .change_limits(id, change, "http", PARKING_WAIT)
            .await
            .map_err(|err| match err.pod_error() {
                Some(PodError::SessionBusy { .. } | PodError::SessionLeased { .. }) => {
                    ApiError::conflict(format!("session {id} is running elsewhere"))
                }
                Some(PodError::NoSuchSession { .. }) => {
                    ApiError::not_found(format!("no session {id}"))
                }
                _ => ApiError::bad_request(chain(&err)),
            })?;
        let continued = raised.stopped_by.is_some() && !raised.queued;
        if continued {
            let (handle, mcp, meter) = self.resume(id).await?;
            self.go_live(id, handle, Some(mcp), None, meter);
        }
        Ok((raised, continued))
    }
}
