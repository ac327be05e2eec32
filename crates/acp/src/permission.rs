//! `session/request_permission`: each session's [`Approver`].
//!
//! When the approval policy says `ask`, the Pod's `pre_tool_call` calls
//! [`SessionApprover::decide`]. The question goes to the session's
//! forwarder, which sends every update emitted so far, announces the call as
//! a `pending` `tool_call` (so the editor shows what it is asked about), and
//! sends the request; a task spawned on the connection awaits the client's
//! answer, so neither the dispatch loop nor the forwarder waits on the user.
//! The run's cancellation token, which the Pod hands to every question,
//! resolves a pending question as [`ApprovalDecision::Cancelled`]
//! (`session/cancel` cancels the run).

use crate::control::{Control, Question};
use crate::translate;
use crate::updates::Updates;
use agent_client_protocol::v1::schema::{
    PermissionOption, PermissionOptionKind, RequestPermissionOutcome, RequestPermissionRequest,
    RequestPermissionResponse, ToolCallStatus,
};
use pod::{ApprovalDecision, ApprovalRequest, Approver};
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;

/// The options offered with every request: (option id, label, kind, decision).
/// The ids are ACP's kind names, so a client's answer maps back by id alone.
const OPTIONS: [(&str, &str, PermissionOptionKind, ApprovalDecision); 4] = [
    (
        "allow_once",
        "Allow once",
        PermissionOptionKind::AllowOnce,
        ApprovalDecision::AllowOnce,
    ),
    (
        "allow_always",
        "Always allow this tool",
        PermissionOptionKind::AllowAlways,
        ApprovalDecision::AllowAlways,
    ),
    (
        "reject_once",
        "Reject",
        PermissionOptionKind::RejectOnce,
        ApprovalDecision::RejectOnce,
    ),
    (
        "reject_always",
        "Always reject this tool",
        PermissionOptionKind::RejectAlways,
        ApprovalDecision::RejectAlways,
    ),
];

/// Asks the client about `ask` tools of one session.
pub struct SessionApprover {
    control: mpsc::Sender<Control>,
}

impl SessionApprover {
    /// An approver asking through the forwarder behind `control`.
    pub fn new(control: mpsc::Sender<Control>) -> Self {
        Self { control }
    }
}

#[async_trait::async_trait]
impl Approver for SessionApprover {
    async fn decide(
        &self,
        request: ApprovalRequest,
        cancel: CancellationToken,
    ) -> ApprovalDecision {
        if cancel.is_cancelled() {
            return ApprovalDecision::Cancelled;
        }
        let (reply, decision) = oneshot::channel();
        let question = Question {
            request,
            cancel,
            reply,
        };
        if self
            .control
            .send(Control::Permission(question))
            .await
            .is_err()
        {
            tracing::debug!("permission not asked: the session is closed");
            return ApprovalDecision::Cancelled;
        }
        // The asking task watches the cancel itself and replies only after
        // it withdrew the request, so the client hears of the withdrawal
        // before the prompt's answer. A dropped reply: the connection closed.
        decision.await.unwrap_or(ApprovalDecision::Cancelled)
    }

    fn answerer(&self) -> pod::questions::Answerer {
        pod::questions::Answerer::via("acp")
    }
}

/// Sends `question` to the client and spawns the task awaiting its answer.
/// Called by the forwarder after it announced the call, so the request
/// follows the announcement on the wire.
pub fn ask(updates: &Updates, question: Question) {
    let Question {
        request,
        cancel,
        reply,
    } = question;
    if cancel.is_cancelled() {
        // Cancelled while the question was on its way: do not ask at all.
        let _ = reply.send(ApprovalDecision::Cancelled);
        return;
    }
    tracing::info!(call = %request.call_id, tool = %request.tool, "session/request_permission");
    let connection = updates.connection();
    // Published here, in order after the updates already queued; only the
    // wait moves to a task.
    let sent = connection.send_request(permission_request(updates, &request));
    let task = async move {
        let answer = tokio::select! {
            biased;
            _ = cancel.cancelled() => None,
            answer = sent.block_task() => Some(answer),
        };
        // By now an unanswered request is dropped, which told the client to
        // withdraw it (`$/cancel_request`); a late answer is ignored.
        let decision = answer.map_or(ApprovalDecision::Cancelled, decision);
        // The Pod may be gone already (shut down): nobody to tell.
        let _ = reply.send(decision);
        Ok(())
    };
    if let Err(err) = connection.spawn(task) {
        // The reply is dropped with the task: the approver answers Cancelled.
        tracing::debug!(%err, "permission not asked: the connection is closing");
    }
}

