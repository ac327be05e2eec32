//! How the server gets a [`PodConfig`]: supplied by the front end that owns
//! provider flags and profiles, so this crate never parses them.

use pod::PodConfig;
use std::path::Path;
use uuid::Uuid;

/// Why a [`PodFactory`] could not make a config; shown to the client.
pub type FactoryError = Box<dyn std::error::Error + Send + Sync>;

/// Makes the config of each Pod the server starts (asynchronously: a
/// factory may read the session's store to decide).
#[async_trait::async_trait]
pub trait PodFactory: Send + Sync + 'static {
    /// The config of a new session working in `workspace` (the client's `cwd`).
    async fn new_session(&self, workspace: &Path) -> Result<PodConfig, FactoryError>;

    /// The config for reopening session `id` in `workspace`. A scripted
    /// model, for one, must move on to the step after those already answered.
    async fn resume_session(&self, id: Uuid, workspace: &Path) -> Result<PodConfig, FactoryError> {
        let _ = id;
        self.new_session(workspace).await
    }
}
