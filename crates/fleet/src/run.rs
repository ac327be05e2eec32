//! One claimed session, run until its plan is done, it stops, or the
//! worker stops.

use crate::{capacity, Api};
use pod::{CancellationToken, Durability, PodError, TurnEndReason};
use pod_launch::sessions::{self, Progress};
use pod_launch::{LaunchError, Launcher};
use pod_store_pg::{PgStore, SessionState};
use std::path::PathBuf;
use std::sync::Arc;
use uuid::Uuid;

/// A session this worker claimed.
pub(crate) struct Claim {
    pub id: Uuid,
    pub launcher: Launcher,
    pub store: PgStore,
    pub api: Option<Arc<dyn Api>>,
    pub stop: CancellationToken,
}

/// How a session's run on this worker ended.
#[derive(Debug)]
pub enum Ended {
    /// Its turn ended.
    Ran {
        /// Why.
        reason: TurnEndReason,
        /// The plan's progress.
        progress: Progress,
        /// Model requests of the run.
        requests: u32,
    },
    /// It waits for a person's answer; answering it queues it again.
    Parked {
        /// On what.
        why: String,
    },
    /// The worker stopped with its plan unfinished: it is queued again.
    Requeued {
        /// The plan's progress.
        progress: Progress,
    },
    /// Its model connection (or its start) found no file descriptor in
    /// this process: it is queued again, for this worker or another,
    /// with nothing lost (the request was never sent).
    Released {
        /// The plan's progress (none known when its start failed).
        progress: Progress,
    },
}

impl std::fmt::Display for Ended {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Ended::Ran {
                reason,
                progress,
                requests,
            } => write!(
                f,
                "{reason}, {}/{} todos done, {requests} requests",
                progress.completed, progress.total
            ),
            Ended::Parked { why } => write!(f, "parked, {why}"),
            Ended::Requeued { progress } => write!(
                f,
                "stopped with {}/{} todos done; queued again",
                progress.completed, progress.total
            ),
            Ended::Released { progress } => write!(
                f,
                "no file descriptor left for its model connection, {}/{} todos done; queued \
                 again",
                progress.completed, progress.total
            ),
        }
    }
}

