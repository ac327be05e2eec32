//! The sessions this server runs: Pods started by the API (or claimed by
//! its fleet workers), the approvals they wait for, and the handles that
//! prompts, notifications and cancels go to.
//!
//! A session is live here only while it has work: a prompt starts (or
//! resumes) its Pod, and when its last prompt is answered (and every note
//! sent meanwhile was read: a note that arrives after the turn's last
//! request gets one more request) the Pod is shut down, so its log is
//! released and `running` means running. A prompt to a session another
//! process holds, or one queued for the fleet, is refused (409).

use super::error::ApiError;
use chrono::{DateTime, Utc};
use parking_lot::Mutex;
use pod::{
    ApprovalDecision, ApprovalRequest, Approver, CancellationToken, Durability, PodError, PodHandle,
};
use pod_launch::{BudgetFlags, Launcher, ModelFlags, SandboxFlags};
use pod_llm::error_chain as chain;
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use tokio::sync::{broadcast, oneshot};
use uuid::Uuid;

// Child modules, for the runner's state: creating sessions, the
// approvals they wait for, raising their limits.
mod approvals;
mod create;
mod limits;
mod schedules;

use approvals::Waiting;
pub use approvals::{Binding, PendingApproval};
pub use create::{CreateBatch, CreateBudget, CreateSession};
pub use schedules::{CreateSchedule, NewSchedule, ScheduleRefused};

/// What sessions the API starts get by default, and the most any session
/// it starts or resumes may get: `pod serve`'s flags and config file.
pub struct Allowed {
    /// The model of sessions created without a profile.
    pub model: ModelFlags,
    /// The approval flags every session starts from (a request adds to
    /// them; the ceiling decides whether that widens).
    pub approval: pod::ApprovalFlags,
    /// The sandbox flags every session starts from.
    pub sandbox: SandboxFlags,
    /// The most a session may get.
    pub ceiling: super::ceiling::Ceiling,
    /// Paths besides pod's home and config directory that sessions'
    /// commands and tools may not reach (the token file).
    pub private: Vec<PathBuf>,
}

struct Live {
    handle: PodHandle,
    // Prompts sent and not yet answered; at zero the Pod is shut down.
    outstanding: usize,
    mcp: Option<pod_mcp::McpServers>,
    // Run by this process's fleet worker, which owns its turn and its end:
    // the API may notify, cancel and answer its questions, not prompt it.
    fleet: bool,
    // Notes sent and not yet delivered (a watcher of the Pod's events
    // counts them down); the last turn does not end with notes unread.
    notes: usize,
    // Stops that watcher when the session leaves, and marks the pieces
    // it streamed stale (cancelled with the removal, under the lock).
    gone: CancellationToken,
}

#[derive(Default)]
struct State {
    live: HashMap<Uuid, Live>,
    // Oldest first; a handful at a time, so a list.
    approvals: Vec<Waiting>,
}

/// The sessions this server runs.
#[derive(Clone)]
pub struct Runner {
    // Starts and resumes its sessions, in its place.
    launcher: Launcher,
    // What sessions get, and the most they may get.
    allowed: Arc<Allowed>,
    // Short critical sections only (map updates), never held across an
    // await: a plain mutex.
    state: Arc<Mutex<State>>,
    // Starting a Pod (create or resume) is one at a time, so two prompts
    // to an idle session cannot both resume it.
    starting: Arc<tokio::sync::Mutex<()>>,
    // Text as the models stream it, from every session live here, for the
    // event streams (the committed record follows each answer, so a
    // watcher that lags loses a preview, never content).
    deltas: broadcast::Sender<Delta>,
    // What `/metrics` says, counted from the live sessions' events.
    metrics: Arc<crate::metrics::Metrics>,
    // Where a batch of new sessions goes: the fleet's queue.
    queue: Option<Arc<dyn Queue>>,
    // Without a fleet: the file store's schedules, listed, paused and
    // removed through the API.
    schedule_list: Option<Arc<dyn ScheduleFiles>>,
    // Where the Managed Agents API keeps its resources: the fleet's store,
    // or files under POD_HOME when `None`.
    documents: Option<Arc<dyn crate::documents::Documents>>,
}

