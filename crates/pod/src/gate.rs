//! The approval gate: what `pre_tool_call` consults. It applies the
//! session's [`ApprovalPolicy`], asks the front end's [`Approver`] about
//! `ask` tools, and keeps every question and answer in the session log
//! before anything else happens, so a question survives any crash and is
//! answered exactly once.
//!
//! For an `ask` call it acts, in order, on: an answer recorded while the
//! session was parked (recorded again, acted on, before the call runs); an
//! open question from before a restart (asked again, not recorded again);
//! else a new question (recorded, then asked). A question past its timeout
//! is answered "no" by itself. An approver that answers `Later` parks the
//! turn: the call stays open and the session continues once an answer is
//! recorded.

use crate::approval::{ApprovalDecision, ApprovalPolicy, ApprovalRequest, Approver, ToolPolicy};
use crate::events::{EventBus, NotRunBy, PodEvent};
use crate::log::{AnswerRecord, LogRecord, QuestionRecord};
use crate::questions::{Answerer, Questions};
use crate::store::{LogWriter, Waits};
use pod_llm::Item;
use pod_worker::{PreToolAction, ToolCallInfo};
use std::collections::HashMap;
use std::sync::Arc;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

/// The session's policy and the front end that answers `ask`.
/// "Always" and "never" answers update the policy for the rest of the
/// session (and are replayed from the log on resume).
#[derive(Clone)]
pub struct ApprovalGate {
    policy: ApprovalPolicy,
    approver: Option<Arc<dyn Approver>>,
    // Where questions and answers go; without one they live in memory
    // only, and the turn cannot park (the question would be lost).
    record: Option<Record>,
    // Asked and not answered, by call id.
    open: HashMap<String, QuestionRecord>,
    // Answered while the session was parked, by call id.
    pending: HashMap<String, AnswerRecord>,
    // A subagent's turn must not park: its parent's call would move on.
    can_park: bool,
    // What refused the last call that was refused, for its event.
    refused: Option<NotRunBy>,
    // The tools the session's client runs: always asked (unless the policy
    // denies them), answered with their result.
    client_tools: std::collections::HashSet<String>,
}

#[derive(Clone)]
struct Record {
    log: LogWriter,
    events: EventBus,
    parked: ParkedOn,
}

/// What a turn parked on (a question, a follow-up's time), for the Pod:
/// when it shuts down, it hands the session over as waiting for that (an
/// answer, woken at the question's timeout; or the follow-up's time), so
/// that a store with workers continues it.
// A lock, not a channel: the interceptor that parks sets it from the turn's
// task and the Pod reads it once the turn is over; nothing waits on it.
#[derive(Clone, Debug, Default)]
pub(crate) struct ParkedOn(Arc<parking_lot::Mutex<Option<Waits>>>);

impl ParkedOn {
    /// What the session waits for if its last turn parked (and nothing
    /// ran since), clearing it.
    pub(crate) fn take(&self) -> Option<Waits> {
        self.0.lock().take()
    }

    /// The last turn stopped at a shared limit: the session waits for its
    /// window to end (or the limit to be raised).
    pub(crate) fn limited(&self, until: chrono::DateTime<chrono::Utc>) {
        *self.0.lock() = Some(Waits::Limit { until });
    }

    /// A new turn starts: it parks again or not.
    pub(crate) fn clear(&self) {
        self.0.lock().take();
    }

    /// The turn parks on `waits`.
    pub(crate) fn set(&self, waits: Waits) {
        *self.0.lock() = Some(waits);
    }
}

impl ApprovalGate {
    /// A gate applying `policy`, asking `approver` (if any) about `ask`
    /// tools, with questions kept in memory only.
    pub fn new(policy: ApprovalPolicy, approver: Option<Arc<dyn Approver>>) -> Self {
        Self {
            policy,
            approver,
            record: None,
            open: HashMap::new(),
            pending: HashMap::new(),
            can_park: false,
            refused: None,
            client_tools: Default::default(),
        }
    }

