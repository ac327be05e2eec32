//! The approval policy as an interceptor: every tool call passes the
//! session's [`ApprovalGate`], which may ask the front end; a question is
//! withdrawn when the run is cancelled.

use crate::gate::ApprovalGate;
use crate::hooks::HookVerdicts;
use crate::log::HookDecision;
use async_trait::async_trait;
use pod_worker::{Interceptor, PreToolAction, RunStart, ToolCallInfo};
use tokio_util::sync::CancellationToken;

/// Applies the approval policy in `pre_tool_call`.
pub struct Approval {
    gate: ApprovalGate,
    cancel: CancellationToken,
    // What the operator's PreToolUse hooks said about calls.
    hooks: HookVerdicts,
}

impl Approval {
    /// Checks every call with `gate`.
    pub fn new(gate: ApprovalGate) -> Self {
        Self {
            gate,
            cancel: CancellationToken::new(),
            hooks: HookVerdicts::default(),
        }
    }

    /// Takes what hooks said about a call into account: `allow` runs it
    /// without a question, `ask` asks whatever the policy says; a tool the
    /// policy denies stays denied.
    pub(crate) fn with_hooks(mut self, hooks: HookVerdicts) -> Self {
        self.hooks = hooks;
        self
    }
}

#[async_trait]
impl Interceptor for Approval {
    async fn on_run_start(&mut self, run: &RunStart<'_>) {
        self.cancel = run.cancel.clone();
    }

    async fn pre_tool_call(&mut self, call: &mut ToolCallInfo) -> PreToolAction {
        let (action, allowed) = match self.hooks.take(&call.call_id) {
            // A client's tool is never run here: its client answers it.
            Some(HookDecision::Allow) if !self.gate.runs_on_client(&call.name) => {
                (self.gate.check_allowed(&call.name), true)
            }
            Some(HookDecision::Ask) => (
                self.gate
                    .check_asking(&call.call_id, &call.name, &call.arguments, &self.cancel)
                    .await,
                false,
            ),
            _ => (
                self.gate
                    .check(&call.call_id, &call.name, &call.arguments, &self.cancel)
                    .await,
                false,
            ),
        };
        if let PreToolAction::Skip(text) = &action {
            // A call a hook allowed is refused only by the policy.
            let by = match allowed {
                true => crate::events::NotRunBy::Policy,
                false => self.gate.refused(),
            };
            self.gate.tell_refused(call, by, text);
        }
        action
    }
}
