//! `pod acp`: serve the Agent Client Protocol on stdio, so an editor such as
//! Zed drives Pods. The protocol lives in pod-acp; this module only turns
//! the model flags into a Pod config per session.

use crate::cli::{ApprovalArgs, BudgetArgs, ModelArgs, SandboxArgs};
use crate::error::Outcome;
use crate::session;
use crate::settings::{Flags, RunSettings};
use anyhow::{Context, Result};
use clap::Args;
use pod::{Durability, PodConfig};
use pod_acp::{FactoryError, PodFactory};
use std::path::Path;
use uuid::Uuid;

/// `pod acp`.
#[derive(Debug, Args)]
pub struct AcpArgs {
    /// The model every session uses.
    #[command(flatten)]
    pub model: ModelArgs,
    /// The limits of each prompt's run.
    #[command(flatten)]
    pub budget: BudgetArgs,
    /// Which tool calls run without asking the editor.
    #[command(flatten)]
    pub approval: ApprovalArgs,
    /// The sandbox every session's commands run in.
    #[command(flatten)]
    pub sandbox: SandboxArgs,
    /// MCP servers every session attaches, besides the config file's and
    /// the editor's own.
    #[command(flatten)]
    pub mcp: crate::cli::McpArgs,
}

/// Serves ACP on stdin/stdout until stdin closes.
pub async fn run(args: AcpArgs, place: super::Place) -> Result<Outcome> {
    let factory = Factory { place, args };
    // Fail at startup, where the editor's log shows it, not at the first session.
    let settings = factory.settings()?;
    if let Some(warning) = crate::sandbox::warning(&settings.sandbox) {
        eprintln!("{warning}");
    }
    pod_acp::serve(factory, tokio::io::stdin(), tokio::io::stdout())
        .await
        .context("the ACP connection failed")?;
    Ok(Outcome::Done)
}

/// Each session gets its own model (a scripted one starts its own script).
struct Factory {
    place: super::Place,
    args: AcpArgs,
}

impl Factory {
    /// Starts the config file's and `--mcp-config`'s servers (and, for a
    /// loaded session, those it recorded) and adds their tools; they stop
    /// when the session's Pod is dropped (the tools own the connections).
    /// The editor's own servers are started by the ACP server.
    async fn with_servers(
        &self,
        settings: &RunSettings,
        mut config: PodConfig,
        recorded: &[pod_mcp::RecordedServer],
    ) -> Result<PodConfig, FactoryError> {
        let servers = crate::mcp::configs(
            &settings.file,
            settings.choice.raw.mcp_servers.as_ref(),
            &self.args.mcp,
            recorded,
        )?;
        let started = crate::mcp::attach(servers, &mut config, settings.approval_flags.yes).await;
        let mut launch = settings.launch();
        launch.mcp_servers = crate::mcp::recorded(&started);
        config.launch = launch.to_json();
        Ok(config)
    }

    fn settings(&self) -> anyhow::Result<RunSettings> {
        RunSettings::resolve(
            &Flags {
                model: &self.args.model,
                budget: &self.args.budget,
                approval: &self.args.approval,
                sandbox: &self.args.sandbox,
                until_done: false,
            },
            None,
        )
    }
}

#[pod::async_trait]
impl PodFactory for Factory {
    async fn new_session(&self, workspace: &Path) -> Result<PodConfig, FactoryError> {
        let settings = self.settings()?;
        let config = settings.pod_config(&self.place, workspace.into(), Durability::default());
        self.with_servers(&settings, config, &[]).await
    }

    async fn resume_session(&self, id: Uuid, workspace: &Path) -> Result<PodConfig, FactoryError> {
        let settings = self.settings()?;
        // A missing session is left to the Pod, which says so precisely.
        let mut recorded = Vec::new();
        if let Ok(loaded) = session::load(self.place.store.as_ref(), id).await {
            settings.model.resume_at(loaded.assistant_items());
            if let Some(launch) = crate::launch::Launch::from_header(&loaded.header) {
                recorded = launch.mcp_servers;
            }
        }
        let config = settings.pod_config(&self.place, workspace.into(), Durability::default());
        self.with_servers(&settings, config, &recorded).await
    }
}
