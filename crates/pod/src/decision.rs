//! A person's answer to a question: a leaf, shared by the approval
//! policy, the questions, the log and the errors.

use serde::{Deserialize, Serialize};

/// The user's answer to an [`ApprovalRequest`](crate::ApprovalRequest).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ApprovalDecision {
    /// Run this call.
    AllowOnce,
    /// Run this call and every later call of this tool in the session.
    AllowAlways,
    /// Refuse this call.
    RejectOnce,
    /// Refuse this call and every later call of this tool in the session.
    RejectAlways,
    /// No answer (the prompt was dismissed or the turn cancelled): the turn
    /// ends as aborted.
    Cancelled,
    /// No answer now: the question stays open in the session's log and the
    /// turn parks at the call, to continue once an answer is recorded
    /// (`pod approve`, the HTTP API). For front ends where waiting must cost
    /// nothing (a server, a fleet worker).
    Later,
}

impl ApprovalDecision {
    /// The name used in the API, the CLI and the log.
    pub fn as_str(self) -> &'static str {
        match self {
            ApprovalDecision::AllowOnce => "allow_once",
            ApprovalDecision::AllowAlways => "allow_always",
            ApprovalDecision::RejectOnce => "reject_once",
            ApprovalDecision::RejectAlways => "reject_always",
            ApprovalDecision::Cancelled => "cancelled",
            ApprovalDecision::Later => "later",
        }
    }
}
