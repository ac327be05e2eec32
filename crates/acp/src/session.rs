//! `session/new` and `session/load`: opening a Pod and its forwarder.

use crate::factory::PodFactory;
use crate::forward::{self, Control};
use crate::permission::SessionApprover;
use crate::replay::replay_updates;
use crate::sessions::{Session, Sessions, TurnSlot};
use crate::updates::Updates;
use agent_client_protocol::v1::schema::{
    ContentChunk, LoadSessionRequest, LoadSessionResponse, NewSessionRequest, NewSessionResponse,
    SessionId, SessionUpdate,
};
use agent_client_protocol::v1::{ConnectionTo, Responder};
use agent_client_protocol::{Client, Error, ErrorCode};
use pod::{Pod, PodConfig, PodError, PodHandle};
use std::path::Path;
use std::sync::Arc;
use tokio::sync::mpsc;
use uuid::Uuid;

// Events buffered per session before the forwarder lags. The forwarder only
// queues notifications, so it keeps up; this covers a burst of deltas while
// it waits for the runtime.
const EVENT_CAPACITY: usize = 1024;

// Commands to a session's forwarder: at most one prompt answer and one
// permission question at a time (a turn asks about one call at a time);
// senders wait when it is full.
const CONTROL_CAPACITY: usize = 8;

/// Answers `session/new`: spawns a Pod working in `cwd`.
pub async fn open_new(
    request: NewSessionRequest,
    responder: Responder<NewSessionResponse>,
    cx: ConnectionTo<Client>,
    factory: Arc<dyn PodFactory>,
    sessions: Sessions,
) -> Result<(), Error> {
    let answer = async {
        check_workspace(&request.cwd)?;
        let mut config = factory
            .new_session(&request.cwd)
            .await
            .map_err(|err| config_error(&*err))?;
        let (servers, skipped) = crate::mcp::servers(&request.mcp_servers);
        let (mcp, mut problems) = crate::mcp::attach(servers, &mut config).await;
        problems.extend(skipped);
        let wiring = Wiring::new();
        let handle = Pod::spawn(wiring.configure(config))
            .await
            .map_err(|err| pod_error(&err))?;
        let id = handle.session_id().to_string();
        tracing::info!(%id, cwd = %request.cwd.display(), servers = mcp.servers().count(), "session/new");
        open(&cx, &sessions, handle, wiring, mcp, problems);
        Ok(NewSessionResponse::new(id))
    };
    respond(responder, answer.await)
}

/// Answers `session/load`: resumes the Pod from its log, replays the
/// conversation and the plan, then answers.
pub async fn load(
    request: LoadSessionRequest,
    responder: Responder<LoadSessionResponse>,
    cx: ConnectionTo<Client>,
    factory: Arc<dyn PodFactory>,
    sessions: Sessions,
) -> Result<(), Error> {
    let answer = async {
        let id = request.session_id.0.to_string();
        tracing::info!(%id, "session/load");
        let (handle, fresh) = match sessions.get(&id) {
            Some(open) => (open.handle, None),
            None => {
                let uuid = Uuid::parse_str(&id).map_err(|_| {
                    not_found(
                        &request.session_id,
                        format!("no session {id}: not a pod session id"),
                    )
                })?;
                check_workspace(&request.cwd)?;
                let mut config = factory
                    .resume_session(uuid, &request.cwd)
                    .await
                    .map_err(|err| config_error(&*err))?;
                let (servers, skipped) = crate::mcp::servers(&request.mcp_servers);
                let (mcp, mut problems) = crate::mcp::attach(servers, &mut config).await;
                problems.extend(skipped);
                let wiring = Wiring::new();
                let handle = Pod::resume(uuid, wiring.configure(config))
                    .await
                    .map_err(|err| match err {
                        PodError::NoSuchSession { .. } => {
                            not_found(&request.session_id, err.to_string())
                        }
                        err => pod_error(&err),
                    })?;
                (handle, Some((wiring, mcp, problems)))
            }
        };
        let history = handle.get_history().await.map_err(|e| pod_error(&e))?;
        let todos = handle.get_todos().await.map_err(|e| pod_error(&e))?;
        let updates = Updates::new(cx.clone(), request.session_id.clone());
        for update in replay_updates(&history, &todos) {
            updates.send(update);
        }
        if let Some((wiring, mcp, problems)) = fresh {
            open(&cx, &sessions, handle, wiring, mcp, problems);
        }
        Ok(LoadSessionResponse::new())
    };
    respond(responder, answer.await)
}

