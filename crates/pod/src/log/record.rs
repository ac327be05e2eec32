//! What a log line holds.

use chrono::{DateTime, Utc};
use pod_llm::Item;
use serde::{Deserialize, Serialize};
use std::path::PathBuf;
use uuid::Uuid;

/// Version of the log format (framing and record kinds). Version 2 added
/// the [`LogRecord::Stopped`] record and [`SessionHeader::launch`]; version 3
/// the [`LogRecord::Question`] and [`LogRecord::Answer`] records; version
/// 4 the [`LogRecord::Ended`] record; version 5 the [`LogRecord::Hook`]
/// and [`LogRecord::Checkpoint`] records; version 6 the
/// [`LogRecord::Limits`] record. Logs of earlier versions are read as they
/// are.
pub const LOG_FORMAT_VERSION: u32 = 6;

/// One line of a session log.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LogRecord {
    /// The first line: what the session is.
    Header(SessionHeader),
    /// A committed history item.
    Item(Item),
    /// A compaction boundary: the active context restarts from here.
    Compaction(CompactionRecord),
    /// A run ended because a budget limit stopped it (the history before
    /// it is valid; a later run continues it with a fresh budget).
    Stopped(StoppedRecord),
    /// A tool call waits for a person's answer; written before anyone is
    /// asked, so the question survives any crash.
    Question(QuestionRecord),
    /// The answer to a question: who gave it, from where, what it was.
    Answer(AnswerRecord),
    /// A run ended otherwise than by its answer or a budget: it failed, was
    /// cancelled, or was interrupted (Ctrl-C), with what was cut.
    Ended(EndedRecord),
    /// What the operator's `PreToolUse` hooks decided about a tool call,
    /// written before the call runs: a resume acts on it instead of running
    /// the hooks again.
    Hook(HookRecord),
    /// The workspace's files before or after a call that may change them.
    Checkpoint(CheckpointRecord),
    /// A run's span context, when traces are exported: a run that
    /// continues the session carries on its trace.
    Trace(TraceRecord),
    /// A round of verification: the operator's checks run (and the grader
    /// asked) when the model ended its turn, and what they said.
    Verify(VerifyRecord),
    /// The session's limits, as set when it started or raised since (the
    /// last one holds): every later start of the session keeps them.
    Limits(LimitsRecord),
}

impl LogRecord {
    /// When it was written, for the records that say (all but a
    /// compaction boundary).
    pub fn at(&self) -> Option<DateTime<Utc>> {
        match self {
            LogRecord::Header(header) => Some(header.created_at),
            LogRecord::Item(item) => Some(item.at),
            LogRecord::Compaction(_) => None,
            LogRecord::Stopped(stopped) => Some(stopped.at),
            LogRecord::Question(question) => Some(question.asked_at),
            LogRecord::Answer(answer) => Some(answer.at),
            LogRecord::Ended(ended) => Some(ended.at),
            LogRecord::Verify(verify) => Some(verify.at),
            LogRecord::Hook(hook) => Some(hook.at),
            LogRecord::Checkpoint(checkpoint) => Some(checkpoint.at),
            LogRecord::Trace(trace) => Some(trace.at),
            LogRecord::Limits(limits) => Some(limits.at),
        }
    }
}

/// A [`LogRecord::Limits`]: the session's limits from here on.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LimitsRecord {
    /// Every limit of the session (not only the ones changed).
    pub limits: crate::interceptors::SessionBudget,
    /// Who set them: `start` for the session's launch, `cli`, `http`, or a
    /// front end's name for a raise.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub via: String,
    /// When.
    pub at: DateTime<Utc>,
}

impl LimitsRecord {
    /// `limits`, set now by `via`.
    pub fn now(limits: crate::interceptors::SessionBudget, via: &str) -> Self {
        Self {
            limits,
            via: via.to_string(),
            at: Utc::now(),
        }
    }
}

/// A [`LogRecord::Trace`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TraceRecord {
    /// The run's span as a W3C `traceparent`.
    pub traceparent: String,
    /// When the run started.
    pub at: DateTime<Utc>,
}

/// When a [`CheckpointRecord`] was taken.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CheckpointPhase {
    /// Before the call ran.
    Before,
    /// After it ran (before its result was committed).
    After,
}

/// A [`LogRecord::Checkpoint`]: the workspace's files, as a tree in pod's
/// shadow object store (`POD_HOME/checkpoints.git`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CheckpointRecord {
    /// The call.
    pub call_id: String,
    /// Its tool.
    pub tool: String,
    /// Before or after it ran.
    pub phase: CheckpointPhase,
    /// The git tree id of the workspace's files.
    pub tree: String,
    /// Files left out for their size (`pod_checkpoint::SIZE_LIMIT`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub skipped: Vec<String>,
    /// Paths left out because git cannot store their names (`.GIT/…`); a
    /// directory ends in `/`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unindexed: Vec<String>,
    /// When.
    pub at: DateTime<Utc>,
}

/// What `PreToolUse` hooks decided about a call.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum HookDecision {
    /// Run it without asking.
    Allow,
    /// Ask a person, whatever the policy says.
    Ask,
    /// Do not run it.
    Deny,
    /// No decision: the policy decides (the input may still be rewritten).
    None,
}