/// The file store's schedules (a server without a fleet), each as `pod
/// schedule list --json` shows it; errors in words.
pub trait ScheduleFiles: Send + Sync {
    /// Every schedule.
    fn list(&self) -> Result<Vec<serde_json::Value>, String>;
    /// Pauses or resumes `name`: the schedule as it is now, or `None` if
    /// there is none.
    fn pause(&self, name: &str, paused: bool) -> Result<Option<serde_json::Value>, String>;
    /// Removes `name` (not its sessions): whether there was one.
    fn remove(&self, name: &str) -> Result<bool, String>;
    /// Adds `new` (its session settings checked against the ceiling
    /// already): what the list shows of it.
    fn add(
        &self,
        new: crate::runner::NewSchedule,
    ) -> Result<serde_json::Value, crate::runner::ScheduleRefused>;
}

/// The fleet's queue, where `POST /api/sessions/batch` puts sessions for
/// the workers to run: the front end gives one when its store has a queue
/// (PostgreSQL).
#[async_trait::async_trait]
pub trait Queue: Send + Sync {
    /// Queues `sessions` (each a header and its first records), all or
    /// none.
    async fn submit(
        &self,
        sessions: &[(pod::log::SessionHeader, Vec<pod::log::LogRecord>)],
    ) -> Result<(), pod::PodError>;

    /// The fleet's schedules, each as `pod schedule list --json` shows it.
    async fn schedules(&self) -> Result<Vec<serde_json::Value>, pod::PodError>;

    /// Adds a schedule (its sessions' settings checked already): what
    /// `pod schedule list --json` shows of it.
    async fn add_schedule(&self, new: NewSchedule) -> Result<serde_json::Value, ScheduleRefused>;

    /// Pauses or resumes schedule `name` (resumed, it waits for its next
    /// fire time after now): what `pod schedule list --json` shows of it.
    async fn pause_schedule(
        &self,
        name: &str,
        paused: bool,
    ) -> Result<serde_json::Value, ScheduleRefused>;

    /// Removes schedule `name`.
    async fn remove_schedule(&self, name: &str) -> Result<(), ScheduleRefused>;
}

/// A piece of a live session's answer as its model streams it.
#[derive(Clone, Debug, Serialize)]
pub struct Delta {
    /// The session.
    pub session_id: Uuid,
    /// `text`, or `reasoning`.
    pub kind: &'static str,
    /// The piece.
    pub text: String,
    // Cancelled when the run that streamed it stopped being live here
    // (under the state lock, with its removal): the relay of a run's
    // events may pass a piece on after that, and it is stale by then.
    #[serde(skip)]
    run: CancellationToken,
}

impl Delta {
    /// Whether the run that streamed this piece has ended: its record is
    /// in the log and the session's status said so, so a watcher gets
    /// nothing from a late preview of it.
    pub fn stale(&self) -> bool {
        self.run.is_cancelled()
    }
}

/// How long an answer waits for a session that is still parking (its
/// question is in the log a moment before its Pod lets the log go).
const PARKING_WAIT: std::time::Duration = std::time::Duration::from_secs(5);

/// Deltas waiting for the slowest watcher: a few answers' worth of small
/// pieces; beyond that a watcher skips ahead (it gets the record anyway).
const DELTA_BUFFER: usize = 1024;

impl Runner {
    /// The counters `/metrics` shows.
    pub fn metrics(&self) -> &crate::metrics::Metrics {
        &self.metrics
    }

    /// How many sessions run in this process.
    pub fn live_count(&self) -> usize {
        self.state.lock().live.len()
    }

    /// pod's home on this machine (where checkpoints are).
    pub fn home(&self) -> &pod::PodHome {
        &self.launcher.place().home
    }

