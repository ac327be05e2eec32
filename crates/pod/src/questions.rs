//! Questions to people, kept in the session log.
//!
//! A tool call that needs approval is a [`QuestionRecord`] in the log before
//! anyone is asked; its answer is an [`AnswerRecord`]. Replay rebuilds from
//! them what waits ([`Questions::open`]), what was answered while the session
//! was parked and has not been acted on yet ([`Questions::pending`]), and the
//! "always"/"never" answers that hold for the rest of the session.
//!
//! The last answer recorded for a call decides. An answer given while the
//! session was parked (by `pod approve` or the HTTP API) is recorded
//! `pending`: the call had not started. When the session continues, the
//! approval gate records it again, not pending, before the call runs, so a
//! crash while the tool runs leaves a call that a later resume closes as
//! interrupted instead of running it twice.

use crate::approval::{ApprovalDecision, ApprovalRequest};
use crate::error::PodError;
use crate::log::{AnswerRecord, HookRecord, LogRecord, QuestionRecord};
use crate::store::{Store, Waits};
use chrono::Utc;
use pod_llm::{Item, ItemKind};
use std::collections::{HashMap, HashSet};
use uuid::Uuid;

/// A session's questions and answers, as its log holds them.
#[derive(Debug, Clone, Default)]
pub struct Questions {
    asked: Vec<QuestionRecord>,
    // The last answer of each question.
    answers: HashMap<Uuid, AnswerRecord>,
    // Every "always" or "never" answer, in log order: (tool, decision).
    standing: Vec<(String, ApprovalDecision)>,
    // What hooks decided, by call id (the last record of each call).
    hooked: HashMap<String, HookRecord>,
    // The last run's span context, when traces were exported.
    last_trace: Option<String>,
    // Every verification round, in log order.
    verified: Vec<crate::log::VerifyRecord>,
    // The tree of the session's first checkpoint: what it started from.
    first_tree: Option<String>,
}

/// What a question waits for, or what was decided about it.
#[derive(Debug, Clone, PartialEq)]
pub enum QuestionState<'a> {
    /// Nobody answered yet.
    Open(&'a QuestionRecord),
    /// Answered while the session was parked; the call has not started.
    Pending(&'a QuestionRecord, &'a AnswerRecord),
    /// Answered and acted on (the call went on right away).
    Settled(&'a QuestionRecord, &'a AnswerRecord),
}

