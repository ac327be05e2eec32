//! How a session was started, recorded in its log header so that `pod
//! resume ID` starts it the same way, and what flags given to resume change.
//!
//! Recorded: the model settings (the profile merged with the flags, the
//! script path made absolute; only the *name* of the API key's variable,
//! never a key), the profile's name, the approval flags, --until-done, the
//! budget and the sandbox. What wins on resume:
//! - `--profile`, `--provider` or `--script` (alone: it means the scripted
//!   model) replace the recorded model settings (resolved from the config
//!   file as `run` does); `--model` and `--base-url` alone change that
//!   setting of the recorded ones. The file's `default_profile` never
//!   replaces a recorded model.
//! - Approval flags given to resume replace the recorded ones.
//! - `--until-done` turns until-done on; a recorded until-done stays on.
//! - Budget flags override the recorded budget (and the recorded
//!   `--max-run-cost`).
//! - `--sandbox` and `--network` override the recorded sandbox.
//! - Hooks are read when the session starts and recorded whole (the
//!   commands, not the file names: a file in the workspace is the agent's
//!   to change); `--hooks` or `--workspace-hooks` given to resume read them
//!   again.
//! - The system prompt's parts (instruction files and their text, the
//!   agent, agents and skills) are read when the session starts and
//!   recorded whole; nothing given to resume changes them.

use pod::log::{LaunchJson, SessionHeader};
use pod::ApprovalFlags;
use pod_providers::RawProviderConfig;
use pod_worker::Budget;
use serde::{Deserialize, Serialize};

/// What `run` records.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Launch {
    /// The profile named (or the default profile used), for display.
    #[serde(default)]
    pub profile: Option<String>,
    /// The model settings: profile merged with flags, paths absolute.
    pub provider: RawProviderConfig,
    /// The approval flags.
    #[serde(default)]
    pub approval: RecordedApproval,
    /// Whether `--until-done` was on.
    #[serde(default)]
    pub until_done: bool,
    /// Whether `--followups` was on (the `schedule_followup` tool).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub followups: bool,
    /// The run's limits.
    #[serde(default)]
    pub budget: Budget,
    /// The money one run may spend (`--max-run-cost`); the session's own
    /// limits are `limits` records in the log.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_run_cost: Option<pod_llm::Cost>,
    /// The sandbox (absent in sessions from before it existed: they get
    /// the config file's or the default).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sandbox: Option<pod::SandboxPolicy>,
    /// The MCP servers attached (names and how they were started; no env
    /// values, no headers), so a resume attaches them again.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub mcp_servers: Vec<pod_mcp::RecordedServer>,
    /// The hooks, as read when the session started.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub hooks: Vec<RecordedHooks>,
    /// Whether the session takes checkpoints (`--no-checkpoints` recorded,
    /// so a fleet worker honours it).
    #[serde(default = "yes", skip_serializing_if = "is_yes")]
    pub checkpoints: bool,
    /// The git worktree made for the session (`--worktree`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub worktree: Option<RecordedWorktree>,
    /// What "done" means: the checks and grader that verify its runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub goal: Option<crate::goal::RecordedGoal>,
    /// What its system prompt was made of (instruction files and their
    /// text, the agent, the agents and skills offered), as read when it
    /// started; absent in sessions from before pod read them (they had the
    /// built-in prompt alone).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompt: Option<crate::prompt::RecordedPrompt>,
}

fn yes() -> bool {
    true
}

fn is_yes(value: &bool) -> bool {
    *value
}

/// A session's own git worktree.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RecordedWorktree {
    /// The repository it is a worktree of.
    pub repo: std::path::PathBuf,
    /// Its directory.
    pub path: std::path::PathBuf,
    /// Its branch.
    pub branch: String,
    /// Where the session works in it.
    pub workspace: std::path::PathBuf,
}

/// The `"hooks"` object of one settings file, as read.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RecordedHooks {
    /// The file it was read from, for messages.
    pub source: std::path::PathBuf,
    /// Its `"hooks"` object.
    pub hooks: serde_json::Value,
}

/// The approval flags as given.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RecordedApproval {
    /// `--yes`.
    #[serde(default)]
    pub yes: bool,
    /// `--allow TOOL`s.
    #[serde(default)]
    pub allow: Vec<String>,
    /// `--deny TOOL`s.
    #[serde(default)]
    pub deny: Vec<String>,
    /// Tools that ask even under `--yes` (a Managed Agents API agent's).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ask: Vec<String>,
}

impl RecordedApproval {
    /// The flags as recorded.
    pub fn from_args(args: &ApprovalFlags) -> Self {
        Self {
            yes: args.yes,
            allow: args.allow.clone(),
            deny: args.deny.clone(),
            ask: args.ask.clone(),
        }
    }

    /// The flags to apply on resume: those given, else the recorded ones.
    pub fn or_given(&self, given: &ApprovalFlags) -> ApprovalFlags {
        if given.yes || !given.allow.is_empty() || !given.deny.is_empty() || !given.ask.is_empty() {
            return given.clone();
        }
        ApprovalFlags {
            yes: self.yes,
            allow: self.allow.clone(),
            deny: self.deny.clone(),
            ask: self.ask.clone(),
        }
    }
}

impl Launch {
    /// The record as the header stores it and a Pod's config keeps it.
    pub fn to_json(&self) -> Option<LaunchJson> {
        LaunchJson::of(self).ok()
    }

    /// What the session recorded; `None` for sessions started before pod
    /// recorded it, or by another front end. A record this pod cannot read
    /// is reported and ignored.
    pub fn from_header(header: &SessionHeader) -> Option<Self> {
        let text = header.launch.as_ref()?.get();
        match serde_json::from_str(text) {
            Ok(launch) => Some(launch),
            Err(err) => {
                tracing::warn!(%err, "ignoring the session's unreadable launch record");
                None
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn approval_flags_given_replace_the_recorded_ones() {
        let recorded = RecordedApproval {
            yes: true,
            allow: vec![],
            deny: vec!["bash".into()],
            ask: vec![],
        };
        let none = ApprovalFlags::default();
        let applied = recorded.or_given(&none);
        assert!(applied.yes);
        assert_eq!(applied.deny, ["bash"]);
        let given = ApprovalFlags {
            allow: vec!["write_file".into()],
            ..ApprovalFlags::default()
        };
        let applied = recorded.or_given(&given);
        assert!(!applied.yes);
        assert!(applied.deny.is_empty());
        assert_eq!(applied.allow, ["write_file"]);
    }

    #[test]
    fn a_launch_round_trips_through_the_header_without_the_budget_table() {
        let launch = Launch {
            profile: Some("local".into()),
            provider: RawProviderConfig {
                model: Some("m".into()),
                api_key_env: Some("MY_KEY".into()),
                ..RawProviderConfig::default()
            },
            approval: RecordedApproval::default(),
            until_done: true,
            followups: false,
            budget: Budget::default(),
            max_run_cost: None,
            sandbox: Some(pod::SandboxPolicy {
                mode: pod::SandboxMode::Strict,
                network: true,
            }),
            mcp_servers: Vec::new(),
            hooks: Vec::new(),
            checkpoints: true,
            worktree: None,
            goal: None,
            prompt: None,
        };
        let mut header = SessionHeader::new(uuid::Uuid::nil(), "m".into(), "/w".into());
        header.launch = launch.to_json();
        assert_eq!(Launch::from_header(&header), Some(launch));
        header.launch = LaunchJson::of(&serde_json::json!({"provider": 3})).ok();
        assert_eq!(Launch::from_header(&header), None);
    }
}
