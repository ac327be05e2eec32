//! Everything a run is started with, resolved once from the flags, the
//! config file and (on resume) the session's [`Launch`] record.

use crate::approval;
use crate::budget;
use crate::cli::{ApprovalArgs, BudgetArgs, ModelArgs, SandboxArgs};
use crate::launch::{Launch, RecordedApproval};
use crate::model::{self, Choice, Model};
use crate::sandbox;
use anyhow::Result;
use pod::{ApprovalPolicy, Durability, PodConfig, SandboxPolicy};
use pod_worker::Budget;
use std::path::PathBuf;

/// The flags of `run`, `resume` or `acp` that decide how a run starts.
pub struct Flags<'a> {
    /// The model flags.
    pub model: &'a ModelArgs,
    /// The budget flags.
    pub budget: &'a BudgetArgs,
    /// The approval flags.
    pub approval: &'a ApprovalArgs,
    /// `--sandbox`, `--network`.
    pub sandbox: &'a SandboxArgs,
    /// `--until-done`.
    pub until_done: bool,
}

/// A run's settings.
pub struct RunSettings {
    /// The model's providers.
    pub model: Model,
    /// Everything else.
    pub resolved: Resolved,
}

impl std::ops::Deref for RunSettings {
    type Target = Resolved;
    fn deref(&self) -> &Resolved {
        &self.resolved
    }
}

/// A run's settings but its model's providers: what can be decided (and
/// recorded) without an API key.
pub struct Resolved {
    /// The config file read.
    pub file: pod_providers::ConfigFile,
    /// The model settings.
    pub choice: Choice,
    /// The approval flags in force (given, or recorded).
    pub approval_flags: ApprovalArgs,
    /// The policy they give.
    pub approval: ApprovalPolicy,
    /// Until-done mode.
    pub until_done: bool,
    /// The run's limits.
    pub budget: Budget,
    /// The session's caps (from the config file).
    pub session_budget: pod::SessionBudget,
    /// The sandbox `bash` runs in.
    pub sandbox: SandboxPolicy,
    /// Subagents' limits (their model is built with the providers).
    pub subagents: pod::SubagentConfig,
}

impl RunSettings {
    /// Resolves `flags` over `recorded` (a resumed session's record) and the
    /// config file, and builds the model's providers.
    pub fn resolve(flags: &Flags<'_>, recorded: Option<&Launch>) -> Result<Self> {
        let mut resolved = Resolved::resolve(flags, recorded)?;
        let model = Model::from_choice(&resolved.choice)?;
        resolved.subagents =
            crate::subagents::with_model(resolved.subagents.clone(), &resolved.choice)?;
        Ok(Self { model, resolved })
    }

    /// A Pod config for these settings (no approver: the caller adds one
    /// when it can ask).
    pub fn pod_config(
        &self,
        place: &crate::commands::Place,
        workspace: PathBuf,
        durability: Durability,
    ) -> PodConfig {
        let mut config = PodConfig::new(place.home.clone(), workspace, self.model.provider.clone());
        config.store = Some(place.store.clone());
        config.durability = durability;
        config.compact_provider = self.model.compactor.clone();
        config.until_done = self.until_done;
        config.budget = self.budget.clone();
        config.session_budget = self.session_budget;
        config.approval = self.approval.clone();
        config.sandbox = self.sandbox;
        // The config directory (profiles, approval and MCP settings) is
        // pod's, like its home: out of reach of the agent's commands.
        config.private_paths.extend(
            self.file
                .path
                .parent()
                .filter(|dir| !dir.as_os_str().is_empty())
                .map(std::path::Path::to_path_buf),
        );
        config.subagents = self.subagents.clone();
        config.launch = self.launch().to_json();
        config
    }
}

impl Resolved {
    /// Resolves `flags` over `recorded` and the config file, without
    /// building a provider (so without needing its API key).
    pub fn resolve(flags: &Flags<'_>, recorded: Option<&Launch>) -> Result<Self> {
        let file = model::config_file(flags.model)?;
        let choice = model::choose(flags.model, &file, recorded)?;
        let approval_flags = match recorded {
            Some(launch) => launch.approval.or_given(flags.approval),
            None => flags.approval.clone(),
        };
        let sandbox = sandbox::resolve(&file, recorded.and_then(|l| l.sandbox), flags.sandbox)?;
        let approval = approval::policy(&file, &approval_flags, sandbox.is_enforced())?;
        let session_budget = budget::session(&file, choice.raw.budget.as_ref())?;
        let subagents = crate::subagents::resolve(&file)?;
        let budget = budget::resolve(
            &file,
            choice.raw.budget.as_ref(),
            recorded.map(|launch| &launch.budget),
            flags.budget,
        )?;
        Ok(Self {
            file,
            choice,
            approval_flags,
            approval,
            until_done: flags.until_done || recorded.is_some_and(|launch| launch.until_done),
            budget,
            session_budget,
            sandbox,
            subagents,
        })
    }

    /// What a new session records of these settings.
    pub fn launch(&self) -> Launch {
        let mut provider = self.choice.raw.clone();
        provider.budget = None;
        Launch {
            profile: self.choice.profile.clone(),
            provider,
            approval: RecordedApproval::from_args(&self.approval_flags),
            until_done: self.until_done,
            budget: self.budget.clone(),
            sandbox: Some(self.sandbox),
            mcp_servers: Vec::new(),
        }
    }
}