    /// The same gate, knowing that the session's client runs the tools
    /// `names`: their calls are questions whatever the policy allows (a
    /// denied one stays denied), and an answer carrying a result is the
    /// call's result.
    pub fn with_client_tools(mut self, names: impl IntoIterator<Item = String>) -> Self {
        self.client_tools = names.into_iter().collect();
        self
    }

    /// Whether the session's client runs `tool`.
    pub fn runs_on_client(&self, tool: &str) -> bool {
        self.client_tools.contains(tool)
    }

    /// The same gate, recording its questions and answers in `log` and
    /// announcing them on `events`; it takes up where `questions` (replayed
    /// from the log, against `history`) left off: the open questions, the
    /// answers given while parked, the standing "always"/"never" answers.
    /// `can_park`: whether a turn may park at a question (not a subagent's);
    /// `parked` hears the question it parked on.
    pub(crate) fn recorded(
        mut self,
        log: LogWriter,
        events: EventBus,
        questions: &Questions,
        history: &[Item],
        can_park: bool,
        parked: ParkedOn,
    ) -> Self {
        for (tool, decision) in questions.standing() {
            match decision {
                ApprovalDecision::AllowAlways => self.policy.set(tool.clone(), ToolPolicy::Allow),
                _ => self.policy.set(tool.clone(), ToolPolicy::Deny),
            };
        }
        self.open = questions
            .open(history)
            .into_iter()
            .map(|q| (q.request.call_id.clone(), q.clone()))
            .collect();
        self.pending = questions.pending(history);
        self.record = Some(Record {
            log,
            events,
            parked,
        });
        self.can_park = can_park;
        self
    }

    /// The current policy, with this session's "always" answers.
    pub fn policy(&self) -> &ApprovalPolicy {
        &self.policy
    }

    /// Decides about one call; `cancel` withdraws a question to the user.
    pub async fn check(
        &mut self,
        call_id: &str,
        tool: &str,
        arguments: &str,
        cancel: &CancellationToken,
    ) -> PreToolAction {
        self.refused = None;
        match self.policy.get(tool) {
            ToolPolicy::Allow if self.runs_on_client(tool) => {
                self.ask(call_id, tool, arguments, cancel).await
            }
            ToolPolicy::Allow => PreToolAction::Continue,
            ToolPolicy::Deny => self.refuse(NotRunBy::Policy, denied(tool)),
            ToolPolicy::Ask => self.ask(call_id, tool, arguments, cancel).await,
        }
    }

    /// `action` (a refusal), noting who refused.
    fn refuse(&mut self, by: NotRunBy, action: PreToolAction) -> PreToolAction {
        self.refused = Some(by);
        action
    }

    /// What refused the last call a check refused (the approval policy, a
    /// person, nobody to ask, a timeout).
    pub(crate) fn refused(&self) -> NotRunBy {
        self.refused.unwrap_or(NotRunBy::Policy)
    }

    /// Tells the front ends that `call` was refused by `by`: `text` is its
    /// result.
    pub(crate) fn tell_refused(&self, call: &ToolCallInfo, by: NotRunBy, text: &str) {
        self.announce(PodEvent::CallNotRun {
            call_id: call.call_id.clone(),
            name: call.name.clone(),
            arguments: call.arguments.clone(),
            by,
            reason: text.to_string(),
        });
    }

    /// Decides about a call an operator's hook allowed: it runs without a
    /// question unless the policy denies its tool.
    pub fn check_allowed(&self, tool: &str) -> PreToolAction {
        match self.policy.get(tool) {
            ToolPolicy::Deny => denied(tool),
            ToolPolicy::Allow | ToolPolicy::Ask => PreToolAction::Continue,
        }
    }