    /// Where API clients may put workspaces (the Managed Agents API's
    /// environments).
    pub(crate) fn workspace_roots(&self) -> &[PathBuf] {
        &self.allowed.ceiling.workspace_roots
    }

    /// The model of sessions created without a profile.
    pub(crate) fn server_model(&self) -> &ModelFlags {
        &self.allowed.model
    }

    /// The launcher its sessions start through.
    pub(crate) fn launcher(&self) -> &Launcher {
        &self.launcher
    }

    /// What the server allows its API clients.
    pub(crate) fn allowed(&self) -> &Allowed {
        &self.allowed
    }

    /// A runner for the sessions `launcher` starts, within what `allowed`
    /// allows.
    pub fn new(launcher: Launcher, allowed: Allowed) -> Self {
        Self {
            launcher,
            allowed: Arc::new(allowed),
            state: Arc::default(),
            starting: Arc::default(),
            deltas: broadcast::channel(DELTA_BUFFER).0,
            metrics: Arc::default(),
            queue: None,
            schedule_list: None,
            documents: None,
        }
    }

    /// The same runner, keeping the Managed Agents API's agents,
    /// environments and sessions' settings in `documents` (a fleet's
    /// store, which every server of the fleet reads) instead of files
    /// under `POD_HOME/managed/`.
    pub fn with_documents(mut self, documents: Arc<dyn crate::documents::Documents>) -> Self {
        self.documents = Some(documents);
        self
    }

    /// Where the Managed Agents API keeps its resources.
    pub(crate) fn documents(&self) -> Arc<dyn crate::documents::Documents> {
        match &self.documents {
            Some(documents) => Arc::clone(documents),
            None => Arc::new(crate::documents::FileDocuments::new(
                self.home().path().join("managed"),
            )),
        }
    }

    /// The same runner, with the file store's schedules (a server without
    /// a fleet).
    pub fn with_schedule_files(mut self, files: Arc<dyn ScheduleFiles>) -> Self {
        self.schedule_list = Some(files);
        self
    }

    /// The same runner, queueing batches on `queue`.
    pub fn with_queue(mut self, queue: Arc<dyn Queue>) -> Self {
        self.queue = Some(queue);
        self
    }

    /// The streamed text of every session live here from now on.
    pub fn deltas(&self) -> broadcast::Receiver<Delta> {
        self.deltas.subscribe()
    }

    /// Whether session `id` runs here now.
    pub fn is_live(&self, id: Uuid) -> bool {
        self.state.lock().live.contains_key(&id)
    }

    /// Sends a prompt: to the Pod if it runs here, else resumes the
    /// session here (unless another process holds it).
    pub async fn prompt(&self, id: Uuid, text: String) -> Result<(), ApiError> {
        if text.trim().is_empty() {
            return Err(ApiError::bad_request("`text` is empty"));
        }
        let _start = self.starting.lock().await;
        if self
            .state
            .lock()
            .live
            .get(&id)
            .is_some_and(|live| live.fleet)
        {
            return Err(ApiError::conflict(format!(
                "session {id} is being run by this server's fleet worker until its plan is \
                 done: send a notification instead"
            )));
        }
        if let Some(handle) = self.take_turn(id) {
            self.spawn_turn(id, handle, Some(text));
            return Ok(());
        }
        let (handle, mcp, meter) = self.resume(id).await?;
        self.go_live(id, handle, Some(mcp), Some(text), meter);
        Ok(())
    }

    /// Continues session `session`, parked on a question that was answered
    /// or timed out, here (its gate acts on the answer, or answers "no"
    /// for a question past its timeout).
    pub async fn continue_parked(&self, session: Uuid) -> Result<(), ApiError> {
        let _start = self.starting.lock().await;
        if self.state.lock().live.contains_key(&session) {
            // Already continued by someone else here.
            return Ok(());
        }
        let (handle, mcp, meter) = self.resume(session).await?;
        self.go_live(session, handle, Some(mcp), None, meter);
        Ok(())
    }

