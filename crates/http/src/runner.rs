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

/// What `POST /api/sessions/batch` takes: `{"sessions": [...]}`, each
/// what `POST /api/sessions` takes.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CreateBatch {
    /// The sessions, in the order they are queued.
    pub sessions: Vec<CreateSession>,
}

/// What `POST /api/sessions` takes.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CreateSession {
    /// The task: the session's first prompt.
    pub task: String,
    /// The workspace (an existing directory); the server's working
    /// directory when absent.
    #[serde(default)]
    pub workspace: Option<PathBuf>,
    /// A profile of the server's config file; the server's model when
    /// absent.
    #[serde(default)]
    pub profile: Option<String>,
    /// Continue until every todo is done.
    #[serde(default)]
    pub until_done: bool,
    /// Allow every tool that would ask.
    #[serde(default)]
    pub yes: bool,
    /// Tools to allow.
    #[serde(default)]
    pub allow: Vec<String>,
    /// Tools to deny.
    #[serde(default)]
    pub deny: Vec<String>,
    /// The sandbox mode of `bash` (`read-only`, `workspace-write`,
    /// `strict`, `off`).
    #[serde(default)]
    pub sandbox: Option<String>,
    /// Whether `bash` may use the network under the sandbox.
    #[serde(default)]
    pub network: Option<bool>,
    /// The run's budget, over the config file's (`pod run`'s budget flags).
    #[serde(default)]
    pub budget: Option<CreateBudget>,
    /// Checks that decide whether the run is done, by the names the
    /// server's config gives them (`[goal.checks]`): never commands. Over
    /// the config's `[goal] verify`.
    #[serde(default)]
    pub verify: Vec<String>,
    /// Failed verification rounds before the run stops unverified.
    #[serde(default)]
    pub max_verify: Option<u32>,
    /// A profile of the server's config whose model grades the work.
    #[serde(default)]
    pub grader: Option<String>,
    /// What the grader judges against.
    #[serde(default)]
    pub rubric: Option<String>,
    /// An agent the server knows (an agent definition in its config
    /// directory's `agents/`, or its workspaces' when its config opts in):
    /// the session starts as that agent. A client names one; it never
    /// supplies a definition.
    #[serde(default)]
    pub agent: Option<String>,
    /// The Managed Agents API's agent (its name and system prompt): the
    /// session runs as it. Never read from a request's JSON.
    #[serde(skip)]
    pub(crate) as_agent: Option<pod_launch::RecordedAgent>,
}

/// The `budget` of `POST /api/sessions`: `pod run`'s budget flags.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CreateBudget {
    /// Model requests per turn (`--max-requests`).
    #[serde(default)]
    pub max_requests: Option<u32>,
    /// Continuations with `until_done` (`--max-turns`).
    #[serde(default)]
    pub max_turns: Option<u32>,
    /// Model requests in the run (`--max-run-requests`).
    #[serde(default)]
    pub max_run_requests: Option<u64>,
    /// Tokens in the run (`--max-run-tokens`).
    #[serde(default)]
    pub max_run_tokens: Option<u64>,
    /// Money the run and its subagents may spend (`--max-cost`).
    #[serde(default)]
    pub max_cost: Option<pod_llm::Cost>,
}

impl CreateBudget {
    /// The flags it stands for; zero is refused where the flag refuses it.
    fn flags(&self) -> Result<BudgetFlags, ApiError> {
        let positive = |name: &str, zero: bool| match zero {
            true => Err(ApiError::bad_request(format!(
                "budget.{name} must be at least 1"
            ))),
            false => Ok(()),
        };
        positive("max_requests", self.max_requests == Some(0))?;
        positive("max_run_requests", self.max_run_requests == Some(0))?;
        positive("max_run_tokens", self.max_run_tokens == Some(0))?;
        if self.max_cost == Some(pod_llm::Cost::default()) {
            return Err(ApiError::bad_request("budget.max_cost must be more than 0"));
        }
        Ok(BudgetFlags {
            max_requests: self.max_requests,
            max_turns: self.max_turns,
            max_run_requests: self.max_run_requests,
            max_run_tokens: self.max_run_tokens,
            max_cost: self.max_cost,
        })
    }
}

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

/// A call waiting for an answer from the API.
#[derive(Debug, Clone, Serialize)]
pub struct PendingApproval {
    /// Its id: random, so an answer meant for a question asked before a
    /// restart cannot land on a new one.
    pub id: Uuid,
    /// The session whose turn waits (a subagent's question names the
    /// subagent in `request.subagent`).
    pub session_id: Uuid,
    /// The call.
    pub request: ApprovalRequest,
    /// When it was asked.
    pub asked_at: DateTime<Utc>,
    /// When it is answered "no" by itself, if it has a timeout.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<DateTime<Utc>>,
    /// Whether the session is parked on it (its log holds the question and
    /// no process waits): an answer continues the session here.
    pub parked: bool,
}