    /// Decides about a call an operator's hook wants a person asked about:
    /// asked even if the policy allows it (a denied tool stays denied).
    pub async fn check_asking(
        &mut self,
        call_id: &str,
        tool: &str,
        arguments: &str,
        cancel: &CancellationToken,
    ) -> PreToolAction {
        self.refused = None;
        match self.policy.get(tool) {
            ToolPolicy::Deny => self.refuse(NotRunBy::Policy, denied(tool)),
            ToolPolicy::Allow | ToolPolicy::Ask => self.ask(call_id, tool, arguments, cancel).await,
        }
    }

    async fn ask(
        &mut self,
        call_id: &str,
        tool: &str,
        arguments: &str,
        cancel: &CancellationToken,
    ) -> PreToolAction {
        if let Some(answer) = self.pending.remove(call_id) {
            // Answered while parked: recorded again, acted on, before the
            // call runs (a crash from here on closes the call as
            // interrupted instead of running it twice).
            let acted = AnswerRecord {
                pending: false,
                ..answer
            };
            if let Err(reason) = self.write(LogRecord::Answer(acted.clone())).await {
                return PreToolAction::Abort(reason);
            }
            self.open.remove(call_id);
            if let Some(result) = acted.result.filter(|_| self.runs_on_client(tool)) {
                return PreToolAction::Respond(result.into());
            }
            return self.apply(tool, acted.decision);
        }
        let question = match self.open.get(call_id) {
            Some(question) => question.clone(),
            None if self.approver.is_none() => {
                return self.refuse(NotRunBy::NobodyToAsk, nobody_can_answer(tool))
            }
            None => {
                let timeout = self.policy.timeout_secs.map(std::time::Duration::from_secs);
                let question =
                    QuestionRecord::ask(ApprovalRequest::new(call_id, tool, arguments), timeout);
                if let Err(reason) = self.write(LogRecord::Question(question.clone())).await {
                    return PreToolAction::Abort(reason);
                }
                self.announce(PodEvent::QuestionAsked {
                    question: Box::new(question.clone()),
                });
                self.open.insert(call_id.to_string(), question.clone());
                question
            }
        };
        if question.expired() {
            return self
                .answered(
                    &question,
                    ApprovalDecision::RejectOnce,
                    &Answerer::via("timeout"),
                )
                .await;
        }
        let Some(approver) = self.approver.clone() else {
            // Asked before a restart, and nobody here can answer: it keeps
            // waiting (`pod approve`, the HTTP API).
            return self.park(&question);
        };
        let request = question.request.clone();
        // The wait for a person is a span of its own: how long approvals
        // hold a run up shows in the trace.
        let waiting = tracing::info_span!(
            "await_approval",
            pod.tool = %tool,
            pod.question.id = %question.id,
            pod.answer = tracing::field::Empty,
        );
        let asked = approver
            .decide(request, cancel.clone())
            .instrument(waiting.clone());
        let decision = match remaining(&question) {
            Some(left) => match tokio::time::timeout(left, asked).await {
                Ok(decision) => decision,
                Err(_) => {
                    return self
                        .answered(
                            &question,
                            ApprovalDecision::RejectOnce,
                            &Answerer::via("timeout"),
                        )
                        .await
                }
            },
            None => asked.await,
        };
        waiting.record("pod.answer", decision.as_str());
        match decision {
            ApprovalDecision::Later => self.park(&question),
            // The question stays in the log; the call gets a "not run"
            // result, so it no longer waits.
            ApprovalDecision::Cancelled => {
                PreToolAction::Abort(format!("the approval request for `{tool}` was cancelled"))
            }
            decision => {
                self.answered(&question, decision, &approver.answerer())
                    .await
            }
        }
    }

