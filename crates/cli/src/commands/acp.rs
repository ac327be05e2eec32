//! `pod acp`: serve the Agent Client Protocol on stdio, so an editor such as
//! Zed drives Pods. The protocol lives in pod-acp; this module gives it a
//! factory that starts each session through the launcher.

use crate::cli::AcpArgs;
use crate::error::Outcome;
use anyhow::{Context, Result};
use pod::PodConfig;
use pod_acp::{FactoryError, PodFactory};
use std::path::Path;
use uuid::Uuid;

/// Serves ACP on stdin/stdout until stdin closes.
pub async fn run(args: AcpArgs, place: super::Place) -> Result<Outcome> {
    let launcher = place.launcher();
    let factory = Factory {
        launcher: launcher.clone(),
        flags: args.session.flags(false),
    };
    // Fail at startup, where the editor's log shows it, not at the first
    // session.
    let settings = pod_launch::Resolved::resolve(&factory.flags, None)?;
    if let Some(warning) = settings.sandbox_warning() {
        let _ = crate::output::eprint(&format!("{warning}\n"));
    }
    let served = pod_acp::serve(factory, tokio::io::stdin(), tokio::io::stdout())
        .await
        .context("the ACP connection failed");
    super::flush_notifications(launcher.outbox()).await;
    served?;
    Ok(Outcome::Done)
}

/// Each session gets its own model (a scripted one starts its own script)
/// and the config file's and `--mcp-config`'s servers (and, for a loaded
/// session, those it recorded); the servers stop when the session's Pod is
/// dropped (its tools own the connections). The editor's own servers are
/// started by the ACP server.
struct Factory {
    launcher: pod_launch::Launcher,
    flags: pod_launch::Flags,
}

impl Factory {
    async fn config(&self, plan: pod_launch::Plan) -> Result<PodConfig, FactoryError> {
        let prepared = plan.prepare(pod_launch::Options::default()).await?;
        for warning in &prepared.warnings {
            tracing::warn!(%warning, "session");
        }
        Ok(prepared.config)
    }
}

#[pod::async_trait]
impl PodFactory for Factory {
    async fn new_session(&self, workspace: &Path) -> Result<PodConfig, FactoryError> {
        let plan = self.launcher.plan(&self.flags, workspace.into())?;
        self.config(plan).await
    }

    async fn resume_session(&self, id: Uuid, workspace: &Path) -> Result<PodConfig, FactoryError> {
        // As `pod resume` does: the session's record under `pod acp`'s
        // flags, in the editor's directory.
        let plan = match self
            .launcher
            .plan_resume(id, &self.flags, Some(workspace.into()))
            .await
        {
            Ok(plan) => plan,
            // A missing session is left to the Pod, which says so precisely;
            // any other failure (a bad record, a gone workspace) is the
            // editor's answer.
            Err(err) if matches!(err.pod_error(), Some(pod::PodError::NoSuchSession { .. })) => {
                self.launcher.plan(&self.flags, workspace.into())?
            }
            Err(err) => return Err(err.into()),
        };
        self.config(plan).await
    }
}
