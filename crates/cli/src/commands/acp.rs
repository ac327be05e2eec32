//! `pod acp`: serve the Agent Client Protocol on stdio, so an editor such as
//! Zed drives Pods. The protocol lives in pod-acp; this module only turns
//! the model flags into a Pod config per session.

use crate::approval;
use crate::cli::{ApprovalArgs, ModelArgs};
use crate::error::Outcome;
use crate::model::{self, Model};
use crate::session;
use anyhow::{Context, Result};
use clap::Args;
use pod::{ApprovalPolicy, PodConfig, PodHome};
use pod_acp::{FactoryError, PodFactory};
use std::path::Path;
use uuid::Uuid;

/// `pod acp`.
#[derive(Debug, Args)]
pub struct AcpArgs {
    /// The model every session uses.
    #[command(flatten)]
    pub model: ModelArgs,
    /// Which tool calls run without asking the editor.
    #[command(flatten)]
    pub approval: ApprovalArgs,
}

/// Serves ACP on stdin/stdout until stdin closes.
pub async fn run(args: AcpArgs) -> Result<Outcome> {
    // Fail at startup, where the editor's log shows it, not at the first session.
    let file = model::config_file(&args.model)?;
    Model::from_file(&args.model, &file)?;
    let factory = Factory {
        home: super::home()?,
        model: args.model,
        approval: approval::policy(&file, &args.approval)?,
    };
    pod_acp::serve(factory, tokio::io::stdin(), tokio::io::stdout())
        .await
        .context("the ACP connection failed")?;
    Ok(Outcome::Done)
}

/// Each session gets its own model (a scripted one starts its own script).
struct Factory {
    home: PodHome,
    model: ModelArgs,
    approval: ApprovalPolicy,
}

impl Factory {
    fn config(&self, model: &Model, workspace: &Path) -> PodConfig {
        let mut config = PodConfig::new(self.home.clone(), workspace, model.provider.clone());
        config.compact_provider = model.compactor.clone();
        config.approval = self.approval.clone();
        config
    }
}

impl PodFactory for Factory {
    fn new_session(&self, workspace: &Path) -> Result<PodConfig, FactoryError> {
        let model = Model::resolve(&self.model)?;
        Ok(self.config(&model, workspace))
    }

    fn resume_session(&self, id: Uuid, workspace: &Path) -> Result<PodConfig, FactoryError> {
        let model = Model::resolve(&self.model)?;
        // A missing session is left to the Pod, which says so precisely.
        if let Ok(loaded) = session::load(&self.home, id) {
            model.resume_at(loaded.assistant_items());
        }
        Ok(self.config(&model, workspace))
    }
}