/// A [`LogRecord::Hook`]: the decision of the hooks that ran for one call.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct HookRecord {
    /// The call.
    pub call_id: String,
    /// Its tool.
    pub tool: String,
    /// What they decided.
    pub decision: HookDecision,
    /// Why, for the model (a denial's reason) or the person asked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// The call's arguments as a hook rewrote them (`updatedInput`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arguments: Option<String>,
    /// Context a hook gave for the model, added to the call's result.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub context: Vec<String>,
    /// `"continue": false`: the run stops, with this reason.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stop: Option<String>,
    /// The commands that ran.
    pub hooks: Vec<String>,
    /// When they decided.
    pub at: DateTime<Utc>,
}

/// How a run ended when it did not finish: what [`LogRecord::Ended`] says.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EndedHow {
    /// An error ended it (a provider's, a tool's crash, an interceptor's
    /// abort, a refused or truncated answer).
    Failed,
    /// Someone cancelled it (the API, the dashboard, an editor).
    Cancelled,
    /// The person at the terminal interrupted it (Ctrl-C, a closed output).
    Interrupted,
}

/// A run that ended without finishing, and what it cut short.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct EndedRecord {
    /// How.
    pub how: EndedHow,
    /// Why, in words (the error with its causes, for a failure).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// The answer the model was streaming when it was cut: the item holds
    /// only what had arrived, and was not a finished answer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub partial_answer: Option<Uuid>,
    /// Tool calls the model was still streaming: they were not made.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub calls_not_made: Vec<String>,
    /// When.
    pub at: DateTime<Utc>,
}

/// A question to a person about a tool call.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct QuestionRecord {
    /// The question's id: what an answer names (the API's approval id).
    pub id: Uuid,
    /// The call, its tool, arguments and one-line summary (and the
    /// subagent asking, when a child's call reached its parent's approver).
    pub request: crate::approval::ApprovalRequest,
    /// When it was asked.
    pub asked_at: DateTime<Utc>,
    /// When it is answered "no" by itself, if it has a timeout.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<DateTime<Utc>>,
}

/// The answer to a [`QuestionRecord`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct AnswerRecord {
    /// The question answered.
    pub question: Uuid,
    /// The call it is about.
    pub call_id: String,
    /// The decision (never `cancelled` or `later`: those are not answers).
    pub decision: crate::decision::ApprovalDecision,
    /// Who answered, when known (a user name).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub by: Option<String>,
    /// Through what: `terminal`, `cli`, `http`, `acp`, `timeout`, or an
    /// embedder's name for its front end.
    pub via: String,
    /// From where, when known (a host or an address).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from: Option<String>,
    /// When.
    pub at: DateTime<Utc>,
    /// Given while the session was parked: nothing has acted on it yet, and
    /// the call runs (with this decision) when the session continues.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub pending: bool,
    /// The call's result, when the client that runs the tool answered
    /// (a [`ClientToolSpec`](crate::ClientToolSpec)'s call): the call gets
    /// it instead of running.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<crate::ClientResult>,
}

/// Why and when a run was stopped by its budget.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct StoppedRecord {
    /// The limit that stopped it.
    pub limit: pod_worker::Limit,
    /// Model requests the run made.
    pub requests: u64,
    /// Tokens the run spent, as providers reported them.
    pub tokens: u64,
    /// When.
    pub at: DateTime<Utc>,
}

/// A compaction boundary. The new context is `summary`, then `tail`, then
/// `carry_over`; the items before the boundary stay in the log for audit.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CompactionRecord {
    /// The summary, as the system item the model sees.
    pub summary: Item,
    /// The recent items kept verbatim (copies of earlier log items).
    pub tail: Vec<Item>,
    /// Items carried over after the tail (the unfinished plan).
    pub carry_over: Vec<Item>,
    /// The todo list at the boundary; replay restores it from here.
    pub todos: Vec<pod_tools::TodoItem>,
    /// Estimated tokens before.
    pub tokens_before: u64,
    /// Estimated tokens after.
    pub tokens_after: u64,
    /// What writing the summary used, as its provider reported it: the
    /// session's money meter counts it (absent in logs from before it was
    /// recorded, and for a summary whose provider reported none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<pod_llm::Usage>,
}

impl CompactionRecord {
    /// The active context this boundary starts.
    pub fn into_context(self) -> Vec<Item> {
        let mut context = Vec::with_capacity(self.tail.len() + self.carry_over.len() + 1);
        context.push(self.summary);
        context.extend(self.tail);
        context.extend(self.carry_over);
        context
    }
}

/// A front end's launch record ([`SessionHeader::launch`]), kept as the
/// JSON text it was written as. The Pod stores it and never reads it, so
/// reading a log does not build it: building it as a `Value` was most of
/// the cost of parsing a fleet session's records, read at every start.
/// Equal when the text is.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(transparent)]
pub struct LaunchJson(Box<serde_json::value::RawValue>);

impl LaunchJson {
    /// `value` written as JSON text.
    pub fn of<T: Serialize + ?Sized>(value: &T) -> Result<Self, serde_json::Error> {
        serde_json::value::to_raw_value(value).map(Self)
    }