impl Questions {
    /// The questions and answers of `records`.
    pub fn from_records<'a>(records: impl IntoIterator<Item = &'a LogRecord>) -> Self {
        let mut questions = Self::default();
        for record in records {
            questions.observe(record);
        }
        questions
    }

    /// Takes `record` into account (a no-op for other records).
    pub fn observe(&mut self, record: &LogRecord) {
        match record {
            LogRecord::Question(question) => self.asked.push(question.clone()),
            LogRecord::Answer(answer) => {
                if let Some(tool) = self
                    .asked
                    .iter()
                    .find(|q| q.id == answer.question)
                    .map(|q| q.request.tool.clone())
                {
                    if matches!(
                        answer.decision,
                        ApprovalDecision::AllowAlways | ApprovalDecision::RejectAlways
                    ) {
                        self.standing.push((tool, answer.decision));
                    }
                }
                self.answers.insert(answer.question, answer.clone());
            }
            LogRecord::Hook(hook) => {
                self.hooked.insert(hook.call_id.clone(), hook.clone());
            }
            LogRecord::Trace(trace) => self.last_trace = Some(trace.traceparent.clone()),
            LogRecord::Verify(verify) => self.verified.push(verify.clone()),
            LogRecord::Checkpoint(checkpoint) if self.first_tree.is_none() => {
                self.first_tree = Some(checkpoint.tree.clone());
            }
            _ => {}
        }
    }

    /// What hooks decided about the calls of `history` that have no
    /// result yet, by call id: a resume acts on these instead of running
    /// the hooks again.
    pub fn hook_decisions(&self, history: &[Item]) -> HashMap<String, HookRecord> {
        if self.hooked.is_empty() {
            return HashMap::new();
        }
        let waiting = calls_without_result(history);
        self.hooked
            .iter()
            .filter(|(call, _)| waiting.contains(call.as_str()))
            .map(|(call, record)| (call.clone(), record.clone()))
            .collect()
    }

    /// Every verification round of the session, in log order.
    pub fn verified(&self) -> &[crate::log::VerifyRecord] {
        &self.verified
    }

    /// The tree of the session's first checkpoint, if it took any.
    pub fn first_tree(&self) -> Option<&str> {
        self.first_tree.as_deref()
    }

    /// The last run's span context (W3C `traceparent`), if one was
    /// recorded.
    pub fn last_trace(&self) -> Option<&str> {
        self.last_trace.as_deref()
    }

    /// The question with this id.
    pub fn get(&self, id: Uuid) -> Option<&QuestionRecord> {
        self.asked.iter().find(|q| q.id == id)
    }

    /// Where question `id` stands.
    pub fn state(&self, id: Uuid) -> Option<QuestionState<'_>> {
        let question = self.get(id)?;
        Some(match self.answers.get(&id) {
            None => QuestionState::Open(question),
            Some(answer) if answer.pending => QuestionState::Pending(question, answer),
            Some(answer) => QuestionState::Settled(question, answer),
        })
    }

    /// The latest question about call `call_id`.
    pub fn for_call(&self, call_id: &str) -> Option<&QuestionRecord> {
        self.asked
            .iter()
            .rev()
            .find(|q| q.request.call_id == call_id)
    }

    /// The questions that wait for an answer: unanswered, about a call of
    /// `history` that has no result yet, oldest first.
    pub fn open<'a>(&'a self, history: &[Item]) -> Vec<&'a QuestionRecord> {
        if self.asked.is_empty() {
            return Vec::new();
        }
        let waiting = calls_without_result(history);
        self.asked
            .iter()
            .filter(|q| waiting.contains(q.request.call_id.as_str()))
            .filter(|q| !self.answers.contains_key(&q.id))
            .collect()
    }

    /// The answers given while the session was parked to calls of
    /// `history` that have not run, by call id.
    pub fn pending(&self, history: &[Item]) -> HashMap<String, AnswerRecord> {
        if !self.answers.values().any(|a| a.pending) {
            return HashMap::new();
        }
        let waiting = calls_without_result(history);
        self.answers
            .values()
            .filter(|a| a.pending && waiting.contains(a.call_id.as_str()))
            .map(|a| (a.call_id.clone(), a.clone()))
            .collect()
    }

    /// The "always" and "never" answers, in the order they were given.
    pub fn standing(&self) -> &[(String, ApprovalDecision)] {
        &self.standing
    }

    /// Of the last answer's calls without a result, the first one a
    /// question parked (open, or answered while parked): it and every call
    /// after it never started, so they stay open for the next run.
    pub fn parked_from(&self, history: &[Item]) -> Option<String> {
        if self.asked.is_empty() {
            return None;
        }
        let last = history
            .iter()
            .rev()
            .find(|item| matches!(item.kind, ItemKind::Assistant { .. }))?;
        let waiting = calls_without_result(history);
        last.tool_calls()
            .iter()
            .filter(|call| waiting.contains(call.id.as_str()))
            .find(|call| match self.for_call(&call.id) {
                Some(question) => matches!(
                    self.state(question.id),
                    Some(QuestionState::Open(_) | QuestionState::Pending(..))
                ),
                None => false,
            })
            .map(|call| call.id.clone())
    }
}

/// The questions of a log taken record by record, with the calls of its
/// active context that have no result yet: what [`Questions::open`] says
/// of the whole log after each record, without keeping its history (a
/// reader following a growing log).
#[derive(Debug, Clone, Default)]
pub struct FollowedQuestions {
    questions: Questions,
    // The calls of the active context without a result, as
    // `calls_without_result` finds them in the replayed history.
    waiting: HashSet<String>,
}

