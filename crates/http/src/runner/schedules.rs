//! Schedules through the API (`POST /api/schedules`, `PATCH` and `DELETE
//! /api/schedules/{name}`): what each fire starts is checked as `POST
//! /api/sessions` checks a session (the ceiling included) before the fleet
//! stores it. Timing and names are the fleet's to judge (through
//! [`Queue`](super::Queue)): this crate parses no cron expression.

use super::{CreateSession, Runner};
use crate::error::ApiError;
use pod::log::{LogRecord, SessionHeader};
use serde::Deserialize;
use uuid::Uuid;

/// What `POST /api/schedules` takes.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CreateSchedule {
    /// Its name (letters, digits, `-`, `_`, `.`).
    pub name: String,
    /// A cron expression (`0 3 * * *`), or …
    #[serde(default)]
    pub cron: Option<String>,
    /// … the zone of `cron` (UTC by default), or …
    #[serde(default)]
    pub tz: Option<String>,
    /// … a period (`15m`, `1h`).
    #[serde(default)]
    pub every: Option<String>,
    /// `skip` (default) or `allow`.
    #[serde(default)]
    pub overlap: Option<String>,
    /// The session each fire starts, as `POST /api/sessions` takes it; or
    /// …
    #[serde(default)]
    pub start: Option<CreateSession>,
    /// … a heartbeat: the session (an id) each fire continues, …
    #[serde(default)]
    pub session: Option<String>,
    /// … with this message.
    #[serde(default)]
    pub message: Option<String>,
}

/// A schedule the API asks the fleet to add, its sessions checked.
#[derive(Debug, Clone)]
pub struct NewSchedule {
    /// Its name, as given.
    pub name: String,
    /// `cron`, as given.
    pub cron: Option<String>,
    /// `tz`, as given.
    pub tz: Option<String>,
    /// `every`, as given.
    pub every: Option<String>,
    /// `overlap`, as given.
    pub overlap: Option<String>,
    /// Each session's task.
    pub task: String,
    /// The header each session starts from (within the server's ceiling).
    pub template: SessionHeader,
    /// The limits each session records before its task.
    pub limits: Option<pod::SessionBudget>,
    /// A heartbeat's session: each fire continues it with `task`.
    pub session: Option<Uuid>,
}

/// Why the fleet refused a schedule change.
#[derive(Debug, thiserror::Error)]
pub enum ScheduleRefused {
    /// The request is wrong (a name, a timing): 400.
    #[error("{0}")]
    Bad(String),
    /// There is no schedule of that name: 404.
    #[error("{0}")]
    Missing(String),
    /// A schedule of that name exists: 409.
    #[error("{0}")]
    Exists(String),
    /// The store failed: 500.
    #[error(transparent)]
    Store(#[from] pod::PodError),
}

impl From<ScheduleRefused> for ApiError {
    fn from(refused: ScheduleRefused) -> Self {
        match refused {
            ScheduleRefused::Bad(why) => ApiError::bad_request(why),
            ScheduleRefused::Missing(why) => ApiError::not_found(why),
            ScheduleRefused::Exists(why) => ApiError::conflict(why),
            ScheduleRefused::Store(err) => ApiError::internal(pod_llm::error_chain(&err)),
        }
    }
}

impl Runner {
    fn fleet(&self) -> Result<&std::sync::Arc<dyn super::Queue>, ApiError> {
        self.queue.as_ref().ok_or_else(|| {
            ApiError::conflict(
                "schedules live in a fleet's PostgreSQL store: start the server with \
                 --store postgres://…",
            )
        })
    }