    /// The JSON text.
    pub fn get(&self) -> &str {
        self.0.get()
    }
}

impl PartialEq for LaunchJson {
    fn eq(&self, other: &Self) -> bool {
        self.get() == other.get()
    }
}

/// The first line of every session log.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SessionHeader {
    /// Log format version ([`LOG_FORMAT_VERSION`]).
    pub format_version: u32,
    /// Item JSON version ([`pod_llm::ITEM_FORMAT_VERSION`]).
    pub item_format_version: u32,
    /// The session id (also the directory name).
    pub session_id: Uuid,
    /// When the session was created.
    pub created_at: DateTime<Utc>,
    /// The model the session started with.
    pub model: String,
    /// The workspace directory.
    pub workspace: PathBuf,
    /// The session this one was forked from, with the item count taken.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub forked_from: Option<(Uuid, usize)>,
    /// How a front end started the session (its model, its settings), so
    /// resuming can start it the same way. Opaque to the Pod, which stores
    /// it and never reads it; it must never hold secrets.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub launch: Option<LaunchJson>,
    /// The session and call that started this one, when it is a subagent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent: Option<ParentLink>,
    /// What started it when no person did: a schedule's fire.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub origin: Option<Origin>,
}

/// What started a session by itself ([`SessionHeader::origin`]).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Origin {
    /// A schedule (`pod schedule`), at one of its fire times.
    Schedule {
        /// The schedule's name.
        name: String,
        /// The fire time it was started for (one session per fire time).
        fire_at: DateTime<Utc>,
    },
    /// A webhook trigger (`POST /api/triggers/NAME`), for one delivery.
    Trigger {
        /// The trigger's name.
        name: String,
        /// The delivery's id (one session per delivery).
        delivery: String,
    },
}

impl std::fmt::Display for Origin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Origin::Schedule { name, fire_at } => write!(
                f,
                "schedule {name} ({})",
                fire_at.format("%Y-%m-%d %H:%M:%S UTC")
            ),
            Origin::Trigger { name, delivery } => write!(f, "trigger {name} (delivery {delivery})"),
        }
    }
}

/// Where a subagent's session comes from: its parent's `task` call.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ParentLink {
    /// The parent session.
    pub session_id: Uuid,
    /// The parent's call that started this session.
    pub call_id: String,
    /// 1 for a child of a top-level session, 2 for its child, and so on.
    pub depth: u32,
    /// The short description the parent gave the task.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub description: String,
    /// Started without the tools that write (`write_file`, `edit_file`,
    /// `bash`, the embedder's and MCP servers' tools).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub read_only: bool,
}

impl SessionHeader {
    /// A header for a new session.
    pub fn new(session_id: Uuid, model: String, workspace: PathBuf) -> Self {
        Self {
            format_version: LOG_FORMAT_VERSION,
            item_format_version: pod_llm::ITEM_FORMAT_VERSION,
            session_id,
            created_at: Utc::now(),
            model,
            workspace,
            forked_from: None,
            launch: None,
            parent: None,
            origin: None,
        }
    }
}

/// A round of verification (`--verify`): each check the operator named,
/// run in the workspace when the model ended its turn, and the grader's
/// verdict when one was asked. Written once the round is over; a round a
/// crash cut has no record and runs again.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct VerifyRecord {
    /// Which round since the last prompt (1 for the first).
    pub round: u32,
    /// The answer it verified: the model's last item before the checks.
    pub answer: Uuid,
    /// The checks, in order (the ones after a failure did not run).
    pub checks: Vec<CheckRecord>,
    /// The grader's verdict, when one was asked (only after every check
    /// passed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grader: Option<VerdictRecord>,
    /// Whether the round passed: every check and the grader.
    pub passed: bool,
    /// When it ended.
    pub at: DateTime<Utc>,
}

/// One check of a round.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CheckRecord {
    /// Its name, when the config named it (`[goal.checks] NAME = "…"`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// The command line.
    pub command: String,
    /// Its exit code, when it exited.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i32>,
    /// The signal that ended it, when one did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signal: Option<i32>,
    /// It ran past its timeout and was killed.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub timed_out: bool,
    /// Why it could not run at all (the sandbox refused it, no `bash`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The end of its output (standard output, then standard error).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub output_tail: String,
    /// How long it ran, in milliseconds.
    pub duration_ms: u64,
}

impl CheckRecord {
    /// Whether it passed: it exited with code 0.
    pub fn passed(&self) -> bool {
        self.exit_code == Some(0)
    }
}

/// What the grader said of a round whose checks passed.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct VerdictRecord {
    /// Whether it judged the work done against the rubric.
    pub passed: bool,
    /// Its reasons, in its words.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub reasons: Vec<String>,
    /// Why there is no verdict: the grader could not be asked, or its
    /// answer held none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The grader's model.
    pub model: String,
    /// Its tokens.
    #[serde(default)]
    pub usage: pod_llm::Usage,
    /// What they cost, when the grader's profile has prices.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost: Option<pod_llm::Cost>,
}
