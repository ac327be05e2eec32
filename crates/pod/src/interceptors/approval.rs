//! The approval policy as an interceptor: every tool call passes the
//! session's [`ApprovalGate`], which may ask the front end; a question is
//! withdrawn when the run is cancelled.

use crate::gate::ApprovalGate;
use async_trait::async_trait;
use pod_worker::{Interceptor, PreToolAction, RunStart, ToolCallInfo};
use tokio_util::sync::CancellationToken;

/// Applies the approval policy in `pre_tool_call`.
pub struct Approval {
    gate: ApprovalGate,
    cancel: CancellationToken,
}

impl Approval {
    /// Checks every call with `gate`.
    pub fn new(gate: ApprovalGate) -> Self {
        Self {
            gate,
            cancel: CancellationToken::new(),
        }
    }
}

#[async_trait]
impl Interceptor for Approval {
    async fn on_run_start(&mut self, run: &RunStart<'_>) {
        self.cancel = run.cancel.clone();
    }

    async fn pre_tool_call(&mut self, call: &mut ToolCallInfo) -> PreToolAction {
        self.gate
            .check(&call.call_id, &call.name, &call.arguments, &self.cancel)
            .await
    }
}