/// The request for one call: the call as announced, and the four options.
fn permission_request(updates: &Updates, request: &ApprovalRequest) -> RequestPermissionRequest {
    let call = match &request.subagent {
        None => translate::tool_call(
            &request.call_id,
            &request.tool,
            &request.arguments,
            ToolCallStatus::Pending,
        ),
        // Call ids are unique within one session only: a subagent's is
        // qualified by its session, and the title says who asks.
        Some(agent) => {
            let id = format!("{}/{}", agent.session_id, request.call_id);
            let mut call = translate::tool_call(
                &id,
                &request.tool,
                &request.arguments,
                ToolCallStatus::Pending,
            );
            call.title = format!("[subagent {}] {}", agent.description, call.title);
            call
        }
    };
    let options = OPTIONS
        .iter()
        .map(|(id, name, kind, _)| PermissionOption::new(*id, *name, *kind))
        .collect();
    RequestPermissionRequest::new(updates.session_id().clone(), call.into(), options)
}

/// The decision a client's answer means. An error (the client failed or
/// refused to ask) rejects this call only: the model hears it was refused
/// and the turn goes on.
pub fn decision(
    answer: Result<RequestPermissionResponse, agent_client_protocol::Error>,
) -> ApprovalDecision {
    let outcome = match answer {
        Ok(response) => response.outcome,
        Err(err) => {
            tracing::warn!(%err, "session/request_permission failed; rejecting the call once");
            return ApprovalDecision::RejectOnce;
        }
    };
    match outcome {
        RequestPermissionOutcome::Cancelled => ApprovalDecision::Cancelled,
        RequestPermissionOutcome::Selected(selected) => OPTIONS
            .iter()
            .find(|(id, ..)| **id == *selected.option_id.0)
            .map(|(.., decision)| *decision)
            .unwrap_or_else(|| {
                tracing::warn!(option = %selected.option_id.0, "unknown permission option; rejecting the call once");
                ApprovalDecision::RejectOnce
            }),
        // A later protocol's outcome this version cannot read: the safe side.
        _ => {
            tracing::warn!(?outcome, "unknown permission outcome; rejecting the call once");
            ApprovalDecision::RejectOnce
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use agent_client_protocol::v1::schema::SelectedPermissionOutcome;
    use agent_client_protocol::ErrorCode;

    fn selected(id: &str) -> Result<RequestPermissionResponse, agent_client_protocol::Error> {
        Ok(RequestPermissionResponse::new(
            RequestPermissionOutcome::Selected(SelectedPermissionOutcome::new(id.to_string())),
        ))
    }

    #[test]
    fn each_option_maps_to_its_decision() {
        assert_eq!(
            decision(selected("allow_once")),
            ApprovalDecision::AllowOnce
        );
        assert_eq!(
            decision(selected("allow_always")),
            ApprovalDecision::AllowAlways
        );
        assert_eq!(
            decision(selected("reject_once")),
            ApprovalDecision::RejectOnce
        );
        assert_eq!(
            decision(selected("reject_always")),
            ApprovalDecision::RejectAlways
        );
    }

    #[test]
    fn cancelled_errors_and_unknown_options() {
        assert_eq!(
            decision(Ok(RequestPermissionResponse::new(
                RequestPermissionOutcome::Cancelled
            ))),
            ApprovalDecision::Cancelled
        );
        assert_eq!(
            decision(selected("yes_please")),
            ApprovalDecision::RejectOnce
        );
        let failed = agent_client_protocol::Error::new(ErrorCode::INTERNAL_ERROR, "no UI");
        assert_eq!(decision(Err(failed)), ApprovalDecision::RejectOnce);
    }

    #[test]
    fn option_kinds_match_their_ids() {
        for (id, _, kind, _) in OPTIONS {
            let wire = serde_json::to_value(kind).unwrap();
            assert_eq!(wire, id, "the id is the kind's wire name");
        }
    }
}
