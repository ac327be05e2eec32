//! The questions the server's sessions wait for: listed, answered (live
//! or parked in a log), and the approver that asks them.

use super::*;

/// A call waiting for an answer from the API.
#[derive(Debug, Clone, Serialize)]
pub struct PendingApproval {
    /// Its id: random, so an answer meant for a question asked before a
    /// restart cannot land on a new one.
    pub id: Uuid,
    /// The session whose turn waits (a subagent's question names the
    /// subagent in `request.subagent`).
    pub session_id: Uuid,
    /// The call.
    pub request: ApprovalRequest,
    /// When it was asked.
    pub asked_at: DateTime<Utc>,
    /// When it is answered "no" by itself, if it has a timeout.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<DateTime<Utc>>,
    /// Whether the session is parked on it (its log holds the question and
    /// no process waits): an answer continues the session here.
    pub parked: bool,
}

impl PendingApproval {
    /// The question a parked session's log holds.
    pub fn parked(session_id: Uuid, question: &pod::log::QuestionRecord) -> Self {
        Self {
            id: question.id,
            session_id,
            request: question.request.clone(),
            asked_at: question.asked_at,
            expires_at: question.expires_at,
            parked: true,
        }
    }
}

pub(super) struct Waiting {
    pub(super) approval: PendingApproval,
    pub(super) reply: oneshot::Sender<ApprovalDecision>,
}

/// What an answer says it answers: the session and the call, so it lands
/// only on that question.
#[derive(Debug, Default, Deserialize)]
pub struct Binding {
    /// The session that asked.
    #[serde(default)]
    pub session_id: Option<Uuid>,
    /// The call asked about.
    #[serde(default)]
    pub call_id: Option<String>,
}

impl Binding {
    /// What differs from `asked`, for the conflict's message.
    pub(super) fn mismatch(&self, asked: &PendingApproval) -> Option<String> {
        if self.session_id.is_some_and(|id| id != asked.session_id) {
            return Some(format!("session {}", asked.session_id));
        }
        match &self.call_id {
            Some(call) if *call != asked.request.call_id => {
                Some(format!("call {}", asked.request.call_id))
            }
            _ => None,
        }
    }
}

/// Puts questions where the API lists them and waits for an answer.
struct HttpApprover {
    // Set once the session exists (its first question comes after).
    session: Arc<Mutex<Option<Uuid>>>,
    state: Arc<Mutex<State>>,
}

#[async_trait::async_trait]
impl Approver for HttpApprover {
    async fn decide(
        &self,
        request: ApprovalRequest,
        cancel: CancellationToken,
    ) -> ApprovalDecision {
        // A session's own question parks it: the question is in its log,
        // the API lists it from there, and waiting holds nothing. A
        // subagent's cannot park (its parent's call would move on): it
        // waits here, listed from memory.
        if request.subagent.is_none() {
            return ApprovalDecision::Later;
        }
        let session_id = (*self.session.lock()).unwrap_or_default();
        let (reply, answer) = oneshot::channel();
        let id = Uuid::new_v4();
        self.state.lock().approvals.push(Waiting {
            approval: PendingApproval {
                id,
                session_id,
                request,
                asked_at: Utc::now(),
                expires_at: None,
                parked: false,
            },
            reply,
        });
        tokio::select! {
            answer = answer => answer.unwrap_or(ApprovalDecision::Cancelled),
            _ = cancel.cancelled() => {
                // Withdrawn: the API no longer lists it.
                self.state.lock().approvals.retain(|w| w.approval.id != id);
                ApprovalDecision::Cancelled
            }
        }
    }

    fn answerer(&self) -> pod::questions::Answerer {
        pod::questions::Answerer::via("http")
    }
}

impl Runner {
    /// Answers question `question` of `session`, parked on it (nothing
    /// waits in a process: the log holds the question), then continues the
    /// session here: the call runs with the answer (or gets the result a
    /// client's tool answered with).
    pub async fn answer_parked(
        &self,
        session: Uuid,
        question: &pod::log::QuestionRecord,
        bound: &Binding,
        reply: impl Into<pod::questions::Reply>,
        by: &pod::questions::Answerer,
    ) -> Result<(), ApiError> {
        let asked = PendingApproval::parked(session, question);
        if let Some(mismatch) = bound.mismatch(&asked) {
            return Err(ApiError::conflict(format!(
                "approval {} is for {mismatch}; nothing was answered",
                question.id
            )));
        }
        let store = self.launcher.place().store.clone();
        match pod::questions::answer(&store, session, question.id, reply, by, PARKING_WAIT).await {
            // A fleet worker continues it.
            Ok(answered) if answered.queued => return Ok(()),
            Ok(_) => {}
            Err(err @ (PodError::AlreadyAnswered { .. } | PodError::QuestionWithdrawn { .. })) => {
                return Err(ApiError::conflict(chain(&err)))
            }
            Err(PodError::SessionBusy { .. } | PodError::SessionLeased { .. }) => {
                return Err(ApiError::conflict(format!(
                    "session {session} is open in another process, which asks the question \
                     itself: answer it there"
                )))
            }
            Err(err) => return Err(ApiError::internal(chain(&err))),
        }
        self.continue_parked(session).await
    }

    /// The calls waiting for an answer, oldest first.
    pub fn approvals(&self) -> Vec<PendingApproval> {
        let state = self.state.lock();
        state.approvals.iter().map(|w| w.approval.clone()).collect()
    }

    /// Whether approval `id` waits in this process (a subagent's).
    pub fn has_live_approval(&self, id: Uuid) -> bool {
        self.state
            .lock()
            .approvals
            .iter()
            .any(|w| w.approval.id == id)
    }

    /// Answers approval `approval`, if it still waits and is the question
    /// `bound` names (when it names one): an answer meant for another
    /// question, or for one no longer asked, is a conflict.
    pub fn answer(
        &self,
        approval: Uuid,
        bound: &Binding,
        decision: ApprovalDecision,
    ) -> Result<(), ApiError> {
        let waiting = {
            let mut state = self.state.lock();
            let Some(at) = state
                .approvals
                .iter()
                .position(|w| w.approval.id == approval)
            else {
                return Err(ApiError::conflict(format!(
                    "approval {approval} is not waiting: it was answered, withdrawn, or asked \
                     before this server restarted"
                )));
            };
            let asked = &state.approvals[at].approval;
            if let Some(mismatch) = bound.mismatch(asked) {
                return Err(ApiError::conflict(format!(
                    "approval {approval} is for {mismatch}; nothing was answered"
                )));
            }
            state.approvals.remove(at)
        };
        waiting
            .reply
            .send(decision)
            .map_err(|_| ApiError::conflict("the turn stopped waiting for this answer (cancelled)"))
    }

    /// An approver whose questions the API lists, for session `id`.
    pub fn approver(&self, id: Uuid) -> Arc<dyn Approver> {
        let cell = Arc::new(Mutex::new(Some(id)));
        self.approver_for_new(&cell)
    }

    pub(super) fn approver_for_new(&self, id: &Arc<Mutex<Option<Uuid>>>) -> Arc<dyn Approver> {
        Arc::new(HttpApprover {
            session: Arc::clone(id),
            state: Arc::clone(&self.state),
        })
    }
}
