//! Everything a session runs with, resolved once from a front end's
//! [`Flags`], the config file and (on resume) the session's [`Launch`]
//! record, without building a provider: what can be decided, checked and
//! recorded without an API key.

use crate::approval;
use crate::budget;
use crate::error::LaunchError;
use crate::flags::Flags;
use crate::model::{self, Choice};
use crate::record::{Launch, RecordedApproval};
use crate::sandbox;
use pod::{ApprovalFlags, ApprovalPolicy, SandboxPolicy};
use pod_worker::Budget;

/// A session's settings but its model's providers.
#[derive(Debug, Clone)]
pub struct Resolved {
    /// The config file read.
    pub file: pod_providers::ConfigFile,
    /// The model settings.
    pub choice: Choice,
    /// The approval flags in force (given, or recorded).
    pub approval_flags: ApprovalFlags,
    /// The policy they give.
    pub approval: ApprovalPolicy,
    /// Until-done mode.
    pub until_done: bool,
    /// The `schedule_followup` tool (given, or recorded).
    pub followups: bool,
    /// The run's limits.
    pub budget: Budget,
    /// The session's limits (the flags over what it recorded, or over the
    /// config file for a new session).
    pub session_budget: pod::SessionBudget,
    /// The money a run and its subagents may spend (flag or config file).
    pub max_run_cost: Option<pod_llm::Cost>,
    /// The loop guard's settings.
    pub loop_guard: pod::LoopGuardConfig,
    /// The limits the profile shares with every session of the store
    /// (`[limits.PROFILE]`, read at every start, never recorded).
    pub shared_limits: Option<pod::shared_limits::SharedLimitsConfig>,
    /// The sandbox `bash` runs in.
    pub sandbox: SandboxPolicy,
    /// Subagents' limits (their model is built with the providers).
    pub subagents: pod::SubagentConfig,
    /// Where notifications go (`[notify]`, the profile's over it).
    pub notify: pod_notify::NotifyConfig,
    /// What "done" means: the checks and grader that verify runs.
    pub goal: Option<crate::goal::RecordedGoal>,
}

impl Resolved {
    /// Resolves `flags` over `recorded` and the config file.
    pub fn resolve(flags: &Flags, recorded: Option<&Launch>) -> Result<Self, LaunchError> {
        Self::resolve_in(model::config_file(&flags.model)?, flags, recorded)
    }

    /// Resolves `flags` over `recorded` and `file` (a config file read
    /// already: a replay's `--config`).
    pub(crate) fn resolve_in(
        file: pod_providers::ConfigFile,
        flags: &Flags,
        recorded: Option<&Launch>,
    ) -> Result<Self, LaunchError> {
        let choice = model::choose(
            &flags.model,
            &file,
            recorded.map(|launch| (&launch.provider, launch.profile.as_ref())),
        )?;
        let approval_flags = match recorded {
            Some(launch) => launch.approval.or_given(&flags.approval),
            None => flags.approval.clone(),
        };
        let sandbox = sandbox::resolve(&file, recorded.and_then(|l| l.sandbox), &flags.sandbox)?;
        let approval = approval::policy(&file, &approval_flags, sandbox.is_enforced())?;
        let session_budget =
            budget::session(&file, choice.raw.budget.as_ref(), None, &flags.budget)?;
        let max_run_cost = match recorded.and_then(|launch| launch.max_run_cost) {
            Some(cost) if flags.budget.max_run_cost.is_none() => Some(cost),
            _ => budget::max_run_cost(&file, choice.raw.budget.as_ref(), &flags.budget)?,
        };
        let loop_guard = budget::loop_guard(&file, choice.raw.budget.as_ref())?;
        let shared_limits =
            crate::limits::resolve(&file, choice.profile.as_deref(), choice.raw.prices)?;
        let subagents = crate::subagents::resolve(&file)?;
        let notify = crate::notify::resolve(&file, choice.raw.notify.as_ref())?;
        let goal = crate::goal::resolve(
            &file,
            choice.raw.goal.as_ref(),
            recorded.and_then(|launch| launch.goal.as_ref()),
            &flags.goal,
        )?;
        let budget = budget::resolve(
            &file,
            choice.raw.budget.as_ref(),
            recorded.map(|launch| &launch.budget),
            &flags.budget,
        )?;
        let resolved = Self {
            file,
            choice,
            approval_flags,
            approval,
            until_done: flags.until_done || recorded.is_some_and(|launch| launch.until_done),
            followups: flags.followups || recorded.is_some_and(|launch| launch.followups),
            budget,
            session_budget,
            max_run_cost,
            loop_guard,
            shared_limits,
            sandbox,
            subagents,
            notify,
            goal,
        };
        resolved.check_prices()?;
        Ok(resolved)
    }

    /// These settings for a session whose log recorded `limits`: the flags
    /// over them, instead of over the config file.
    pub fn with_recorded_limits(
        mut self,
        limits: pod::SessionBudget,
        flags: &Flags,
    ) -> Result<Self, LaunchError> {
        self.session_budget = limits.overlaid(budget::session_flags(&flags.budget));
        self.check_prices()?;
        Ok(self)
    }

    /// A money limit without prices is refused before anything runs.
    fn check_prices(&self) -> Result<(), LaunchError> {
        let money = self.session_budget.cost.is_some() || self.max_run_cost.is_some();
        if money && self.choice.raw.prices.is_none() {
            return Err(LaunchError::settings(
                "a cost limit (--max-cost, --max-run-cost, max_cost or max_run_cost) needs the \
                 model's prices",
                "add prices to the profile, e.g. prices = { input = 3.0, cache_write = 3.75, \
                 cache_read = 0.3, output = 15.0 } (per million tokens)",
            ));
        }
        Ok(())
    }

    /// What a new session records of these settings (its MCP servers are
    /// added once they are known).
    pub fn launch(&self) -> Launch {
        let mut provider = self.choice.raw.clone();
        provider.budget = None;
        provider.notify = None;
        provider.goal = None;
        Launch {
            profile: self.choice.profile.clone(),
            provider,
            approval: RecordedApproval::from_args(&self.approval_flags),
            until_done: self.until_done,
            followups: self.followups,
            budget: self.budget.clone(),
            max_run_cost: self.max_run_cost,
            sandbox: Some(self.sandbox),
            mcp_servers: Vec::new(),
            hooks: Vec::new(),
            checkpoints: true,
            worktree: None,
            goal: self.goal.clone(),
            prompt: None,
        }
    }

    /// The line a front end shows at start when the sandbox is asked for but
    /// the kernel cannot enforce it; `None` when all is as asked.
    pub fn sandbox_warning(&self) -> Option<String> {
        sandbox::warning(&self.sandbox)
    }
}
