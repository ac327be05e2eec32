use crate::observer::PersistError;
use pod_llm::ProviderError;

/// Why a turn failed. In every case the worker's history is still valid:
/// nothing of a failed request was committed.
#[derive(Debug, thiserror::Error)]
pub enum WorkerError {
    /// The provider failed (after whatever retries it does itself).
    #[error(transparent)]
    Provider(#[from] ProviderError),
    /// The observer could not persist a committed item.
    #[error(transparent)]
    Persist(#[from] PersistError),
}