impl FollowedQuestions {
    /// Takes the next record of the log into account.
    pub fn observe(&mut self, record: &LogRecord) {
        self.questions.observe(record);
        match record {
            LogRecord::Item(item) => self.item(item),
            LogRecord::Compaction(boundary) => {
                // The active context restarts with the boundary's items.
                self.waiting.clear();
                self.item(&boundary.summary);
                for item in boundary.tail.iter().chain(&boundary.carry_over) {
                    self.item(item);
                }
            }
            _ => {}
        }
    }

    fn item(&mut self, item: &Item) {
        match &item.kind {
            ItemKind::Assistant { tool_calls, .. } => {
                self.waiting.extend(tool_calls.iter().map(|c| c.id.clone()))
            }
            ItemKind::ToolResult { call_id, .. } => {
                self.waiting.remove(call_id);
            }
            _ => {}
        }
    }

    /// The questions that wait for an answer, oldest first, as
    /// [`Questions::open`] of the replayed log.
    pub fn open(&self) -> Vec<&QuestionRecord> {
        self.questions
            .asked
            .iter()
            .filter(|q| self.waiting.contains(&q.request.call_id))
            .filter(|q| !self.questions.answers.contains_key(&q.id))
            .collect()
    }
}

/// Ids of the calls in `history` without a result.
///
/// A pass over the whole history, hashing every call id (about a tenth of
/// a resume of 100,000 items when it ran three times per resume): the
/// callers above skip it when the log holds nothing it could match.
fn calls_without_result(history: &[Item]) -> HashSet<&str> {
    let mut open: HashSet<&str> = HashSet::new();
    for item in history {
        match &item.kind {
            ItemKind::Assistant { tool_calls, .. } => {
                open.extend(tool_calls.iter().map(|c| c.id.as_str()))
            }
            ItemKind::ToolResult { call_id, .. } => {
                open.remove(call_id.as_str());
            }
            _ => {}
        }
    }
    open
}

impl QuestionRecord {
    /// A question asked now about `request`, answered "no" by itself after
    /// `timeout` if one is set.
    pub fn ask(request: ApprovalRequest, timeout: Option<std::time::Duration>) -> Self {
        let asked_at = Utc::now();
        let expires_at = timeout
            .and_then(|t| chrono::Duration::from_std(t).ok())
            .map(|t| asked_at + t);
        Self {
            id: Uuid::new_v4(),
            request,
            asked_at,
            expires_at,
        }
    }

    /// Whether its time ran out.
    pub fn expired(&self) -> bool {
        self.expires_at.is_some_and(|at| at <= Utc::now())
    }
}

pub use crate::approval::Answerer;

/// An approver for front ends where waiting must cost nothing (a fleet
/// worker): every question is answered later, so the turn parks on it.
#[derive(Debug, Default, Clone, Copy)]
pub struct Parking;

#[async_trait::async_trait]
impl crate::approval::Approver for Parking {
    async fn decide(
        &self,
        _request: ApprovalRequest,
        _cancel: tokio_util::sync::CancellationToken,
    ) -> ApprovalDecision {
        ApprovalDecision::Later
    }
}

/// What answers a question: a decision, or, for a call of a tool the
/// session's client runs (a [`ClientToolSpec`](crate::ClientToolSpec)),
/// its result (recorded as "allow" with the result: the call gets it
/// instead of running).
#[derive(Debug, Clone, PartialEq)]
pub enum Reply {
    /// Allow or refuse the call.
    Decision(ApprovalDecision),
    /// The call's result, from the client that ran it.
    Result(crate::ClientResult),
}

impl From<ApprovalDecision> for Reply {
    fn from(decision: ApprovalDecision) -> Self {
        Reply::Decision(decision)
    }
}