/// A session's channels, made before its Pod so that the Pod's approver
/// can reach the forwarder.
struct Wiring {
    control: mpsc::Sender<Control>,
    control_rx: mpsc::Receiver<Control>,
    turn: TurnSlot,
}

impl Wiring {
    fn new() -> Self {
        let (control, control_rx) = mpsc::channel(CONTROL_CAPACITY);
        Self {
            control,
            control_rx,
            turn: TurnSlot::default(),
        }
    }

    /// The session's config: room for bursts of events, and the client as
    /// the approver of `ask` tools (the policy itself is the factory's).
    fn configure(&self, mut config: PodConfig) -> PodConfig {
        config.event_capacity = config.event_capacity.max(EVENT_CAPACITY);
        config.approver = Some(Arc::new(SessionApprover::new(self.control.clone())));
        config
    }
}

/// Registers a session and starts its forwarder; tells the editor, once,
/// about each MCP server that did not start.
fn open(
    cx: &ConnectionTo<Client>,
    sessions: &Sessions,
    handle: PodHandle,
    wiring: Wiring,
    mcp: pod_mcp::McpServers,
    problems: Vec<String>,
) {
    let id = handle.session_id().to_string();
    let events = handle.subscribe();
    let updates = Updates::new(cx.clone(), SessionId::new(id.clone()));
    for problem in problems {
        tracing::warn!(%id, %problem, "MCP server left out");
        updates.send(SessionUpdate::AgentMessageChunk(ContentChunk::new(
            crate::translate::text(&format!(
                "(pod: {problem}; the session goes on without its tools)\n"
            )),
        )));
    }
    let forwarder = forward::run(updates, handle.clone(), events, wiring.control_rx);
    if let Err(err) = cx.spawn(async move {
        forwarder.await;
        Ok(())
    }) {
        tracing::warn!(%err, "cannot start the session forwarder: the connection is closing");
    }
    let session = Session {
        handle,
        control: wiring.control,
        turn: wiring.turn,
        mcp: Arc::new(mcp),
    };
    sessions.insert(id, session);
}

fn respond<T: agent_client_protocol::JsonRpcResponse>(
    responder: Responder<T>,
    answer: Result<T, Error>,
) -> Result<(), Error> {
    let sent = match answer {
        Ok(response) => responder.respond(response),
        Err(err) => responder.respond_with_error(err),
    };
    if let Err(err) = sent {
        tracing::debug!(%err, "answer not sent: the connection is closing");
    }
    // A spawned task's error would end the connection; every failure above
    // went to the client instead.
    Ok(())
}

fn check_workspace(cwd: &Path) -> Result<(), Error> {
    if !cwd.is_absolute() || !cwd.is_dir() {
        return Err(Error::new(
            ErrorCode::INVALID_PARAMS,
            format!(
                "cwd {} is not an absolute path to a directory",
                cwd.display()
            ),
        ));
    }
    Ok(())
}

/// A session that does not exist (ACP's `-32002` with `data.sessionId`).
pub fn not_found(id: &SessionId, message: String) -> Error {
    Error::new(ErrorCode::RESOURCE_NOT_FOUND, message).data(serde_json::json!({ "sessionId": id }))
}

fn config_error(err: &(dyn std::error::Error + Send + Sync)) -> Error {
    Error::new(
        ErrorCode::INTERNAL_ERROR,
        format!("cannot configure the model: {err}"),
    )
}

fn pod_error(err: &PodError) -> Error {
    Error::new(ErrorCode::INTERNAL_ERROR, err.to_string())
}
