//! `session/new` and `session/load`: opening a Pod and its forwarder.

use crate::control::Control;
use crate::factory::{PodFactory, Start, Started};
use crate::forward;
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
use pod::{PodError, PodHandle};
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
        let (servers, skipped) = crate::mcp::servers(&request.mcp_servers);
        let wiring = Wiring::new();
        let Started {
            handle,
            mcp,
            mut warnings,
        } = factory
            .new_session(wiring.start(&request.cwd, servers))
            .await
            .map_err(|err| start_error(&request.cwd, &*err))?;
        warnings.extend(skipped);
        let id = handle.session_id().to_string();
        tracing::info!(%id, cwd = %request.cwd.display(), servers = mcp.servers().count(), "session/new");
        open(&cx, &sessions, handle, wiring, mcp, warnings);
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
                let (servers, skipped) = crate::mcp::servers(&request.mcp_servers);
                let wiring = Wiring::new();
                let Started {
                    handle,
                    mcp,
                    mut warnings,
                } = factory
                    .resume_session(uuid, wiring.start(&request.cwd, servers))
                    .await
                    .map_err(|err| match missing(&*err) {
                        Some(missing) => not_found(&request.session_id, missing.to_string()),
                        None => start_error(&request.cwd, &*err),
                    })?;
                warnings.extend(skipped);
                (handle, Some((wiring, mcp, warnings)))
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

    /// What the session is started with: room for bursts of events, the
    /// editor's servers, and the client as the approver of `ask` tools
    /// (the policy itself is the factory's).
    fn start<'a>(&self, workspace: &'a Path, servers: Vec<pod_mcp::ServerConfig>) -> Start<'a> {
        Start {
            workspace,
            servers,
            approver: Arc::new(SessionApprover::new(self.control.clone())),
            event_capacity: EVENT_CAPACITY,
        }
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
            crate::translate::text(&format!("(pod: {problem})\n")),
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

/// The missing session in `err`'s chain, if that is why it failed.
fn missing<'a>(err: &'a (dyn std::error::Error + 'static)) -> Option<&'a PodError> {
    let mut cause: Option<&(dyn std::error::Error + 'static)> = Some(err);
    while let Some(err) = cause {
        if let Some(found @ PodError::NoSuchSession { .. }) = err.downcast_ref::<PodError>() {
            return Some(found);
        }
        cause = err.source();
    }
    None
}

fn start_error(cwd: &Path, err: &(dyn std::error::Error + Send + Sync + 'static)) -> Error {
    Error::new(
        ErrorCode::INTERNAL_ERROR,
        format!(
            "cannot start the session in {}: {}",
            cwd.display(),
            pod_llm::error_chain(err)
        ),
    )
}

fn pod_error(err: &PodError) -> Error {
    Error::new(ErrorCode::INTERNAL_ERROR, err.to_string())
}
