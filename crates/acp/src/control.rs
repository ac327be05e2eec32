//! What reaches a session's forwarder besides Pod events: a prompt's end
//! and a permission question. A leaf between the forwarder, the approver
//! that asks and the turn that finishes.

use agent_client_protocol::v1::schema::{PromptResponse, StopReason};
use agent_client_protocol::v1::Responder;
use pod::{ApprovalDecision, ApprovalRequest};
use tokio::sync::oneshot;
use tokio_util::sync::CancellationToken;

/// Commands a session's forwarder takes besides Pod events.
// A handful of commands per turn through a channel of eight: boxing the
// prompt's responder would save nothing worth the indirection.
#[allow(clippy::large_enum_variant)]
pub enum Control {
    /// A prompt's turn is over: answer it after every event emitted before.
    Finish {
        /// The stop reason, or the error to answer with.
        answer: Result<StopReason, agent_client_protocol::Error>,
        /// Where the answer goes.
        responder: Responder<PromptResponse>,
    },
    /// The approval policy asks about a call: send what came before,
    /// announce the call, then ask the client.
    Permission(Question),
}

/// A question on its way to the forwarder.
pub struct Question {
    /// The call waiting for the answer.
    pub request: ApprovalRequest,
    /// The prompt's token: cancelling it withdraws the question.
    pub cancel: CancellationToken,
    /// Where the decision goes.
    pub reply: oneshot::Sender<ApprovalDecision>,
}
