//! Firing a home's file-store schedules: once a second, each due schedule
//! has its fire time recorded as taken ([`Schedules::take`]) and then its
//! session written and started through the launcher, as a fleet worker
//! resumes a queued session (its recorded settings, until-done mode).
//! Only the holder of the [`FireLock`](super::FireLock) runs this.

use super::{Overlap, Schedule, Schedules, Take};
use crate::{Flags, Launcher, Meter, Options};
use chrono::{DateTime, Utc};
use pod::log::{LogRecord, Origin, SessionHeader};
use pod::{CancellationToken, Durability, Item, PodHandle};
use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use uuid::Uuid;

/// How often the loop looks for due schedules: a fire is up to this late,
/// as on a fleet.
const TICK: Duration = Duration::from_secs(1);

/// Where the sessions a schedule starts are shown live (the HTTP API of
/// the same process), and who answers their questions.
pub trait Adopt: Send + Sync {
    /// Who answers session `id`'s questions.
    fn approver(&self, id: Uuid) -> Arc<dyn pod::Approver>;
    /// Session `id` runs here now.
    fn adopt(&self, id: Uuid, handle: PodHandle, meter: Meter);
    /// Session `id` ended here.
    fn release(&self, id: Uuid);
}

/// What the loop did with a due schedule.
#[derive(Debug)]
pub enum Fired {
    /// It started `session` for `fire_at`, passing over `missed` earlier
    /// fire times.
    Started {
        /// The schedule.
        name: String,
        /// The fire time.
        fire_at: DateTime<Utc>,
        /// Fire times passed over (downtime).
        missed: u64,
        /// The session.
        session: Uuid,
    },
    /// It continued heartbeat session `session` for `fire_at`.
    Continued {
        /// The schedule.
        name: String,
        /// The fire time.
        fire_at: DateTime<Utc>,
        /// The session.
        session: Uuid,
    },
    /// It skipped `fire_at`: the last session still runs.
    Skipped {
        /// The schedule.
        name: String,
        /// The fire time.
        fire_at: DateTime<Utc>,
    },
    /// Firing it failed.
    Failed {
        /// The schedule.
        name: String,
        /// Why, causes included.
        error: String,
    },
}

impl std::fmt::Display for Fired {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let at = |t: &DateTime<Utc>| t.format("%Y-%m-%d %H:%M:%S UTC").to_string();
        match self {
            Fired::Started {
                name,
                fire_at,
                missed,
                session,
            } => {
                write!(
                    f,
                    "schedule {name} fired for {}: started {session}",
                    at(fire_at)
                )?;
                if *missed > 0 {
                    write!(
                        f,
                        " ({missed} earlier fire times missed while no server ran)"
                    )?;
                }
                Ok(())
            }
            Fired::Continued {
                name,
                fire_at,
                session,
            } => write!(
                f,
                "schedule {name} fired for {}: continued {session}",
                at(fire_at)
            ),
            Fired::Skipped { name, fire_at } => write!(
                f,
                "schedule {name} skipped {}: its last session is still going",
                at(fire_at)
            ),
            Fired::Failed { name, error } => write!(f, "schedule {name} cannot fire: {error}"),
        }
    }
}

/// Fires a home's file-store schedules.
#[derive(Clone)]
pub struct Firer {
    launcher: Launcher,
    schedules: Schedules,
    adopt: Option<Arc<dyn Adopt>>,
    // The sessions this process started and still runs, for the overlap
    // check: a std mutex, held for an insert, a remove or a lookup.
    running: Arc<Mutex<HashSet<Uuid>>>,
}

impl Firer {
    /// Fires the schedules under `launcher`'s home, its sessions adopted
    /// by `adopt` when given.
    pub fn new(launcher: Launcher, adopt: Option<Arc<dyn Adopt>>) -> Self {
        let schedules = Schedules::new(&launcher.place().home);
        Self {
            launcher,
            schedules,
            adopt,
            running: Arc::default(),
        }
    }

    /// Fires due schedules once a second until `stop`, reporting each
    /// fire; then stops the sessions it started and waits for them.
    pub async fn run(&self, stop: CancellationToken, report: impl Fn(&Fired)) {
        let sessions = Tracker::default();
        loop {
            for fired in self.fire_due(&stop, &sessions).await {
                report(&fired);
            }
            tokio::select! {
                _ = stop.cancelled() => break,
                _ = tokio::time::sleep(TICK) => {}
            }
        }
        sessions.wait().await;
    }

