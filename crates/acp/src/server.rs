//! The connection: one handler per ACP method, each answering at once or
//! handing its work to a spawned task so the ordered dispatch loop never
//! waits on a turn, a Pod or the client.

use crate::error::AcpError;
use crate::factory::PodFactory;
use crate::sessions::Sessions;
use crate::{session, turn};
use agent_client_protocol::schema::ProtocolVersion;
use agent_client_protocol::v1::schema::{
    AgentCapabilities, CancelNotification, Implementation, InitializeRequest, InitializeResponse,
    LoadSessionRequest, McpCapabilities, NewSessionRequest, PromptCapabilities, PromptRequest,
};
use agent_client_protocol::{on_receive_notification, on_receive_request, Agent};
use std::sync::Arc;
use tokio::io::{AsyncRead, AsyncWrite};

/// The name this agent gives in `initialize`.
pub const AGENT_NAME: &str = "pod";

/// Serves ACP v1 on `input`/`output` (newline-delimited JSON-RPC) until
/// `input` ends, then shuts every Pod down (running turns are cancelled,
/// logs synced) and returns.
pub async fn serve<F, R, W>(factory: F, input: R, output: W) -> Result<(), AcpError>
where
    F: PodFactory,
    R: AsyncRead + Send + 'static,
    W: AsyncWrite + Send + 'static,
{
    let factory: Arc<dyn PodFactory> = Arc::new(factory);
    let sessions = Sessions::default();
    let transport = crate::pipeline::lines(input, output);
    let (new_factory, new_sessions) = (factory.clone(), sessions.clone());
    let (load_factory, load_sessions) = (factory, sessions.clone());
    let (prompt_sessions, cancel_sessions) = (sessions.clone(), sessions.clone());
    Agent
        .v1()
        .name(AGENT_NAME)
        .on_receive_request(
            async |request: InitializeRequest, responder, _cx| {
                tracing::info!(client = ?request.client_info, "initialize");
                responder.respond(initialize_response())
            },
            on_receive_request!(),
        )
        .on_receive_request(
            async move |request: NewSessionRequest, responder, cx| {
                let task = session::open_new(
                    request,
                    responder,
                    cx.clone(),
                    new_factory.clone(),
                    new_sessions.clone(),
                );
                cx.spawn(task)
            },
            on_receive_request!(),
        )
        .on_receive_request(
            async move |request: LoadSessionRequest, responder, cx| {
                let task = session::load(
                    request,
                    responder,
                    cx.clone(),
                    load_factory.clone(),
                    load_sessions.clone(),
                );
                cx.spawn(task)
            },
            on_receive_request!(),
        )
        .on_receive_request(
            async move |request: PromptRequest, responder, cx| {
                turn::start(request, responder, &cx, &prompt_sessions)
            },
            on_receive_request!(),
        )
        .on_receive_notification(
            async move |notification: CancelNotification, _cx| {
                tracing::info!(session = %notification.session_id, "session/cancel");
                cancel_sessions.cancel(&notification.session_id.0);
                Ok(())
            },
            on_receive_notification!(),
        )
        .connect_with(transport, async |cx| {
            cx.incoming_closed().await;
            shutdown(&sessions).await;
            Ok(())
        })
        .await?;
    Ok(())
}

fn initialize_response() -> InitializeResponse {
    InitializeResponse::new(ProtocolVersion::V1)
        .agent_capabilities(
            AgentCapabilities::new()
                .load_session(true)
                // Text and resource links are the baseline; embedded text
                // resources are inlined. Images and audio are refused.
                .prompt_capabilities(PromptCapabilities::new().embedded_context(true))
                // The editor's MCP servers: stdio (always) and streamable
                // HTTP; not the deprecated SSE transport.
                .mcp_capabilities(McpCapabilities::new().http(true)),
        )
        .agent_info(Implementation::new(AGENT_NAME, env!("CARGO_PKG_VERSION")).title("pod"))
}

/// Stops every Pod: running turns are cancelled and every log is synced
/// before this returns.
async fn shutdown(sessions: &Sessions) {
    let open = sessions.drain();
    tracing::info!(sessions = open.len(), "input closed; shutting pods down");
    for session in open {
        let result = session.handle.shutdown().await;
        session.mcp.shutdown().await;
        if let Err(err) = result {
            tracing::warn!(%err, id = %session.handle.session_id(), "pod shutdown failed");
        }
    }
}
