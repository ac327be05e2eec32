//! A child's questions go to its parent's approver, labelled with the child.

use crate::approval::{ApprovalDecision, ApprovalRequest, Approver, SubagentLabel};
use std::sync::Arc;
use tokio_util::sync::CancellationToken;

/// Asks the parent's approver, saying which subagent asks.
pub(crate) struct ChildApprover {
    pub parent: Arc<dyn Approver>,
    pub label: SubagentLabel,
}

#[async_trait::async_trait]
impl Approver for ChildApprover {
    async fn decide(
        &self,
        mut request: ApprovalRequest,
        cancel: CancellationToken,
    ) -> ApprovalDecision {
        // A grandchild's question passes through its parent's approver
        // first: the innermost label names the one that asks.
        if request.subagent.is_none() {
            request.subagent = Some(self.label.clone());
        }
        self.parent.decide(request, cancel).await
    }

    fn answerer(&self) -> crate::questions::Answerer {
        self.parent.answerer()
    }
}
