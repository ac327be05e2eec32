//! The approval policy: per tool `allow`, `ask` or `deny`, checked in the
//! Pod's `pre_tool_call`. `ask` goes to the front end through an
//! [`Approver`]; a refusal becomes a tool result telling the model why.
//!
//! In a profile TOML file:
//!
//! ```toml
//! [approval]
//! default = "allow"            # tools not listed below
//! timeout_secs = 7200          # a question unanswered for 2 h is a "no"
//! [approval.tools]
//! bash = "allow"
//! write_file = "deny"
//! ```
//!
//! The [`ApprovalGate`](crate::ApprovalGate) applies it and keeps every
//! question and answer in the session log ([`crate::questions`]).

use pod_tools::{BASH, EDIT_FILE, GLOB, GREP, LIST_DIR, READ_FILE, TODO_WRITE, WRITE_FILE};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::str::FromStr;
use tokio_util::sync::CancellationToken;

/// What to do with calls of one tool.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ToolPolicy {
    /// Run without asking.
    Allow,
    /// Ask the front end each time (until it answers "always").
    Ask,
    /// Never run; the model is told the call was refused.
    Deny,
}

impl ToolPolicy {
    /// The name used in config and flags.
    pub fn as_str(self) -> &'static str {
        match self {
            ToolPolicy::Allow => "allow",
            ToolPolicy::Ask => "ask",
            ToolPolicy::Deny => "deny",
        }
    }
}

/// A policy name that is not `allow`, `ask` or `deny`.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("unknown tool policy `{0}`: expected allow, ask or deny")]
pub struct UnknownPolicy(pub String);

impl FromStr for ToolPolicy {
    type Err = UnknownPolicy;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim().to_ascii_lowercase().as_str() {
            "allow" => Ok(ToolPolicy::Allow),
            "ask" => Ok(ToolPolicy::Ask),
            "deny" => Ok(ToolPolicy::Deny),
            _ => Err(UnknownPolicy(s.to_string())),
        }
    }
}

/// The policy of every tool: an entry per tool, and a default for the rest.
///
/// Read from config, the entries given are laid over the built-in defaults
/// (so `[approval.tools] bash = "allow"` keeps `edit_file` at `ask`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(from = "PolicyFile")]
pub struct ApprovalPolicy {
    /// For tools without an entry. `allow` by default: tools the embedding
    /// program registers are its own choice.
    pub default: ToolPolicy,
    /// Per tool name.
    pub tools: BTreeMap<String, ToolPolicy>,
    /// How long a question may wait for a person (`[approval] timeout_secs`);
    /// then it is answered "no" by itself (recorded `via: timeout`). `None`:
    /// it waits as long as it takes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_secs: Option<u64>,
}

impl Default for ApprovalPolicy {
    /// Reads and the plan are allowed; writes and `bash` ask.
    fn default() -> Self {
        let mut tools = BTreeMap::new();
        for read in [READ_FILE, LIST_DIR, GLOB, GREP, TODO_WRITE] {
            tools.insert(read.to_string(), ToolPolicy::Allow);
        }
        for write in [WRITE_FILE, EDIT_FILE, BASH] {
            tools.insert(write.to_string(), ToolPolicy::Ask);
        }
        Self {
            default: ToolPolicy::Allow,
            tools,
            timeout_secs: None,
        }
    }
}

impl ApprovalPolicy {
    /// A policy where every tool gets `policy`.
    pub fn all(policy: ToolPolicy) -> Self {
        Self {
            default: policy,
            tools: BTreeMap::new(),
            timeout_secs: None,
        }
    }

    /// The policy for `tool`: its own entry, else the longest pattern
    /// entry (`PREFIX*`, such as `github__*` for every tool of an MCP
    /// server) that matches, else the default.
    pub fn get(&self, tool: &str) -> ToolPolicy {
        self.explicit(tool).unwrap_or(self.default)
    }

    /// The entry that decides `tool`, if any (its own, or the longest
    /// matching `PREFIX*` pattern); `None` means the default applies.
    pub fn explicit(&self, tool: &str) -> Option<ToolPolicy> {
        if let Some(policy) = self.tools.get(tool) {
            return Some(*policy);
        }
        self.tools
            .iter()
            .filter_map(|(name, policy)| {
                let prefix = name.strip_suffix('*')?;
                tool.starts_with(prefix).then_some((prefix.len(), *policy))
            })
            .max_by_key(|(len, _)| *len)
            .map(|(_, policy)| policy)
    }

    /// Sets the policy of one tool.
    pub fn set(&mut self, tool: impl Into<String>, policy: ToolPolicy) -> &mut Self {
        self.tools.insert(tool.into(), policy);
        self
    }

    /// `--yes`: every `ask` becomes `allow` (a `deny` stays).
    pub fn allow_all_asks(&mut self) -> &mut Self {
        if self.default == ToolPolicy::Ask {
            self.default = ToolPolicy::Allow;
        }
        for policy in self.tools.values_mut() {
            if *policy == ToolPolicy::Ask {
                *policy = ToolPolicy::Allow;
            }
        }
        self
    }

