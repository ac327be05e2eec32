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
    #[error("no session {id} under {home}")]
    NoSuchSession {
        /// The id asked for.
        id: String,
        /// The POD_HOME searched.
        home: PathBuf,
    },
    /// A record could not be encoded.
    #[error("cannot encode log record: {0}")]
    Encode(String),
    /// Another process has this session open.
    #[error("{path}: the session is open in another process")]
    SessionBusy {
        /// The log file.
        path: PathBuf,
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
    #[error("the pod's turn crashed and was rebuilt from its log: {0}")]
    Crashed(String),
    /// A compaction failed; the history is unchanged.
    #[error("compaction failed: {0}")]
    Compaction(String),
    /// The Pod's home directory could not be determined.
    #[error("cannot find a home for sessions: set POD_HOME")]
    NoHome,
}