    async fn fire_due(&self, stop: &CancellationToken, sessions: &Tracker) -> Vec<Fired> {
        let list = match self.schedules.list() {
            Ok(list) => list,
            Err(err) => {
                return vec![Fired::Failed {
                    name: "*".into(),
                    error: pod_llm::error_chain(&err),
                }]
            }
        };
        let now = Utc::now();
        let mut done = Vec::new();
        for schedule in list {
            let fired = match self.fire_one(&schedule, now, stop, sessions).await {
                Ok(fired) => fired,
                Err(err) => Some(Fired::Failed {
                    name: schedule.name.clone(),
                    error: err,
                }),
            };
            done.extend(fired);
        }
        done
    }

    async fn fire_one(
        &self,
        schedule: &Schedule,
        now: DateTime<Utc>,
        stop: &CancellationToken,
        sessions: &Tracker,
    ) -> Result<Option<Fired>, String> {
        let chain = |e: &dyn std::error::Error| pod_llm::error_chain(e);
        // A heartbeat's fire time is skipped while its session is busy,
        // whatever the overlap policy.
        let heartbeat_busy = match schedule.session {
            Some(id) if schedule.run_now.is_some() || due(schedule, now) => self.busy(id).await?,
            _ => false,
        };
        let session = |skip: bool| (!skip).then(|| schedule.session.unwrap_or_else(Uuid::new_v4));
        let take = if let Some(at) = schedule.run_now {
            Take {
                name: schedule.name.clone(),
                expected: schedule.next_fire,
                fire_at: at,
                next: schedule.next_fire,
                missed: 0,
                session: session(heartbeat_busy),
                run_now: true,
            }
        } else {
            if !due(schedule, now) {
                return Ok(None);
            }
            let (fire_at, missed, next) = schedule
                .timing
                .catch_up(schedule.next_fire, now)
                .map_err(|e| chain(&e))?;
            let busy = schedule.last_session.is_some_and(|id| self.running_now(id));
            let skip = heartbeat_busy || (schedule.overlap == Overlap::Skip && busy);
            Take {
                name: schedule.name.clone(),
                expected: schedule.next_fire,
                fire_at,
                next,
                missed: u64::try_from(missed).unwrap_or(0),
                session: session(skip),
                run_now: false,
            }
        };
        // Recorded as taken first: a crash from here on loses this fire
        // time's session, never doubles it.
        let taken = self.schedules.take(&take).map_err(|e| chain(&e))?;
        if taken.is_none() {
            return Ok(None);
        }
        let Some(id) = take.session else {
            pod::stats::schedule_fired(false, take.missed);
            return Ok(Some(Fired::Skipped {
                name: take.name,
                fire_at: take.fire_at,
            }));
        };
        pod::stats::schedule_fired(true, take.missed);
        self.start(schedule, id, take.fire_at, stop, sessions)
            .await
            .map_err(|e| format!("session {id}: {e}"))?;
        if schedule.session.is_some() {
            return Ok(Some(Fired::Continued {
                name: take.name,
                fire_at: take.fire_at,
                session: id,
            }));
        }
        Ok(Some(Fired::Started {
            name: take.name,
            fire_at: take.fire_at,
            missed: take.missed,
            session: id,
        }))
    }

    /// Whether heartbeat session `id` cannot take a message now: this
    /// process runs it, another holds it open, it is gone, or its log ends
    /// inside a tool call (a message before the calls' results would make
    /// the history invalid; `pod resume` closes them first).
    async fn busy(&self, id: Uuid) -> Result<bool, String> {
        if self.running_now(id) {
            return Ok(true);
        }
        let chain = |e: &dyn std::error::Error| pod_llm::error_chain(e);
        let store = self.launcher.place().store.clone();
        match store.stat(id).await {
            Ok(stat) if stat.holder.is_some() => return Ok(true),
            Ok(_) => {}
            Err(pod::PodError::NoSuchSession { .. }) => return Ok(true),
            Err(err) => return Err(chain(&err)),
        }
        let contents = store.read(id).await.map_err(|e| chain(&e))?;
        Ok(!pod::replay::replay(&contents.records)
            .interrupted
            .is_empty())
    }

    fn running_now(&self, id: Uuid) -> bool {
        self.running
            .lock()
            .map(|running| running.contains(&id))
            .unwrap_or(false)
    }