    /// Adds the schedule `request` describes, its sessions held to the
    /// server's ceiling as an API session is; what `GET /api/schedules`
    /// shows of it.
    pub async fn add_schedule(
        &self,
        request: CreateSchedule,
    ) -> Result<serde_json::Value, ApiError> {
        // On a fleet its queue keeps schedules; without one, the file store.
        let files = match &self.queue {
            Some(_) => None,
            None => self.schedule_list.clone(),
        };
        if files.is_none() {
            self.fleet()?;
        }
        let (task, template, limits, session) = match (request.start, request.session) {
            (Some(start), None) if request.message.is_none() => {
                let task = start.task.clone();
                // A session of it, queued by nobody: its settings checked
                // and resolved as a fleet session's.
                let (template, records) = self.queued(start, Uuid::nil())?;
                let limits = records.iter().find_map(|record| match record {
                    LogRecord::Limits(limits) => Some(limits.limits),
                    _ => None,
                });
                (task, template, limits, None)
            }
            (None, Some(id)) => {
                let message = request.message.filter(|m| !m.trim().is_empty());
                let Some(message) = message else {
                    return Err(ApiError::bad_request(
                        "a heartbeat needs the `message` each fire appends",
                    ));
                };
                let (template, id) = self.heartbeat(&id).await?;
                (message, template, None, Some(id))
            }
            _ => {
                return Err(ApiError::bad_request(
                    "give `start` (the session each fire starts) or `session` and `message` \
                     (a heartbeat), not both",
                ))
            }
        };
        let new = NewSchedule {
            name: request.name,
            cron: request.cron,
            tz: request.tz,
            every: request.every,
            overlap: request.overlap,
            task,
            template,
            limits,
            session,
        };
        match files {
            Some(files) => Ok(files.add(new)?),
            None => Ok(self.fleet()?.add_schedule(new).await?),
        }
    }

    /// The header of the session a heartbeat continues, checked: it
    /// exists, is no subagent, records how it was launched, and its
    /// recorded settings are within the server's ceiling (each fire runs it
    /// with them).
    async fn heartbeat(&self, id: &str) -> Result<(pod::log::SessionHeader, Uuid), ApiError> {
        let store = self.launcher.place().store.clone();
        let id = pod_launch::sessions::resolve(store.as_ref(), id)
            .await
            .map_err(|e| ApiError::not_found(pod_llm::error_chain(&e)))?;
        let loaded = pod_launch::sessions::load(store.as_ref(), id)
            .await
            .map_err(|e| ApiError::internal(pod_llm::error_chain(&e)))?;
        if loaded.header.parent.is_some() {
            return Err(ApiError::bad_request(format!(
                "session {id} is a subagent's: its parent continues it"
            )));
        }
        if loaded.launch.is_none() {
            return Err(ApiError::bad_request(format!(
                "session {id} records no launch settings, so a worker cannot continue it"
            )));
        }
        let plan = self
            .launcher
            .plan_resume_of(&loaded, &pod_launch::Flags::default(), None)
            .map_err(|e| ApiError::bad_request(pod_llm::error_chain(&e)))?;
        self.check_recorded(id, &plan)?;
        Ok((loaded.header, id))
    }

    /// Pauses or resumes schedule `name`; what `GET /api/schedules` shows
    /// of it now.
    pub async fn pause_schedule(
        &self,
        name: &str,
        paused: bool,
    ) -> Result<serde_json::Value, ApiError> {
        if let (None, Some(files)) = (&self.queue, &self.schedule_list) {
            return files
                .pause(name, paused)
                .map_err(ApiError::internal)?
                .ok_or_else(|| ApiError::not_found(format!("no schedule named {name}")));
        }
        Ok(self.fleet()?.pause_schedule(name, paused).await?)
    }

    /// Removes schedule `name` (not the sessions it started).
    pub async fn remove_schedule(&self, name: &str) -> Result<(), ApiError> {
        if let (None, Some(files)) = (&self.queue, &self.schedule_list) {
            return match files.remove(name).map_err(ApiError::internal)? {
                true => Ok(()),
                false => Err(ApiError::not_found(format!("no schedule named {name}"))),
            };
        }
        Ok(self.fleet()?.remove_schedule(name).await?)
    }
}