    /// Delivers a notification to a session running here.
    pub async fn notify(&self, id: Uuid, text: String) -> Result<(), ApiError> {
        if text.trim().is_empty() {
            return Err(ApiError::bad_request("`text` is empty"));
        }
        let handle = {
            let mut state = self.state.lock();
            let live = state.live.get_mut(&id).ok_or_else(|| not_live(id))?;
            live.notes += 1;
            live.handle.clone()
        };
        handle
            .notify(text)
            .await
            .map_err(|e| ApiError::conflict(format!("the session stopped: {e}")))
    }

    /// Cancels the running turn of a session running here.
    pub async fn cancel(&self, id: Uuid) -> Result<(), ApiError> {
        let handle = self.live_handle(id)?;
        handle
            .cancel()
            .await
            .map_err(|e| ApiError::conflict(format!("the session stopped: {e}")))
    }

    /// Stops every session running here (their turns are cancelled; the
    /// logs keep everything committed).
    pub async fn shutdown(&self) {
        let live: Vec<(PodHandle, Option<pod_mcp::McpServers>)> = self
            .state
            .lock()
            .live
            .drain()
            .map(|(_, live)| {
                live.gone.cancel();
                (live.handle, live.mcp)
            })
            .collect();
        for (handle, mcp) in live {
            let _ = handle.shutdown().await;
            if let Some(mcp) = mcp {
                mcp.shutdown().await;
            }
        }
    }

    /// A session a fleet worker of this process runs: its questions come
    /// here, and notifications and cancels reach it, until [`Self::release`].
    pub fn adopt(&self, id: Uuid, handle: PodHandle, meter: pod_launch::Meter) {
        let gone = CancellationToken::new();
        self.watch_events(id, &handle, gone.clone(), meter);
        self.state.lock().live.insert(
            id,
            Live {
                handle,
                outstanding: 0,
                mcp: None,
                fleet: true,
                notes: 0,
                gone,
            },
        );
    }

    /// The fleet worker is done with session `id` (it shuts the Pod down).
    pub fn release(&self, id: Uuid) {
        let mut state = self.state.lock();
        if state.live.get(&id).is_some_and(|live| live.fleet) {
            if let Some(live) = state.live.remove(&id) {
                live.gone.cancel();
            }
        }
    }

    fn live_handle(&self, id: Uuid) -> Result<PodHandle, ApiError> {
        match self.state.lock().live.get(&id) {
            Some(live) => Ok(live.handle.clone()),
            None => Err(not_live(id)),
        }
    }

    /// The live handle, counting one more outstanding prompt.
    fn take_turn(&self, id: Uuid) -> Option<PodHandle> {
        let mut state = self.state.lock();
        let live = state.live.get_mut(&id)?;
        live.outstanding += 1;
        Some(live.handle.clone())
    }

    fn go_live(
        &self,
        id: Uuid,
        handle: PodHandle,
        mcp: Option<pod_mcp::McpServers>,
        text: Option<String>,
        meter: pod_launch::Meter,
    ) {
        let gone = CancellationToken::new();
        self.watch_events(id, &handle, gone.clone(), meter);
        self.state.lock().live.insert(
            id,
            Live {
                handle: handle.clone(),
                outstanding: 1,
                mcp,
                fleet: false,
                notes: 0,
                gone,
            },
        );
        self.spawn_turn(id, handle, text);
    }

