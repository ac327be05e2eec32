//! The interactive approver: the Pod's question travels to the drive loop,
//! which owns the screen, and is asked on stderr from a thread reading stdin.
//!
//! Going through the drive loop keeps the output in order (the events sent
//! before the question are printed first, the live checklist is not redrawn
//! over the prompt) and lets Ctrl-C answer [`ApprovalDecision::Cancelled`].

use super::prompt;
use pod::{ApprovalDecision, ApprovalRequest, Approver};
use tokio::sync::{mpsc, oneshot};

/// One question from the Pod and where its answer goes.
pub struct Ask {
    /// The call to decide about.
    pub request: ApprovalRequest,
    /// The answer; dropping it answers `Cancelled`.
    pub reply: oneshot::Sender<ApprovalDecision>,
}

/// The Pod's side: sends each question to the drive loop.
pub struct TerminalApprover {
    asks: mpsc::Sender<Ask>,
}

/// A connected approver and the drive loop's receiver of its questions.
pub fn channel() -> (TerminalApprover, mpsc::Receiver<Ask>) {
    // The Pod waits for each answer before it asks again: one slot is enough.
    let (asks, receiver) = mpsc::channel(1);
    (TerminalApprover { asks }, receiver)
}

#[async_trait::async_trait]
impl Approver for TerminalApprover {
    async fn decide(&self, request: ApprovalRequest) -> ApprovalDecision {
        let (reply, answer) = oneshot::channel();
        if self.asks.send(Ask { request, reply }).await.is_err() {
            // Nobody is driving any more: nobody can say yes.
            return ApprovalDecision::Cancelled;
        }
        answer.await.unwrap_or(ApprovalDecision::Cancelled)
    }
}

/// Asks `request` on the real stderr, reading stdin, on a thread of its own.
///
/// A plain thread, not `spawn_blocking`: after Ctrl-C the read stays
/// blocked, and a detached thread does not keep the process (or the tokio
/// runtime's shutdown) waiting for it.
pub fn prompt_on_terminal(request: ApprovalRequest) -> oneshot::Receiver<ApprovalDecision> {
    let (reply, answer) = oneshot::channel();
    let spawned = std::thread::Builder::new()
        .name("pod-approval-prompt".into())
        .spawn(move || {
            let decision = prompt::ask(
                &request,
                &mut std::io::stdin().lock(),
                &mut std::io::stderr().lock(),
            );
            let _ = reply.send(decision);
        });
    // Without a thread the reply is dropped, which reads as `Cancelled`.
    if let Err(err) = spawned {
        tracing::warn!(%err, "cannot start the approval prompt");
    }
    answer
}