impl PendingApproval {
    /// The question a parked session's log holds.
    pub fn parked(session_id: Uuid, question: &pod::log::QuestionRecord) -> Self {
        Self {
            id: question.id,
            session_id,
            request: question.request.clone(),
            asked_at: question.asked_at,
            expires_at: question.expires_at,
            parked: true,
        }
    }
}

struct Waiting {
    approval: PendingApproval,
    reply: oneshot::Sender<ApprovalDecision>,
}

/// What an answer says it answers: the session and the call, so it lands
/// only on that question.
#[derive(Debug, Default, Deserialize)]
pub struct Binding {
    /// The session that asked.
    #[serde(default)]
    pub session_id: Option<Uuid>,
    /// The call asked about.
    #[serde(default)]
    pub call_id: Option<String>,
}

impl Binding {
    /// What differs from `asked`, for the conflict's message.
    fn mismatch(&self, asked: &PendingApproval) -> Option<String> {
        if self.session_id.is_some_and(|id| id != asked.session_id) {
            return Some(format!("session {}", asked.session_id));
        }
        match &self.call_id {
            Some(call) if *call != asked.request.call_id => {
                Some(format!("call {}", asked.request.call_id))
            }
            _ => None,
        }
    }
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
        }
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

    /// Creates a session and starts its first turn.
    pub async fn create(&self, request: CreateSession) -> Result<Uuid, ApiError> {
        self.create_with(request, None).await
    }

    async fn create_with(
        &self,
        request: CreateSession,
        id: Option<Uuid>,
    ) -> Result<Uuid, ApiError> {
        let plan = self.plan_for(&request, request.until_done)?;
        let allowed = &self.allowed;
        let _start = self.starting.lock().await;
        let id_cell: Arc<Mutex<Option<Uuid>>> = Arc::default();
        let options = pod_launch::Options {
            durability: Durability::Turn,
            approver: Some(self.approver_for_new(&id_cell)),
            private_paths: allowed.private.clone(),
            session_id: id,
            ..Default::default()
        };
        let prepared = plan
            .prepare(options)
            .await
            .map_err(|e| ApiError::bad_request(chain(&e)))?;
        for warning in &prepared.warnings {
            tracing::warn!(%warning, "MCP server");
        }
        let session = prepared
            .start()
            .await
            .map_err(|e| ApiError::internal(chain(&e)))?;
        let id = session.handle.session_id();
        *id_cell.lock() = Some(id);
        let meter = session.meter();
        self.go_live(
            id,
            session.handle,
            Some(session.mcp),
            Some(request.task),
            meter,
        );
        Ok(id)
    }

    /// Starts the session `request` describes with the id `id` (a webhook
    /// delivery's): queued for the fleet when the server has one, else run
    /// here as [`create`](Self::create) runs it.
    pub async fn start_as(&self, request: CreateSession, id: Uuid) -> Result<Uuid, ApiError> {
        let Some(queue) = &self.queue else {
            return self.create_with(request, Some(id)).await;
        };
        let session = self.queued(request, id)?;
        queue
            .submit(std::slice::from_ref(&session))
            .await
            .map_err(|e| ApiError::internal(chain(&e)))?;
        Ok(id)
    }

    /// Whether the server would start `request`: its settings within the
    /// ceiling (a trigger's, when the server starts).
    pub fn check(&self, request: &CreateSession) -> Result<(), ApiError> {
        self.plan_for(request, request.until_done).map(drop)
    }

    /// The header and first record of `request` queued as session `id`.
    fn queued(
        &self,
        request: CreateSession,
        id: Uuid,
    ) -> Result<(pod::log::SessionHeader, Vec<pod::log::LogRecord>), ApiError> {
        let plan = self.plan_for(&request, true)?;
        let model = plan
            .model_name()
            .map_err(|e| ApiError::bad_request(chain(&e)))?;
        let launch = plan
            .record()
            .map_err(|e| ApiError::bad_request(chain(&e)))?;
        let mut header = pod::log::SessionHeader::new(id, model, plan.workspace.clone());
        header.launch = launch.to_json();
        Ok((
            header,
            vec![pod::log::LogRecord::Item(pod::Item::user(request.task))],
        ))
    }

    /// Queues `requests` for the fleet's workers, all or none, and returns
    /// their ids in order: every one is checked as `create` checks it (the
    /// ceiling included), then all go to the queue in one transaction. The
    /// fleet runs each until its plan is done. Needs a queue
    /// ([`Runner::with_queue`]: a PostgreSQL store).
    pub async fn create_batch(&self, requests: Vec<CreateSession>) -> Result<Vec<Uuid>, ApiError> {
        let Some(queue) = &self.queue else {
            return Err(ApiError::conflict(
                "a batch is queued for a fleet: start the server with a PostgreSQL store \
                 (--store postgres://…), or create sessions one at a time",
            ));
        };
        if requests.is_empty() {
            return Err(ApiError::bad_request("`sessions` is empty"));
        }
        let mut sessions = Vec::with_capacity(requests.len());
        for (i, request) in requests.into_iter().enumerate() {
            let at = |e: ApiError| e.prefixed(&format!("sessions[{i}]: "));
            sessions.push(self.queued(request, Uuid::new_v4()).map_err(at)?);
        }
        queue
            .submit(&sessions)
            .await
            .map_err(|e| ApiError::internal(chain(&e)))?;
        Ok(sessions.iter().map(|(h, _)| h.session_id).collect())
    }

    /// The session `request` describes, checked against the server's
    /// ceiling: its settings laid over the server's.
    fn plan_for(
        &self,
        request: &CreateSession,
        until_done: bool,
    ) -> Result<pod_launch::Plan, ApiError> {
        if request.task.trim().is_empty() {
            return Err(ApiError::bad_request("`task` is empty"));
        }
        let workspace = match &request.workspace {
            Some(dir) => dir.clone(),
            None => std::env::current_dir()
                .map_err(|e| ApiError::internal(format!("no working directory: {e}")))?,
        };
        let workspace = workspace.canonicalize().map_err(|e| {
            ApiError::bad_request(format!("workspace {}: {e}", workspace.display()))
        })?;
        if !workspace.is_dir() {
            return Err(ApiError::bad_request(format!(
                "workspace {} is not a directory",
                workspace.display()
            )));
        }
        let allowed = &self.allowed;
        allowed
            .ceiling
            .check_workspace(&workspace)
            .map_err(ApiError::forbidden)?;
        let mut model = allowed.model.clone();
        if request.profile.is_some() {
            model = ModelFlags {
                profile: request.profile.clone(),
                ..Default::default()
            };
        }
        // The request's fields are laid over the server's; the ceiling
        // below refuses whatever that widens.
        let approval = pod::ApprovalFlags {
            yes: allowed.approval.yes || request.yes,
            allow: [allowed.approval.allow.clone(), request.allow.clone()].concat(),
            deny: [allowed.approval.deny.clone(), request.deny.clone()].concat(),
        };
        let sandbox = SandboxFlags {
            mode: match &request.sandbox {
                Some(mode) => Some(
                    mode.parse()
                        .map_err(|e| ApiError::bad_request(format!("sandbox: {e}")))?,
                ),
                None => allowed.sandbox.mode,
            },
            network: request.network.or(allowed.sandbox.network),
        };
        let budget = match &request.budget {
            Some(budget) => budget.flags()?,
            None => BudgetFlags::default(),
        };
        let flags = pod_launch::Flags {
            model,
            budget,
            approval,
            sandbox,
            until_done,
            // Checks by the names the server's config gives them: an API
            // client never names a command to run.
            goal: pod_launch::goal::GoalFlags {
                verify: Vec::new(),
                checks: request.verify.clone(),
                max_rounds: request.max_verify,
                grader: request.grader.clone(),
                rubric: request.rubric.clone(),
            },
            agent: request.agent.clone(),
            // An API client never names commands to run: the server's
            // config file's hooks apply. Nor instruction files: the
            // server's config and the workspace's AGENTS.md apply.
            ..Default::default()
        };
        let mut plan = self
            .launcher
            .plan(&flags, workspace)
            .map_err(|e| ApiError::bad_request(chain(&e)))?;
        if let Some(agent) = &request.as_agent {
            plan.prompt.agent = Some(agent.clone());
        }
        allowed
            .ceiling
            .check(&plan.settings)
            .map_err(ApiError::forbidden)?;
        Ok(plan)
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

    /// Answers question `question` of `session`, parked on it (nothing
    /// waits in a process: the log holds the question), then continues the
    /// session here: the call runs with the answer.
    pub async fn answer_parked(
        &self,
        session: Uuid,
        question: &pod::log::QuestionRecord,
        bound: &Binding,
        decision: ApprovalDecision,
        by: &pod::questions::Answerer,
    ) -> Result<(), ApiError> {
        let asked = PendingApproval::parked(session, question);
        if let Some(mismatch) = bound.mismatch(&asked) {
            return Err(ApiError::conflict(format!(
                "approval {} is for {mismatch}; nothing was answered",
                question.id
            )));
        }
        let store = self.launcher.place().store.clone();
        match pod::questions::answer(&store, session, question.id, decision, by, PARKING_WAIT).await
        {
            // A fleet worker continues it.
            Ok(answered) if answered.queued => return Ok(()),
            Ok(_) => {}
            Err(err @ (PodError::AlreadyAnswered { .. } | PodError::QuestionWithdrawn { .. })) => {
                return Err(ApiError::conflict(chain(&err)))
            }
            Err(PodError::SessionBusy { .. } | PodError::SessionLeased { .. }) => {
                return Err(ApiError::conflict(format!(
                    "session {session} is open in another process, which asks the question \
                     itself: answer it there"
                )))
            }
            Err(err) => return Err(ApiError::internal(chain(&err))),
        }
        self.continue_parked(session).await
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

    /// The calls waiting for an answer, oldest first.
    pub fn approvals(&self) -> Vec<PendingApproval> {
        let state = self.state.lock();
        state.approvals.iter().map(|w| w.approval.clone()).collect()
    }

    /// Whether approval `id` waits in this process (a subagent's).
    pub fn has_live_approval(&self, id: Uuid) -> bool {
        self.state
            .lock()
            .approvals
            .iter()
            .any(|w| w.approval.id == id)
    }

    /// Answers approval `approval`, if it still waits and is the question
    /// `bound` names (when it names one): an answer meant for another
    /// question, or for one no longer asked, is a conflict.
    pub fn answer(
        &self,
        approval: Uuid,
        bound: &Binding,
        decision: ApprovalDecision,
    ) -> Result<(), ApiError> {
        let waiting = {
            let mut state = self.state.lock();
            let Some(at) = state
                .approvals
                .iter()
                .position(|w| w.approval.id == approval)
            else {
                return Err(ApiError::conflict(format!(
                    "approval {approval} is not waiting: it was answered, withdrawn, or asked \
                     before this server restarted"
                )));
            };
            let asked = &state.approvals[at].approval;
            if let Some(mismatch) = bound.mismatch(asked) {
                return Err(ApiError::conflict(format!(
                    "approval {approval} is for {mismatch}; nothing was answered"
                )));
            }
            state.approvals.remove(at)
        };
        waiting
            .reply
            .send(decision)
            .map_err(|_| ApiError::conflict("the turn stopped waiting for this answer (cancelled)"))
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
            let live = loop {
                let result = match prompt.take() {
                    Some(text) => handle.prompt(text).await,
                    None => handle.continue_turn().await,
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
            }
        });
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
        // A session recorded with more than this server allows (started by
        // `pod run --yes`, say) is not run here with it.
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
            })?;
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

    /// An approver whose questions the API lists, for session `id`.
    pub fn approver(&self, id: Uuid) -> Arc<dyn Approver> {
        let cell = Arc::new(Mutex::new(Some(id)));
        self.approver_for_new(&cell)
    }

    fn approver_for_new(&self, id: &Arc<Mutex<Option<Uuid>>>) -> Arc<dyn Approver> {
        Arc::new(HttpApprover {
            session: Arc::clone(id),
            state: Arc::clone(&self.state),
        })
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

/// Puts questions where the API lists them and waits for an answer.
struct HttpApprover {
    // Set once the session exists (its first question comes after).
    session: Arc<Mutex<Option<Uuid>>>,
    state: Arc<Mutex<State>>,
}

#[async_trait::async_trait]
impl Approver for HttpApprover {
    async fn decide(
        &self,
        request: ApprovalRequest,
        cancel: CancellationToken,
    ) -> ApprovalDecision {
        // A session's own question parks it: the question is in its log,
        // the API lists it from there, and waiting holds nothing. A
        // subagent's cannot park (its parent's call would move on): it
        // waits here, listed from memory.
        if request.subagent.is_none() {
            return ApprovalDecision::Later;
        }
        let session_id = (*self.session.lock()).unwrap_or_default();
        let (reply, answer) = oneshot::channel();
        let id = Uuid::new_v4();
        self.state.lock().approvals.push(Waiting {
            approval: PendingApproval {
                id,
                session_id,
                request,
                asked_at: Utc::now(),
                expires_at: None,
                parked: false,
            },
            reply,
        });
        tokio::select! {
            answer = answer => answer.unwrap_or(ApprovalDecision::Cancelled),
            _ = cancel.cancelled() => {
                // Withdrawn: the API no longer lists it.
                self.state.lock().approvals.retain(|w| w.approval.id != id);
                ApprovalDecision::Cancelled
            }
        }
    }

    fn answerer(&self) -> pod::questions::Answerer {
        pod::questions::Answerer::via("http")
    }
}