    /// Counts the session's notes down as the Pod delivers them, and
    /// passes its streamed text on to the event streams.
    fn watch_events(
        &self,
        id: Uuid,
        handle: &PodHandle,
        gone: CancellationToken,
        meter: pod_launch::Meter,
    ) {
        let mut events = handle.subscribe();
        let state = Arc::clone(&self.state);
        let deltas = self.deltas.clone();
        let metrics = Arc::clone(&self.metrics);
        tokio::spawn(async move {
            loop {
                let event = tokio::select! {
                    // The session's last events come before it is let go.
                    biased;
                    event = events.recv() => event,
                    _ = gone.cancelled() => {
                        // What it said before it was let go still counts.
                        while let Ok(event) = events.try_recv() {
                            metrics.observe(&event, &meter);
                        }
                        return;
                    }
                };
                if let Ok(event) = &event {
                    metrics.observe(event, &meter);
                }
                match event {
                    Ok(pod::PodEvent::NotificationDelivered { .. }) => {
                        if let Some(live) = state.lock().live.get_mut(&id) {
                            live.notes = live.notes.saturating_sub(1);
                        }
                    }
                    Ok(pod::PodEvent::TextDelta { text }) => {
                        // No watcher is not an error.
                        let _ = deltas.send(Delta {
                            session_id: id,
                            kind: "text",
                            text,
                            run: gone.clone(),
                        });
                    }
                    Ok(pod::PodEvent::ReasoningDelta { text }) => {
                        let _ = deltas.send(Delta {
                            session_id: id,
                            kind: "reasoning",
                            text,
                            run: gone.clone(),
                        });
                    }
                    Ok(_) | Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => {}
                    Err(tokio::sync::broadcast::error::RecvError::Closed) => return,
                }
            }
        });
    }

    /// Runs one prompt; the last one answered shuts the Pod down, unless
    /// a note came too late for the turn's last request: then the turn is
    /// continued so the model reads it.
    fn spawn_turn(&self, id: Uuid, handle: PodHandle, text: Option<String>) {
        let runner = self.clone();
        tokio::spawn(async move {
            let mut prompt = text;
            let mut limited;
            let live = loop {
                let result = match prompt.take() {
                    Some(text) => handle.prompt(text).await,
                    None => handle.continue_turn().await,
                };
                limited = match &result {
                    Ok(outcome) => shared_limit_window(&outcome.reason),
                    Err(_) => None,
                };
                let cancelled = match &result {
                    Ok(outcome) => {
                        tracing::info!(session = %id, reason = ?outcome.reason, "turn ended");
                        outcome.reason == pod::TurnEndReason::Cancelled
                    }
                    Err(err) => {
                        tracing::warn!(session = %id, %err, "turn failed");
                        true
                    }
                };
                let mut state = runner.state.lock();
                match state.live.get_mut(&id) {
                    Some(live) if live.outstanding <= 1 && live.notes > 0 && !cancelled => {
                        tracing::info!(session = %id, notes = live.notes, "continuing for unread notes");
                    }
                    Some(live) if live.outstanding <= 1 => {
                        if live.notes > 0 {
                            tracing::warn!(session = %id, notes = live.notes, "notes unread at a cancelled turn's end are dropped");
                        }
                        let live = state.live.remove(&id);
                        // With its removal: whoever sees it not live
                        // sees its streamed pieces stale.
                        if let Some(live) = &live {
                            live.gone.cancel();
                        }
                        break live;
                    }
                    Some(live) => {
                        live.outstanding -= 1;
                        break None;
                    }
                    None => break None,
                }
            };
            if let Some(live) = live {
                if let Err(err) = live.handle.shutdown().await {
                    tracing::warn!(session = %id, %err, "session shutdown");
                }
                if let Some(mcp) = live.mcp {
                    mcp.shutdown().await;
                }
                if let (Some(window), None) = (limited, &runner.queue) {
                    runner.continue_when_window_ends(id, window);
                }
            }
        });
    }

    /// Continues session `id`, stopped by its profile's shared limit of
    /// `window`, here once the window ends: a server without a fleet (the
    /// file store) has no workers to wake it. Kept in this process only:
    /// a server started again leaves it for `pod resume` or a prompt.
    fn continue_when_window_ends(&self, id: Uuid, window: pod::shared_limits::Window) {
        let now = Utc::now();
        let end =
            pod::shared_limits::window_end(window, pod::shared_limits::window_start(window, now));
        let wait = (end - now).to_std().unwrap_or_default();
        tracing::info!(session = %id, until = %end, "stopped by a shared limit; continued when its window ends");
        let runner = self.clone();
        tokio::spawn(async move {
            tokio::time::sleep(wait).await;
            if let Err(err) = runner.continue_parked(id).await {
                tracing::warn!(session = %id, error = ?err, "cannot continue a session after its limit's window");
            }
        });
    }

