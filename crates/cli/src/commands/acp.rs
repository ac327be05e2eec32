//! `pod acp`: serve the Agent Client Protocol on stdio, so an editor such as
//! Zed drives Pods. The protocol lives in pod-acp; this module gives it a
//! factory that starts each session through the launcher.

use crate::cli::AcpArgs;
use crate::error::Outcome;
use anyhow::{Context, Result};
use pod_acp::{FactoryError, PodFactory, Start, Started};
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

/// Each session starts through the launcher, as every front end's does:
/// its own model (a scripted one starts its own script), the config
/// file's and `--mcp-config`'s servers (and, for a loaded session, those it
/// recorded) with the editor's, the editor as the approver of `ask`
/// tools. The servers stop when the session is dropped.
struct Factory {
    launcher: pod_launch::Launcher,
    flags: pod_launch::Flags,
}

impl Factory {
    async fn start(
        &self,
        plan: pod_launch::Plan,
        start: Start<'_>,
    ) -> Result<Started, FactoryError> {
        let options = pod_launch::Options {
            approver: Some(start.approver),
            servers: start.servers,
            ..Default::default()
        };
        let mut prepared = plan.prepare(options).await?;
        prepared.config.event_capacity = prepared.config.event_capacity.max(start.event_capacity);
        let session = prepared.start().await.map_err(factory_error)?;
        Ok(Started {
            handle: session.handle,
            mcp: session.mcp,
            warnings: session.warnings,
        })
    }
}

#[pod::async_trait]
impl PodFactory for Factory {
    async fn new_session(&self, start: Start<'_>) -> Result<Started, FactoryError> {
        let plan = self.launcher.plan(&self.flags, start.workspace.into())?;
        self.start(plan, start).await
    }

    async fn resume_session(&self, id: Uuid, start: Start<'_>) -> Result<Started, FactoryError> {
        // As `pod resume` does: the session's record under `pod acp`'s
        // flags, in the editor's directory.
        let plan = self
            .launcher
            .plan_resume(id, &self.flags, Some(start.workspace.into()))
            .await
            .map_err(factory_error)?;
        self.start(plan, start).await
    }
}

/// A launcher's error for the editor: a missing session boxed as the
/// `PodError` it is, so that the editor is told the session does not exist.
fn factory_error(err: pod_launch::LaunchError) -> FactoryError {
    match err.pod_error() {
        Some(pod::PodError::NoSuchSession { id, store }) => {
            FactoryError::from(pod::PodError::NoSuchSession {
                id: id.clone(),
                store: store.clone(),
            })
        }
        _ => FactoryError::from(err),
    }
}