    /// Writes session `id` of `schedule` for `fire_at` and starts it; its
    /// turn runs in a task of `sessions`.
    async fn start(
        &self,
        schedule: &Schedule,
        id: Uuid,
        fire_at: DateTime<Utc>,
        stop: &CancellationToken,
        sessions: &Tracker,
    ) -> Result<(), String> {
        let chain = |e: &dyn std::error::Error| pod_llm::error_chain(e);
        let store = self.launcher.place().store.clone();
        // A heartbeat's message is the turn's prompt; a new session's task
        // is written with it.
        let message = schedule.session.map(|_| schedule.task.clone());
        if message.is_none() {
            let (header, first) = session_of(schedule, id, fire_at);
            let writer = store
                .create(&header, Durability::Turn)
                .await
                .map_err(|e| chain(&e))?;
            for record in &first {
                writer.append(record, true).await.map_err(|e| chain(&e))?;
            }
            writer.shutdown().await.map_err(|e| chain(&e))?;
        }
        let loaded = crate::sessions::load(store.as_ref(), id)
            .await
            .map_err(|e| chain(&e))?;
        let flags = Flags {
            until_done: true,
            ..Default::default()
        };
        let workspace = loaded.header.workspace.clone();
        let plan = self
            .launcher
            .plan_resume_of(&loaded, &flags, Some(workspace))
            .map_err(|e| chain(&e))?;
        let options = Options {
            durability: Durability::Turn,
            approver: self.adopt.as_ref().map(|adopt| adopt.approver(id)),
            ..Default::default()
        };
        let prepared = plan.prepare(options).await.map_err(|e| chain(&e))?;
        for warning in &prepared.warnings {
            tracing::warn!(session = %id, %warning, "MCP server");
        }
        let session = prepared.start().await.map_err(|e| chain(&e))?;
        if let Ok(mut running) = self.running.lock() {
            running.insert(id);
        }
        let meter = session.meter();
        let (handle, mcp) = (session.handle, session.mcp);
        if let Some(adopt) = &self.adopt {
            adopt.adopt(id, handle.clone(), meter);
        }
        let (this, stop) = (self.clone(), stop.clone());
        sessions.spawn(async move {
            let turn = async {
                match message {
                    Some(message) => handle.prompt(message).await,
                    None => handle.continue_turn().await,
                }
            };
            tokio::pin!(turn);
            let result = tokio::select! {
                result = &mut turn => result,
                _ = stop.cancelled() => {
                    let _ = handle.cancel().await;
                    turn.await
                }
            };
            if let Err(err) = &result {
                tracing::warn!(session = %id, error = %pod_llm::error_chain(err), "scheduled session");
            }
            if let Some(adopt) = &this.adopt {
                adopt.release(id);
            }
            let _ = handle.shutdown().await;
            mcp.shutdown().await;
            if let Ok(mut running) = this.running.lock() {
                running.remove(&id);
            }
        });
        Ok(())
    }
}

/// Whether `schedule` waits for a fire time that has come.
fn due(schedule: &Schedule, now: DateTime<Utc>) -> bool {
    !schedule.paused && schedule.next_fire <= now
}

/// The header and first records of `schedule`'s session `id` for
/// `fire_at`: its template with the schedule as origin, its limits, then
/// its task.
pub fn session_of(
    schedule: &Schedule,
    id: Uuid,
    fire_at: DateTime<Utc>,
) -> (SessionHeader, Vec<LogRecord>) {
    let mut header = schedule.template.clone();
    header.session_id = id;
    header.created_at = Utc::now();
    header.origin = Some(Origin::Schedule {
        name: schedule.name.clone(),
        fire_at,
    });
    let mut first = Vec::with_capacity(2);
    if let Some(limits) = schedule.limits.filter(|l| l.is_set()) {
        first.push(LogRecord::Limits(pod::log::LimitsRecord::now(
            limits, "schedule",
        )));
    }
    first.push(LogRecord::Item(Item::user(schedule.task.clone())));
    (header, first)
}

/// The sessions the loop started: spawned, then waited for at the end.
type Tracker = Arc<TaskSet>;

/// A set of tasks to wait for, closed once the loop ends.
#[derive(Default)]
pub(crate) struct TaskSet {
    // Held to push a handle or to take them all at the end.
    tasks: Mutex<Vec<tokio::task::JoinHandle<()>>>,
}

impl TaskSet {
    fn spawn(&self, task: impl std::future::Future<Output = ()> + Send + 'static) {
        if let Ok(mut tasks) = self.tasks.lock() {
            tasks.retain(|t| !t.is_finished());
            tasks.push(tokio::spawn(task));
        }
    }

    async fn wait(&self) {
        let tasks = match self.tasks.lock() {
            Ok(mut tasks) => std::mem::take(&mut *tasks),
            Err(_) => return,
        };
        for task in tasks {
            let _ = task.await;
        }
    }
}
