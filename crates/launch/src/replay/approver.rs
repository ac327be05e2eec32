//! What a replay does where the recording met a person or a crash: each
//! question is answered as it was, and a call the crash cut short gets
//! the result its resume gave it instead of running.

use super::Recorded;
use pod::log::LogRecord;
use pod::questions::Answerer;
use pod::replay::INTERRUPTED_RESULT;
use pod::{ApprovalDecision, ApprovalRequest, Approver, CancellationToken};
use pod_llm::ItemKind;
use pod_worker::{Interceptor, PreToolAction, ToolCallInfo};
use std::collections::{HashMap, HashSet};
use uuid::Uuid;

/// The question a recording asked, by what it asked about: the call, its
/// tool and arguments (the replay makes the same calls with the same ids,
/// and the arguments tell a subagent's `call_1` from its parent's).
type Asked = (String, String, String);

/// Answers questions with the recording's decisions.
pub(crate) struct ReplayApprover {
    decisions: HashMap<Asked, ApprovalDecision>,
}

impl ReplayApprover {
    /// The decisions of every question `sessions` recorded. A question the
    /// recording left open (parked, or cut by a crash) is answered
    /// "later": the replay parks there too. None when the recording asked
    /// nothing: it may have had nobody to ask (`pod run` without a
    /// terminal refuses `ask` calls without a question), and the replay
    /// then refuses them the same way.
    pub fn of<'a>(sessions: impl IntoIterator<Item = &'a Recorded>) -> Option<Self> {
        let mut asked: HashMap<Uuid, Asked> = HashMap::new();
        let mut decisions = HashMap::new();
        for record in sessions.into_iter().flat_map(|s| &s.records) {
            match record {
                LogRecord::Question(question) => {
                    let request = &question.request;
                    let key = (
                        request.call_id.clone(),
                        request.tool.clone(),
                        request.arguments.clone(),
                    );
                    decisions.insert(key.clone(), ApprovalDecision::Later);
                    asked.insert(question.id, key);
                }
                LogRecord::Answer(answer) => {
                    if let Some(key) = asked.get(&answer.question) {
                        decisions.insert(key.clone(), answer.decision);
                    }
                }
                _ => {}
            }
        }
        (!decisions.is_empty()).then_some(Self { decisions })
    }
}

#[pod::async_trait]
impl Approver for ReplayApprover {
    async fn decide(&self, request: ApprovalRequest, _: CancellationToken) -> ApprovalDecision {
        let key = (request.call_id, request.tool, request.arguments);
        // A question the recording never asked: refused, and the question
        // itself is where the replay differs.
        self.decisions
            .get(&key)
            .copied()
            .unwrap_or(ApprovalDecision::RejectOnce)
    }

    fn answerer(&self) -> Answerer {
        Answerer::via("replay")
    }
}

/// The calls of `records` a crash cut short: the ones its resume answered
/// with [`INTERRUPTED_RESULT`].
pub(crate) fn interrupted_calls(records: &[LogRecord]) -> Vec<String> {
    records
        .iter()
        .filter_map(|record| match record {
            LogRecord::Item(item) => match &item.kind {
                ItemKind::ToolResult {
                    call_id, content, ..
                } if content == INTERRUPTED_RESULT => Some(call_id.clone()),
                _ => None,
            },
            _ => None,
        })
        .collect()
}

/// Gives the calls a crash cut short the result the resume gave them,
/// without running them: the crash is not replayed, its outcome is.
pub(crate) struct Interrupted {
    pub calls: HashSet<String>,
}

#[pod::async_trait]
impl Interceptor for Interrupted {
    async fn pre_tool_call(&mut self, call: &mut ToolCallInfo) -> PreToolAction {
        match self.calls.contains(&call.call_id) {
            true => PreToolAction::Skip(INTERRUPTED_RESULT.into()),
            false => PreToolAction::Continue,
        }
    }
}