/// How [`answer`] went.
#[derive(Debug, Clone, PartialEq)]
pub struct Answered {
    /// The question.
    pub question: QuestionRecord,
    /// The answer recorded.
    pub answer: AnswerRecord,
    /// The store handed the session to its workers, which continue it
    /// (PostgreSQL); else whoever resumes it next runs the call.
    pub queued: bool,
}

/// Between tries to open a session that is still parking.
const PARKING_POLL: std::time::Duration = std::time::Duration::from_millis(50);

/// Answers question `question` of parked session `session`: opens the
/// session (so only one writer at a time, and on a fleet store under a
/// lease: two answerers race, one wins), checks the question still waits,
/// records the answer as pending (the session runs the call when it
/// continues) and closes the session, handing it to the store's workers
/// if it has any ([`Answered::queued`]); else the caller continues it. A
/// refused answer leaves the session waiting as it was. A session that is still being
/// parked (the question is in its log a moment before its Pod lets it go)
/// is waited for up to `wait`; one a process keeps open (a prompt at a
/// terminal asks the question itself) is [`PodError::SessionBusy`] or
/// [`PodError::SessionLeased`] after that.
pub async fn answer(
    store: &Store,
    session: Uuid,
    question: Uuid,
    reply: impl Into<Reply>,
    by: &Answerer,
    wait: std::time::Duration,
) -> Result<Answered, PodError> {
    let (decision, result) = match reply.into() {
        Reply::Decision(decision) => (decision, None),
        Reply::Result(result) => (ApprovalDecision::AllowOnce, Some(result)),
    };
    if matches!(
        decision,
        ApprovalDecision::Cancelled | ApprovalDecision::Later
    ) {
        return Err(PodError::NotAnAnswer { decision });
    }
    let mut waited = std::time::Duration::ZERO;
    let opened = loop {
        match store
            .open(session, crate::durability::Durability::Always)
            .await
        {
            Err(PodError::SessionBusy { .. } | PodError::SessionLeased { .. }) if waited < wait => {
                tokio::time::sleep(PARKING_POLL).await;
                waited += PARKING_POLL;
            }
            opened => break opened?,
        }
    };
    let records = &opened.contents.records;
    let mut questions = Questions::from_records(records);
    let history = crate::replay::replay(records).history;
    let result = async {
        match questions
            .state(question)
            .ok_or(PodError::NoSuchQuestion { session, question })?
        {
            QuestionState::Open(asked) => {
                if !questions.open(&history).iter().any(|q| q.id == asked.id) {
                    return Err(PodError::QuestionWithdrawn { question });
                }
                let record = AnswerRecord {
                    result,
                    ..by.answer(asked, decision, true)
                };
                opened
                    .writer
                    .append(&LogRecord::Answer(record.clone()), true)
                    .await?;
                Ok(Answered {
                    question: asked.clone(),
                    answer: record,
                    queued: false,
                })
            }
            QuestionState::Pending(_, answer) | QuestionState::Settled(_, answer) => {
                Err(PodError::AlreadyAnswered {
                    question,
                    decision: answer.decision,
                    via: answer.via.clone(),
                })
            }
        }
    }
    .await;
    if let Ok(answered) = &result {
        questions.observe(&LogRecord::Answer(answered.answer.clone()));
    }
    // Opening the session took it from whoever was to wake it: it is
    // handed back to what it waits for now (a worker, for an answer to act
    // on; else a person, for its open questions).
    let closed = match waits(&questions, &history) {
        Some(waits) => opened.writer.hand_over(waits).await,
        None => opened.writer.shutdown().await.map(|()| false),
    };
    let mut answered = result?;
    answered.queued = closed?;
    Ok(answered)
}

/// What a session with `questions`, given up, waits for (nothing: none).
fn waits(questions: &Questions, history: &[Item]) -> Option<Waits> {
    if !questions.pending(history).is_empty() {
        return Some(Waits::Worker);
    }
    let open = questions.open(history);
    (!open.is_empty()).then(|| Waits::Answer {
        wake_at: open.iter().filter_map(|q| q.expires_at).min(),
    })
}