/// Why a session could not run here, or its run failed.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// Its workspace is not on this machine.
    #[error(
        "its workspace {0} is not reachable from this worker (workspaces must be on a filesystem \
         every worker shares, at the same path)"
    )]
    Unreachable(PathBuf),
    /// It was not queued by `pod submit`.
    #[error("its log records no launch settings (it was not submitted with `pod submit`)")]
    NoRecord,
    /// Its settings, its model or its log.
    #[error(transparent)]
    Launch(#[from] LaunchError),
    /// Another worker took it over.
    #[error("another worker took it over (this worker's lease ran out)")]
    LeaseLost,
    /// The turn failed.
    #[error("the turn failed")]
    Turn(#[source] PodError),
    /// Closing it failed.
    #[error("cannot close the session")]
    Close(#[source] PodError),
    /// Giving it back to the queue failed.
    #[error("cannot give the session back to the queue")]
    Requeue(#[source] PodError),
}

impl Claim {
    /// Runs the session; see [`Ended`].
    pub async fn run(self) -> Result<Ended, RunError> {
        let (id, store) = (self.id, &self.store);
        // Boxed: a worker holds this future for each of its sessions for
        // their whole run, and starting one takes large futures; inline,
        // their size would stay reserved in every session's task long after
        // they finished.
        let session = match Box::pin(self.start()).await {
            Ok(session) => session,
            // Queued again by `start`.
            Err(err) if capacity::out_of_files(&err) => {
                pod::stats::fleet_released();
                return Ok(Ended::Released {
                    progress: Progress::default(),
                });
            }
            Err(err) => return Err(err),
        };
        let meter = session.meter();
        let (handle, mcp) = (session.handle, session.mcp);
        if let Some(api) = &self.api {
            api.adopt(id, handle.clone(), meter);
        }
        let turn = handle.continue_turn();
        tokio::pin!(turn);
        let result = tokio::select! {
            result = &mut turn => result,
            _ = self.stop.cancelled() => {
                let _ = handle.cancel().await;
                turn.await
            }
        };
        let todos = handle.get_todos().await.unwrap_or_default();
        if let Some(api) = &self.api {
            api.release(id);
        }
        // Boxed like the start: only the turn's wait stays in the task.
        let shutdown = Box::pin(handle.shutdown()).await;
        Box::pin(mcp.shutdown()).await;
        let progress = sessions::progress(&todos);
        if let Ok(outcome) = &result {
            if let TurnEndReason::Parked(why) = &outcome.reason {
                // Left as it is (not queued): the answer queues it.
                shutdown.map_err(RunError::Close)?;
                return Ok(Ended::Parked { why: why.clone() });
            }
        }
        // Not the session's failure but this process's: another worker (or
        // this one, with fewer sessions) runs it from where it stopped.
        let no_files = matches!(&result, Err(err) if capacity::out_of_files(err));
        if no_files && shutdown.is_ok() {
            Box::pin(store.set_state(id, SessionState::Queued))
                .await
                .map_err(RunError::Requeue)?;
            pod::stats::fleet_released();
            return Ok(Ended::Released { progress });
        }
        let unfinished = progress.unfinished();
        if self.stop.is_cancelled() && unfinished && shutdown.is_ok() {
            Box::pin(store.set_state(id, SessionState::Queued))
                .await
                .map_err(RunError::Requeue)?;
            return Ok(Ended::Requeued { progress });
        }
        match (result, shutdown) {
            (Err(PodError::LeaseLost { .. }), _) | (_, Err(PodError::LeaseLost { .. })) => {
                Err(RunError::LeaseLost)
            }
            (Err(err), _) => Err(RunError::Turn(err)),
            (Ok(_), Err(err)) => Err(RunError::Close(err)),
            (Ok(outcome), Ok(())) => Ok(Ended::Ran {
                reason: outcome.reason,
                progress,
                requests: outcome.requests,
            }),
        }
    }

    /// Opens the session under the claimed lease and starts its Pod, or
    /// sets it aside when it cannot run here.
    async fn start(&self) -> Result<pod_launch::Session, RunError> {
        let (id, store) = (self.id, &self.store);
        // A question parks the session (waiting holds no slot and no
        // lease); it is answered from anywhere (`pod approve`, any server's
        // API) and the session queued again. With this process's API, its
        // subagents' questions wait there.
        let approver: Arc<dyn pod::Approver> = match &self.api {
            Some(api) => api.approver(id),
            None => Arc::new(pod::questions::Parking),
        };
        let options = pod_launch::Options {
            durability: Durability::Turn,
            approver: Some(approver),
            // Any worker of the fleet claims a session parked on a
            // follow-up when its time comes.
            wakes_followups: true,
            ..Default::default()
        };
        let prepared = match self.plan().await {
            Ok(plan) => plan.prepare(options).await.map_err(RunError::from),
            Err(err) => Err(err),
        };
        let prepared = match prepared {
            Ok(prepared) => prepared,
            Err(err) if capacity::out_of_files(&err) => {
                // This process's want, not the session's: queued again.
                let _ = store.unclaim(id, SessionState::Queued).await;
                return Err(err);
            }
            Err(err) => {
                // It cannot run here; idle, so that no worker claims it
                // again and again. `pod show` and `pod resume` still reach it.
                let _ = store.unclaim(id, SessionState::Idle).await;
                return Err(err);
            }
        };
        for warning in &prepared.warnings {
            tracing::warn!(session = %id, %warning, "MCP server");
        }
        match prepared.start().await {
            Ok(session) => Ok(session),
            Err(err) => {
                // A session that cannot be opened (a damaged log, say) must
                // not be claimed over and over; a database error may pass,
                // so the session goes back to the queue (or, with the
                // database unreachable, its lease is no longer renewed and
                // it is claimed again once it runs out).
                if matches!(err.pod_error(), Some(PodError::Store { .. }))
                    || capacity::out_of_files(&err)
                {
                    let _ = store.unclaim(id, SessionState::Queued).await;
                } else {
                    // Still claimed if it failed before opening the log.
                    let _ = store.unclaim(id, SessionState::Idle).await;
                    let _ = store.set_state(id, SessionState::Idle).await;
                }
                Err(err.into())
            }
        }
    }

    /// Its recorded settings, as `pod resume` would use them with no flags,
    /// in until-done mode.
    async fn plan(&self) -> Result<pod_launch::Plan, RunError> {
        let store = self.launcher.place().store.clone();
        let loaded = sessions::load(store.as_ref(), self.id).await?;
        let workspace = loaded.header.workspace.clone();
        if !workspace.is_dir() {
            return Err(RunError::Unreachable(workspace));
        }
        if loaded.launch.is_none() {
            return Err(RunError::NoRecord);
        }
        let flags = pod_launch::Flags {
            until_done: true,
            ..Default::default()
        };
        Ok(self
            .launcher
            .plan_resume_of(&loaded, &flags, Some(workspace))?)
    }
}