    /// Refuses session `id`'s resume `plan` if its recorded settings are
    /// more than this server allows (started by `pod run --yes`, say).
    pub(crate) fn check_recorded(&self, id: Uuid, plan: &pod_launch::Plan) -> Result<(), ApiError> {
        let ceiling = &self.allowed.ceiling;
        let canonical = plan
            .workspace
            .canonicalize()
            .unwrap_or_else(|_| plan.workspace.clone());
        ceiling
            .check_workspace(&canonical)
            .and_then(|()| ceiling.check(&plan.settings))
            .map_err(|widening| {
                ApiError::forbidden(super::ceiling::Widening {
                    message: format!(
                        "session {id} was started with more than this server allows: {}",
                        widening.message
                    ),
                    ..widening
                })
            })
    }

    /// Resumes session `id` here with its recorded settings.
    async fn resume(
        &self,
        id: Uuid,
    ) -> Result<(PodHandle, pod_mcp::McpServers, pod_launch::Meter), ApiError> {
        let store = self.launcher.place().store.as_ref();
        let stat = store.stat(id).await.map_err(not_found_or_internal)?;
        if let Some(holder) = stat.holder {
            return Err(ApiError::conflict(format!(
                "session {id} is running elsewhere ({holder})"
            )));
        }
        if stat.queued {
            return Err(ApiError::conflict(format!(
                "session {id} is queued for the fleet: a worker will run it"
            )));
        }
        let loaded = pod_launch::sessions::load(store, id)
            .await
            .map_err(|e| ApiError::internal(chain(&e)))?;
        // A session that recorded no model gets the server's.
        let flags = match &loaded.launch {
            Some(_) => pod_launch::Flags::default(),
            None => pod_launch::Flags {
                model: self.allowed.model.clone(),
                ..Default::default()
            },
        };
        let plan = self
            .launcher
            .plan_resume(id, &flags, None)
            .await
            .map_err(|e| {
                ApiError::conflict(format!("cannot resume session {id}: {}", chain(&e)))
            })?;
        self.check_recorded(id, &plan)?;
        let options = pod_launch::Options {
            durability: Durability::Turn,
            approver: Some(self.approver(id)),
            private_paths: self.allowed.private.clone(),
            // A Pod of this server that just shut down may still hold the
            // log for a moment.
            busy_wait: std::time::Duration::from_secs(1),
            ..Default::default()
        };
        let prepared = plan.prepare(options).await.map_err(|e| {
            ApiError::conflict(format!("cannot resume session {id}: {}", chain(&e)))
        })?;
        match prepared.start().await {
            Ok(session) => {
                let meter = session.meter();
                Ok((session.handle, session.mcp, meter))
            }
            Err(err) => match err.pod_error() {
                Some(PodError::SessionBusy { .. } | PodError::SessionLeased { .. }) => Err(
                    ApiError::conflict(format!("session {id} is busy: {}", chain(&err))),
                ),
                _ => Err(ApiError::internal(chain(&err))),
            },
        }
    }
}

/// The window of the profile's shared limit that ended a turn, if one did.
fn shared_limit_window(reason: &pod::TurnEndReason) -> Option<pod::shared_limits::Window> {
    match reason {
        pod::TurnEndReason::Limit(pod::Limit::Shared { window, .. }) => Some(*window),
        _ => None,
    }
}

fn not_live(id: Uuid) -> ApiError {
    ApiError::conflict(format!(
        "session {id} is not running in this server: send a prompt to start it"
    ))
}

fn not_found_or_internal(err: PodError) -> ApiError {
    match err {
        PodError::NoSuchSession { id, .. } => ApiError::not_found(format!("no session {id}")),
        err => ApiError::internal(chain(&err)),
    }
}
