//! `session/prompt`: a turn runs in a spawned task; the session's forwarder
//! answers once the turn's updates are out.

use crate::control::Control;
use crate::prompt::prompt_text;
use crate::session::not_found;
use crate::sessions::{BeginError, Sessions};
use crate::translate;
use agent_client_protocol::v1::schema::{PromptRequest, PromptResponse, StopReason};
use agent_client_protocol::v1::{ConnectionTo, Responder};
use agent_client_protocol::{Client, Error, ErrorCode};
use pod::PodError;
use pod_worker::TurnOutcome;

/// Starts the turn of a `session/prompt`, without waiting for it.
pub fn start(
    request: PromptRequest,
    responder: Responder<PromptResponse>,
    cx: &ConnectionTo<Client>,
    sessions: &Sessions,
) -> Result<(), Error> {
    let id = request.session_id.0.to_string();
    let text = match prompt_text(&request.prompt) {
        Ok(text) => text,
        Err(err) => {
            return responder
                .respond_with_error(Error::new(ErrorCode::INVALID_PARAMS, err.to_string()))
        }
    };
    let (session, cancel) = match sessions.begin_turn(&id) {
        Ok(started) => started,
        Err(err @ BeginError::Unknown(_)) => {
            return responder.respond_with_error(not_found(&request.session_id, err.to_string()))
        }
        Err(err @ BeginError::Busy(_)) => {
            return responder
                .respond_with_error(Error::new(ErrorCode::INVALID_REQUEST, err.to_string()))
        }
    };
    tracing::info!(%id, "session/prompt");
    let sessions = sessions.clone();
    cx.spawn(async move {
        let handle = &session.handle;
        let prompt = handle.prompt(text);
        tokio::pin!(prompt);
        let result = tokio::select! {
            // The prompt goes first so it is in the Pod's mailbox before any
            // cancel: a cancel that arrives early still cancels this turn.
            biased;
            result = &mut prompt => result,
            _ = cancel.cancelled() => {
                if let Err(err) = handle.cancel().await {
                    tracing::warn!(%err, "cannot cancel the turn");
                }
                prompt.await
            }
        };
        sessions.end_turn(&id);
        let answer = answer(result, cancel.is_cancelled());
        if let Err(unsent) = session
            .control
            .send(Control::Finish { answer, responder })
            .await
        {
            // The session is gone (shutdown): answer directly.
            if let Control::Finish { answer, responder } = unsent.0 {
                let _ = match answer {
                    Ok(reason) => responder.respond(PromptResponse::new(reason)),
                    Err(err) => responder.respond_with_error(err),
                };
            }
        }
        Ok(())
    })
}

/// The answer to a prompt. A cancelled prompt answers `cancelled` whatever
/// the turn ran into, as ACP requires: an error, or an abort because its
/// pending permission request was withdrawn.
fn answer(result: Result<TurnOutcome, PodError>, cancelled: bool) -> Result<StopReason, Error> {
    match result {
        _ if cancelled => Ok(StopReason::Cancelled),
        Ok(outcome) => {
            if let Some(detail) = detail(&outcome.reason) {
                tracing::info!(%detail, "turn stopped by the pod");
            }
            Ok(translate::stop_reason(&outcome.reason))
        }
        Err(err) => Err(Error::new(ErrorCode::INTERNAL_ERROR, err.to_string())),
    }
}

fn detail(reason: &pod_worker::TurnEndReason) -> Option<&str> {
    use pod_worker::TurnEndReason::*;
    match reason {
        Aborted(detail) | Paused(detail) | Rejected(detail) => Some(detail),
        _ => None,
    }
}
