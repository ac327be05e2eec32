use std::path::PathBuf;

/// What can go wrong in a Pod.
#[derive(Debug, thiserror::Error)]
pub enum PodError {
    /// A file operation failed.
    #[error("{path}: {source}")]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
    /// A line in the middle of a log is damaged; nothing is skipped silently.
    #[error("{path}:{line}: corrupt session log: {reason}")]
    CorruptLog {
        /// The log file.
        path: PathBuf,
        /// 1-based line number.
        line: usize,
        /// What is wrong with it.
        reason: String,
    },
    /// No session with this id exists.
    #[error("no session {id} in {store}")]
    NoSuchSession {
        /// The id asked for.
        id: String,
        /// The store searched (a POD_HOME, or a database).
        store: String,
    },
    /// A record could not be encoded.
    #[error("cannot encode log record")]
    Encode(#[source] serde_json::Error),
    /// Another process has this session open.
    #[error("{path}: the session is open in another process")]
    SessionBusy {
        /// The log file.
        path: PathBuf,
    },
    /// Another worker holds this session's lease.
    #[error("session {id} is leased by {owner} until {until}")]
    SessionLeased {
        /// The session.
        id: uuid::Uuid,
        /// The worker holding the lease.
        owner: String,
        /// When the lease expires unless renewed.
        until: chrono::DateTime<chrono::Utc>,
    },
    /// This writer's lease on the session was taken over (it expired while
    /// the worker was paused, partitioned or slow): it may never write to
    /// the session again. The Pod stops; whoever holds the lease now goes on.
    #[error("lost the lease on session {id} (epoch {epoch}): another worker owns it now")]
    LeaseLost {
        /// The session.
        id: uuid::Uuid,
        /// The epoch this writer held.
        epoch: i64,
    },
    /// The session store failed (a database error, a lost connection).
    #[error("session store {store}: {what}")]
    Store {
        /// Which store (without secrets).
        store: String,
        /// What was being done.
        what: String,
        /// The cause.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// The log writer has stopped.
    #[error("the session log writer has stopped")]
    LogClosed,
    /// The Pod has shut down.
    #[error("the pod has shut down")]
    Closed,
    /// A turn failed; the history stays valid and the Pod usable.
    #[error("turn failed: {0}")]
    Turn(#[from] pod_worker::WorkerError),
    /// A job's task crashed; the Pod rebuilt itself from its log.
    #[error("the pod's job crashed ({0}) and the pod was rebuilt from its log")]
    Crashed(String),
    /// A job's task crashed and the Pod could not reload its log: it
    /// answers every later job with this.
    #[error("the pod lost its state and could not reload its log")]
    Lost,
    /// A compaction did not happen; the history is unchanged.
    #[error("compaction failed")]
    Compaction(#[source] CompactionError),
    /// No question with this id in the session.
    #[error("session {session} has no question {question}")]
    NoSuchQuestion {
        /// The session.
        session: uuid::Uuid,
        /// The question asked for.
        question: uuid::Uuid,
    },
    /// The question no longer waits: its call was answered otherwise (the
    /// turn was cancelled, say).
    #[error("question {question} no longer waits for an answer")]
    QuestionWithdrawn {
        /// The question.
        question: uuid::Uuid,
    },
    /// The question was answered already (two answers raced; one won).
    #[error("question {question} was already answered: {} (via {via})", decision.as_str())]
    AlreadyAnswered {
        /// The question.
        question: uuid::Uuid,
        /// The answer that stands.
        decision: crate::decision::ApprovalDecision,
        /// Through what it was given.
        via: String,
    },
    /// A decision that is not an answer (`cancelled`, `later`).
    #[error("`{}` is not an answer", decision.as_str())]
    NotAnAnswer {
        /// The decision given.
        decision: crate::decision::ApprovalDecision,
    },
    /// The Pod's home directory could not be determined.
    #[error("cannot find a home for sessions: set POD_HOME")]
    NoHome,
}

/// Why a compaction did not happen. The history is unchanged in every case.
#[derive(Debug, thiserror::Error)]
pub enum CompactionError {
    /// The history is too short to summarise anything.
    #[error("nothing to compact: the history fits in the kept tail")]
    NothingToCompact,
    /// The compact request failed.
    #[error("compact request failed")]
    Request(#[from] pod_worker::WorkerError),
    /// The compact model answered with nothing.
    #[error("the compact model returned an empty summary")]
    EmptySummary,
    /// The compact turn did not finish ({0:?}).
    #[error("the compact request did not finish: {0:?}")]
    Interrupted(pod_worker::TurnEndReason),
    /// The boundary could not be written; the old context stays.
    #[error("could not write the compaction boundary")]
    Log(#[source] Box<PodError>),
    /// The run was cancelled while the summary was being written.
    #[error("cancelled")]
    Cancelled,
}