    /// Records `decision` as the answer to `question` and acts on it.
    async fn answered(
        &mut self,
        question: &QuestionRecord,
        decision: ApprovalDecision,
        by: &Answerer,
    ) -> PreToolAction {
        let answer = by.answer(question, decision, false);
        if let Err(reason) = self.write(LogRecord::Answer(answer.clone())).await {
            return PreToolAction::Abort(reason);
        }
        self.open.remove(&question.request.call_id);
        self.announce(PodEvent::QuestionAnswered {
            answer: Box::new(answer),
        });
        if by.via == "timeout" {
            self.refused = Some(NotRunBy::Timeout);
            return PreToolAction::Skip(format!(
                "Not run: nobody answered the question about this `{}` call in time, so it was \
                 refused. Do not retry it unchanged; go on without it or stop and say what you \
                 need.",
                question.request.tool
            ));
        }
        self.apply(&question.request.tool, decision)
    }

    fn park(&mut self, question: &QuestionRecord) -> PreToolAction {
        let Some(record) = self.record.as_ref().filter(|_| self.can_park) else {
            self.refused = Some(NotRunBy::NobodyToAsk);
            return nobody_can_answer(&question.request.tool);
        };
        record.parked.set(Waits::Answer {
            wake_at: question.expires_at,
        });
        PreToolAction::Park(format!(
            "waiting for an answer to question {} ({})",
            question.id, question.request.summary
        ))
    }

    fn apply(&mut self, tool: &str, decision: ApprovalDecision) -> PreToolAction {
        match decision {
            ApprovalDecision::AllowOnce => PreToolAction::Continue,
            ApprovalDecision::AllowAlways => {
                self.policy.set(tool, ToolPolicy::Allow);
                PreToolAction::Continue
            }
            ApprovalDecision::RejectOnce => self.refuse(
                NotRunBy::Person,
                PreToolAction::Skip(format!(
                    "Not run: the user refused this `{tool}` call. Do not retry it unchanged; \
                 ask the user or take another approach."
                )),
            ),
            ApprovalDecision::RejectAlways => {
                self.policy.set(tool, ToolPolicy::Deny);
                self.refused = Some(NotRunBy::Person);
                PreToolAction::Skip(format!(
                    "Not run: the user refused this `{tool}` call and every later `{tool}` call \
                     in this session. Find another way or ask the user."
                ))
            }
            // Not answers; never recorded as such.
            ApprovalDecision::Cancelled | ApprovalDecision::Later => {
                PreToolAction::Abort(format!("the approval request for `{tool}` got no answer"))
            }
        }
    }

    /// Appends `record` (made durable before anyone is asked or anything
    /// runs); the error is the turn's abort reason.
    async fn write(&self, record: LogRecord) -> Result<(), String> {
        let Some(log) = self.record.as_ref().map(|r| &r.log) else {
            return Ok(());
        };
        log.append(&record, true).await.map_err(|err| {
            format!(
                "the question could not be recorded in the session log ({})",
                pod_llm::error_chain(&err)
            )
        })
    }

    fn announce(&self, event: PodEvent) {
        if let Some(record) = &self.record {
            record.events.send(event);
        }
    }
}

/// How long `question` may still wait, if it has a timeout.
fn remaining(question: &QuestionRecord) -> Option<std::time::Duration> {
    let expires = question.expires_at?;
    Some(
        (expires - chrono::Utc::now())
            .to_std()
            .unwrap_or(std::time::Duration::ZERO),
    )
}

fn denied(tool: &str) -> PreToolAction {
    PreToolAction::Skip(format!(
        "Not run: denied by the approval policy: `{tool}` is set to deny in this session. \
         Do not retry it; find another way or ask the user to allow `{tool}`."
    ))
}

fn nobody_can_answer(tool: &str) -> PreToolAction {
    PreToolAction::Skip(format!(
        "Not run: `{tool}` needs the user's approval and nobody can give it in this \
         session. The user must allow it (for example with --yes or --allow {tool}). \
         Do not retry it; tell the user what you wanted to do."
    ))
}

impl std::fmt::Debug for ApprovalGate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ApprovalGate")
            .field("policy", &self.policy)
            .field("approver", &self.approver.is_some())
            .field("recorded", &self.record.is_some())
            .field("open", &self.open.len())
            .field("pending", &self.pending.len())
            .finish()
    }
}