    /// Applies command-line flags: `--yes` first, then each `--allow TOOL`
    /// and `--deny TOOL` (a deny wins over an allow of the same tool).
    pub fn apply_flags(&mut self, flags: &ApprovalFlags) -> &mut Self {
        if flags.yes {
            self.allow_all_asks();
        }
        for tool in &flags.allow {
            self.set(tool.clone(), ToolPolicy::Allow);
        }
        for tool in &flags.ask {
            self.set(tool.clone(), ToolPolicy::Ask);
        }
        for tool in &flags.deny {
            self.set(tool.clone(), ToolPolicy::Deny);
        }
        self
    }
}

/// The config form: only what the user wrote.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct PolicyFile {
    #[serde(default)]
    default: Option<ToolPolicy>,
    #[serde(default)]
    tools: BTreeMap<String, ToolPolicy>,
    #[serde(default)]
    timeout_secs: Option<u64>,
}

impl From<PolicyFile> for ApprovalPolicy {
    fn from(file: PolicyFile) -> Self {
        let mut policy = ApprovalPolicy::default();
        if let Some(default) = file.default {
            policy.default = default;
        }
        policy.tools.extend(file.tools);
        policy.timeout_secs = file.timeout_secs;
        policy
    }
}

/// Approval settings given on the command line.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ApprovalFlags {
    /// `--yes`: allow every tool that would ask.
    pub yes: bool,
    /// `--allow TOOL`, repeatable.
    pub allow: Vec<String>,
    /// `--deny TOOL`, repeatable.
    pub deny: Vec<String>,
    /// Tools that ask even under `yes` (no flag: a Managed Agents API
    /// agent's `always_ask` toolsets).
    pub ask: Vec<String>,
}

/// A tool call waiting for the user's decision.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ApprovalRequest {
    /// The call id.
    pub call_id: String,
    /// The tool.
    pub tool: String,
    /// The raw JSON arguments.
    pub arguments: String,
    /// One line saying what the call does, for a prompt (for example
    /// `bash: cargo test` or `edit_file: src/main.rs`).
    pub summary: String,
    /// The subagent asking, when the call is a subagent's (the parent
    /// session's approver answers its questions).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subagent: Option<SubagentLabel>,
}

/// Which subagent a question comes from.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SubagentLabel {
    /// The subagent's session.
    pub session_id: uuid::Uuid,
    /// The task's short description.
    pub description: String,
}

impl ApprovalRequest {
    /// A request for this call, with its summary.
    pub fn new(call_id: &str, tool: &str, arguments: &str) -> Self {
        Self {
            call_id: call_id.into(),
            tool: tool.into(),
            arguments: arguments.into(),
            summary: summarize(tool, arguments),
            subagent: None,
        }
    }
}

/// The line shown to the user: the tool and its main argument.
fn summarize(tool: &str, arguments: &str) -> String {
    // Long enough for a typical command line, short enough for one line.
    const MAX_CHARS: usize = 200;
    let value: serde_json::Value = serde_json::from_str(arguments).unwrap_or_default();
    let main = ["command", "path", "pattern"]
        .iter()
        .find_map(|key| value.get(*key).and_then(|v| v.as_str()));
    let text = match main {
        Some(main) => format!("{tool}: {main}"),
        None => format!("{tool} {arguments}"),
    };
    match text.char_indices().nth(MAX_CHARS) {
        Some((at, _)) => format!("{}…", &text[..at]),
        None => text,
    }
}

pub use crate::decision::ApprovalDecision;

/// Asks the user about a call; implemented by front ends (a terminal
/// prompt, ACP's `session/request_permission`).
#[async_trait::async_trait]
pub trait Approver: Send + Sync {
    /// Decides about one call. Called while the turn waits; `cancel` is the
    /// run's token: once it fires, withdraw the question and answer
    /// [`ApprovalDecision::Cancelled`].
    async fn decide(&self, request: ApprovalRequest, cancel: CancellationToken)
        -> ApprovalDecision;

    /// Who answers through this approver, for the answer's record.
    fn answerer(&self) -> Answerer {
        Answerer::via("approver")
    }
}

/// Who gives an answer and through what.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Answerer {
    /// `terminal`, `cli`, `http`, `acp`, `timeout`, or an embedder's name.
    pub via: String,
    /// A user name, when known.
    pub by: Option<String>,
    /// A host or address, when known.
    pub from: Option<String>,
}

impl Answerer {
    /// Through `via`, from nobody in particular.
    pub fn via(via: impl Into<String>) -> Self {
        Self {
            via: via.into(),
            by: None,
            from: None,
        }
    }

    /// The answer it gives to `question`.
    pub fn answer(
        &self,
        question: &crate::log::QuestionRecord,
        decision: ApprovalDecision,
        pending: bool,
    ) -> crate::log::AnswerRecord {
        crate::log::AnswerRecord {
            question: question.id,
            call_id: question.request.call_id.clone(),
            decision,
            by: self.by.clone(),
            via: self.via.clone(),
            from: self.from.clone(),
            at: chrono::Utc::now(),
            pending,
            result: None,
        }
    }
}
