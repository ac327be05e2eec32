//! A session as read from its log, without opening it: what listings,
//! `show`, `fork`, a resume and the HTTP API need to know. Reading never takes the
//! session's lock, so running sessions can be inspected too.

use crate::error::LaunchError;
use chrono::{DateTime, Utc};
use pod::log::{LogRecord, SessionHeader};
use pod::replay::{replay, unanswered_calls};
use pod::SessionStore;
use pod_llm::{Item, ItemKind, SystemKind};
use pod_tools::{TodoItem, TodoStatus};
use serde::Serialize;
use std::path::PathBuf;
use uuid::Uuid;

/// Where a session stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    /// A process (or a fleet worker) has the session open.
    Running,
    /// A tool call waits for a person's answer (the question is in the
    /// log; `pod approve`, the HTTP API or the prompt that asked answers
    /// it). Whether a process holds it or it is parked.
    AwaitingApproval,
    /// Submitted to a fleet; waiting for a worker.
    Queued,
    /// Parked on a follow-up the agent scheduled (`schedule_followup`): a
    /// fleet worker continues it at its time; the reason says when and why.
    Waiting,
    /// Its question was answered while it was parked; the call runs when
    /// the session continues (a fleet worker or the `pod serve --http` that
    /// parked it does so by itself; else `pod resume`).
    Answered,
    /// Nothing happened yet, or the model answered with items of its plan
    /// unfinished.
    Idle,
    /// The model answered, and its plan (if it made one) is complete.
    Done,
    /// Its last run was cut short: the person at the terminal interrupted
    /// it (Ctrl-C), or its process died (a crash, a kill) mid-turn; the
    /// reason says what was cut.
    Interrupted,
    /// A budget limit ended its last run (the log's last record says so).
    Stopped,
    /// Its last run failed; the reason says why (the provider's error, an
    /// abort).
    Failed,
    /// Someone cancelled its last run (the API, the dashboard, an editor).
    Cancelled,
    /// The model answered, but the operator's checks (`--verify`) kept
    /// failing until the rounds were spent; the reason says which.
    Unverified,
    /// Made by `pod fork` from another session's first items, and not run
    /// since: `pod resume` goes on from there.
    Forked,
    /// Made by `pod rewind`: the files put back as after an item of
    /// another session, and this session forked there; not run since.
    Rewound,
    /// Its log cannot be read; the reason says where it is damaged.
    Damaged,
}

impl Status {
    /// The name shown in tables and JSON.
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Running => "running",
            Status::AwaitingApproval => "awaiting_approval",
            Status::Queued => "queued",
            Status::Waiting => "waiting",
            Status::Answered => "answered",
            Status::Idle => "idle",
            Status::Done => "done",
            Status::Interrupted => "interrupted",
            Status::Stopped => "stopped",
            Status::Failed => "failed",
            Status::Cancelled => "cancelled",
            Status::Unverified => "unverified",
            Status::Forked => "forked",
            Status::Rewound => "rewound",
            Status::Damaged => "damaged",
        }
    }
}

/// Todo progress.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Progress {
    /// Completed items.
    pub completed: usize,
    /// All items.
    pub total: usize,
}

impl Progress {
    /// Whether work remains.
    pub fn unfinished(&self) -> bool {
        self.completed < self.total
    }
}

/// The session a fork started from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct ForkedFrom {
    /// The source session.
    pub id: Uuid,
    /// Items taken from it.
    pub at: usize,
}

/// One line of `pod sessions`, and the head of `pod show`.
#[derive(Debug, Clone, Serialize)]
pub struct Summary {
    /// Session id.
    pub id: Uuid,
    /// When it was created (from the log header).
    pub created_at: DateTime<Utc>,
    /// When its log was last written.
    pub updated_at: DateTime<Utc>,
    /// The agent's workspace.
    pub workspace: PathBuf,
    /// Its task: the first line of its first prompt.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// The model it started with.
    pub model: String,
    /// Where it stands.
    pub status: Status,
    /// Todo progress.
    pub todos: Progress,
    /// History items in the log.
    pub items: usize,
    /// Where its log is: the file, or the database and session.
    pub log_path: String,
    /// Who has it open, when it is running.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub holder: Option<String>,
    /// The session it was forked from.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub forked_from: Option<ForkedFrom>,
    /// The session whose `task` call started it, when it is a subagent.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub parent: Option<pod::log::ParentLink>,
    /// What started it when no person did (a schedule's fire).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub origin: Option<pod::log::Origin>,
    /// The question it waits on, when the status is `awaiting_approval`
    /// (its `asked_at` is when it started waiting).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub question: Option<pod::log::QuestionRecord>,
    /// What the operator's checks said of its last answer, when it has
    /// checks (`done` with `verified`, `unverified`, or a round cut short).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub verification: Option<crate::verified::Verification>,
    /// The limit that stopped its last run, when the status is `stopped`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stopped_by: Option<pod_worker::Limit>,
    /// Its limits (money, wall time, requests, tokens) as its log recorded
    /// them last, when it has any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub limits: Option<pod::SessionBudget>,
    /// Why it is `failed`, `cancelled`, `interrupted` or `damaged`: the
    /// error, what was cut short, where the log is damaged.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// The line its log is damaged at, when the status is `damaged` because
    /// of one (the reason says it too, in words; listings that cut the
    /// reason short keep the line from here).
    #[serde(skip)]
    pub damage: Option<pod::log::Damage>,
    /// Tokens of all its answers, as the providers reported them.
    pub usage: pod_llm::Usage,
    /// What they cost, when the session's profile has prices: exact to a
    /// millionth, so it reads as a plain number (`0.07755`) without the
    /// noise of adding floats.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cost: Option<pod_llm::Cost>,
}

/// A session read from its log.
#[derive(Debug)]
pub struct Loaded {
    /// The summary.
    pub summary: Summary,
    /// The log header.
    pub header: SessionHeader,
    /// The header's launch record, read once (`None` without one, or
    /// with one this pod cannot read).
    pub launch: Option<crate::record::Launch>,
    /// Every record after the header.
    pub records: Vec<LogRecord>,
    /// The current todos (replayed).
    pub todos: Vec<TodoItem>,
}

impl Loaded {
    /// The full history, as `PodHandle::get_history` returns it.
    pub fn full_history(&self) -> Vec<Item> {
        full_history(&self.records)
    }

    /// Assistant items in the full history: the scripted model's next step
    /// after a resume.
    pub fn assistant_items(&self) -> usize {
        self.full_history()
            .iter()
            .filter(|item| matches!(item.kind, ItemKind::Assistant { .. }))
            .count()
    }
}

/// Every logged history item, with each compaction's summary and carried
/// over items at its boundary.
pub fn full_history(records: &[LogRecord]) -> Vec<Item> {
    pod::replay::full_history(records)
}

/// Session `id`'s summary, whatever state its log is in: a log that cannot
/// be read is a `damaged` summary whose reason says where, so a listing
/// never hides a session.
pub async fn summary(store: &dyn SessionStore, id: Uuid) -> Summary {
    match load(store, id).await {
        Ok(loaded) => loaded.summary,
        Err(err) => damaged(id, store.stat(id).await.ok(), store.log_location(id), &err),
    }
}

/// The summary of session `id`, whose log could not be read (`error`).
pub fn damaged(
    id: Uuid,
    stat: Option<pod::SessionStat>,
    log_path: String,
    error: &LaunchError,
) -> Summary {
    let updated_at = stat.as_ref().map(|s| s.updated_at).unwrap_or_else(Utc::now);
    let damage = match error.pod_error() {
        Some(pod::PodError::CorruptLog { line, reason, .. }) => Some(pod::log::Damage {
            line: *line,
            reason: reason.clone(),
        }),
        _ => None,
    };
    Summary {
        id,
        created_at: updated_at,
        updated_at,
        workspace: PathBuf::new(),
        title: None,
        model: String::new(),
        status: Status::Damaged,
        todos: Progress::default(),
        items: 0,
        log_path,
        holder: stat.and_then(|s| s.holder),
        forked_from: None,
        parent: None,
        origin: None,
        question: None,
        stopped_by: None,
        limits: None,
        verification: None,
        reason: Some(pod_llm::error_chain(error)),
        damage,
        usage: pod_llm::Usage::default(),
        cost: None,
    }
}

/// Reads session `id` from `store`.
pub async fn load(store: &dyn SessionStore, id: Uuid) -> Result<Loaded, LaunchError> {
    let location = store.log_location(id);
    let contents = store
        .read(id)
        .await
        .map_err(|err| LaunchError::pod(format!("cannot read session {id}"), err))?;
    let Some(header) = contents.header else {
        return Err(LaunchError::NoHeader { location });
    };
    let stat = store
        .stat(id)
        .await
        .map_err(|err| LaunchError::pod(format!("cannot stat {location}"), err))?;
    let replayed = replay(&contents.records);
    let questions = pod::questions::Questions::from_records(&contents.records);
    let question = questions
        .open(&replayed.history)
        .first()
        .map(|q| (*q).clone());
    let answered = !questions.pending(&replayed.history).is_empty();
    let items = pod::fork_item_count(&contents.records);
    // A raise of its limits (`pod budget`) does not change how its last
    // run ended.
    let last = contents
        .records
        .iter()
        .rev()
        .find(|record| !matches!(record, LogRecord::Limits(_)));
    let (stopped_by, ended) = match last {
        Some(LogRecord::Stopped(stopped)) => (Some(stopped.limit.clone()), None),
        Some(LogRecord::Ended(ended)) => (None, Some(ended)),
        _ => (None, None),
    };
    let mut reason = ended.map(ended_reason);
    let status = if question.is_some() {
        Status::AwaitingApproval
    } else if stat.holder.is_some() {
        Status::Running
    } else if stat.queued {
        Status::Queued
    } else if answered {
        Status::Answered
    } else if let Some(ended) = ended {
        match ended.how {
            pod::log::EndedHow::Failed => Status::Failed,
            pod::log::EndedHow::Cancelled => Status::Cancelled,
            pod::log::EndedHow::Interrupted => Status::Interrupted,
        }
    } else if stopped_by.is_some() {
        Status::Stopped
    } else if let Some(followup) = waiting_on(&replayed.history) {
        reason = Some(followup);
        Status::Waiting
    } else {
        let status = status_of(&replayed.history, &replayed.todos);
        if status == Status::Interrupted {
            reason = Some(cut_by_a_crash(&replayed.history));
        }
        status
    };
    // A fork that has not run since it was made is a fork, whatever the
    // point it was made at looks like (a call's result, not an answer).
    let status = match header.forked_from {
        Some((source, at))
            if items == at
                && matches!(status, Status::Interrupted | Status::Idle | Status::Done) =>
        {
            let rewound = matches!(contents.records.last(),
                Some(LogRecord::Checkpoint(c)) if c.tool == pod::checkpoints::REWIND);
            reason = Some(format!(
                "{} from session {source} at item {at}; `pod resume` goes on from there",
                if rewound { "rewound" } else { "forked" }
            ));
            match rewound {
                true => Status::Rewound,
                false => Status::Forked,
            }
        }
        _ => status,
    };
    let launch = crate::record::Launch::from_header(&header);
    // A done answer is done only once its checks passed.
    let verification = match status {
        Status::Done => crate::verified::of(
            &contents.records,
            &replayed.history,
            launch.as_ref().and_then(|l| l.goal.as_ref()),
        ),
        _ => None,
    };
    let status = match &verification {
        Some(crate::verified::Verification::Unverified { why }) => {
            reason = Some(why.clone());
            Status::Unverified
        }
        Some(crate::verified::Verification::Pending) => {
            reason = Some(
                "its process stopped while its checks ran (or before the model was told they \
                 failed): `pod resume` runs them again"
                    .into(),
            );
            Status::Interrupted
        }
        _ => status,
    };
    let (usage, _) = pod::ledger::session_usage(&contents.records);
    let cost = launch
        .as_ref()
        .and_then(|launch| launch.provider.prices.as_ref())
        .map(|prices| prices.charge(&usage));
    let summary = Summary {
        id,
        created_at: header.created_at,
        updated_at: stat.updated_at,
        workspace: header.workspace.clone(),
        title: contents.records.iter().find_map(|record| match record {
            LogRecord::Item(Item {
                kind: ItemKind::User { text },
                ..
            }) => Some(title_of(text)),
            _ => None,
        }),
        model: header.model.clone(),
        status,
        todos: progress(&replayed.todos),
        items,
        log_path: location,
        holder: stat.holder,
        forked_from: header.forked_from.map(|(id, at)| ForkedFrom { id, at }),
        parent: header.parent.clone(),
        origin: header.origin.clone(),
        question,
        verification,
        stopped_by,
        limits: pod::SessionBudget::recorded(&contents.records),
        reason,
        damage: None,
        usage,
        cost,
    };
    Ok(Loaded {
        summary,
        header,
        launch,
        records: contents.records,
        todos: replayed.todos,
    })
}

/// A task's title: the first line of its prompt with text, at most 80
/// characters.
pub fn title_of(prompt: &str) -> String {
    const MAX: usize = 80;
    let line = prompt
        .lines()
        .map(str::trim)
        .find(|line| !line.is_empty())
        .unwrap_or("");
    match line.char_indices().nth(MAX) {
        Some((cut, _)) => format!("{}…", line[..cut].trim_end()),
        None => line.to_string(),
    }
}

/// Completed and total todos.
pub fn progress(todos: &[TodoItem]) -> Progress {
    Progress {
        completed: todos
            .iter()
            .filter(|t| t.status == TodoStatus::Completed)
            .count(),
        total: todos.len(),
    }
}

/// What a session parked on a follow-up waits for ("until 2026-12-05
/// 10:00:00 UTC: check CI"), when its last answer's only open calls are
/// `schedule_followup`s.
fn waiting_on(history: &[Item]) -> Option<String> {
    let at = history
        .iter()
        .rposition(|item| matches!(item.kind, ItemKind::Assistant { .. }))?;
    let open = unanswered_calls(&history[at..]);
    let answer = &history[at];
    let calls: Vec<_> = answer
        .tool_calls()
        .iter()
        .filter(|call| open.contains(&call.id))
        .collect();
    let first = calls.first()?;
    if calls
        .iter()
        .any(|call| call.name != pod_tools::SCHEDULE_FOLLOWUP)
    {
        return None;
    }
    let asked = pod_tools::followup::parse(&first.arguments).ok()?;
    let due = answer.at + chrono::Duration::from_std(asked.delay).ok()?;
    Some(format!(
        "until {}: {}",
        due.format("%Y-%m-%d %H:%M:%S UTC"),
        asked.note
    ))
}

/// The status of a session nobody has open, from its active history.
pub fn status_of(history: &[Item], todos: &[TodoItem]) -> Status {
    // Summaries and carried-over state close a compaction; they say nothing
    // about whether the model had answered.
    let last = history.iter().rev().find(|item| {
        !matches!(
            item.kind,
            ItemKind::System {
                kind: SystemKind::Summary | SystemKind::CarryOver,
                ..
            }
        )
    });
    let answered = match last {
        None => true,
        Some(item) => {
            matches!(&item.kind, ItemKind::Assistant { tool_calls, .. } if tool_calls.is_empty())
        }
    };
    if last.is_none() {
        Status::Idle
    } else if !answered || !unanswered_calls(history).is_empty() {
        Status::Interrupted
    } else if todos.iter().all(|t| t.status == TodoStatus::Completed) {
        // A session without a plan that answered is done too.
        Status::Done
    } else {
        Status::Idle
    }
}

/// What an [`EndedRecord`](pod::log::EndedRecord) says, in a line.
fn ended_reason(ended: &pod::log::EndedRecord) -> String {
    let mut parts: Vec<String> = Vec::new();
    parts.extend(ended.reason.clone());
    if ended.partial_answer.is_some() {
        parts.push("the model's answer was cut short (kept as it stood)".into());
    }
    if !ended.calls_not_made.is_empty() {
        parts.push(format!(
            "calls not made: {}",
            ended.calls_not_made.join(", ")
        ));
    }
    if parts.is_empty() {
        parts.push(match ended.how {
            pod::log::EndedHow::Failed => "the run failed".into(),
            pod::log::EndedHow::Cancelled => "cancelled".into(),
            pod::log::EndedHow::Interrupted => "interrupted at the terminal".into(),
        });
    }
    parts.join("; ")
}

/// What a process that died mid-turn (a crash, a kill) left unfinished.
fn cut_by_a_crash(history: &[Item]) -> String {
    let open = unanswered_calls(history);
    if !open.is_empty() {
        let tools: Vec<String> = history
            .iter()
            .filter_map(|item| match &item.kind {
                ItemKind::Assistant { tool_calls, .. } => Some(tool_calls),
                _ => None,
            })
            .flatten()
            .filter(|call| open.iter().any(|id| id == &call.id))
            .map(|call| call.name.clone())
            .collect();
        return format!(
            "its process stopped while {} ran (no result recorded)",
            tools.join(", ")
        );
    }
    "its process stopped before the model answered".into()
}

/// Finds the session `text` names: a full id, or a prefix of exactly one.
pub async fn resolve(store: &dyn SessionStore, text: &str) -> Result<Uuid, LaunchError> {
    let wanted = text.trim().to_ascii_lowercase();
    if wanted.is_empty() {
        return Err(LaunchError::settings(
            "the session id is empty",
            "run `pod sessions` to list sessions",
        ));
    }
    let ids = store
        .list()
        .await
        .map_err(|err| LaunchError::pod("cannot list the sessions", err))?;
    let matches: Vec<Uuid> = ids
        .into_iter()
        .filter(|id| id.to_string().starts_with(&wanted))
        .collect();
    match matches.as_slice() {
        [id] => Ok(*id),
        [] => Err(LaunchError::settings(
            format!("no session {text} in {}", store.location()),
            "run `pod sessions` to list sessions (POD_HOME or --store selects another store)",
        )),
        many => Err(LaunchError::settings(
            format!("{text} names {} sessions", many.len()),
            format!(
                "give more of the id: {}",
                many.iter()
                    .map(|id| id.to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pod_llm::ToolCall;

    fn assistant(calls: &[&str]) -> Item {
        Item::new(ItemKind::Assistant {
            text: "t".into(),
            reasoning: None,
            tool_calls: calls
                .iter()
                .map(|id| ToolCall {
                    id: (*id).into(),
                    name: "x".into(),
                    arguments: "{}".into(),
                })
                .collect(),
            usage: None,
        })
    }

    fn todo(status: TodoStatus) -> TodoItem {
        TodoItem {
            id: "a".into(),
            content: "A".into(),
            status,
        }
    }

    #[test]
    fn status_follows_the_last_item_and_the_plan() {
        let done = [todo(TodoStatus::Completed)];
        let open = [todo(TodoStatus::Pending)];
        let answered = vec![Item::user("go"), assistant(&[])];
        assert_eq!(status_of(&answered, &done), Status::Done);
        assert_eq!(status_of(&answered, &open), Status::Idle);
        // Without a plan, an answer is the end.
        assert_eq!(status_of(&answered, &[]), Status::Done);
        assert_eq!(status_of(&[], &[]), Status::Idle);
        let calling = vec![Item::user("go"), assistant(&["c1"])];
        assert_eq!(status_of(&calling, &done), Status::Interrupted);
        let mut answered_call = calling.clone();
        answered_call.push(Item::tool_result("c1", "ok", false));
        assert_eq!(status_of(&answered_call, &done), Status::Interrupted);
        let prompt_only = vec![Item::user("go")];
        assert_eq!(status_of(&prompt_only, &[]), Status::Interrupted);
        let mut compacted = answered.clone();
        compacted.push(Item::system(SystemKind::CarryOver, "plan"));
        assert_eq!(status_of(&compacted, &done), Status::Done);
        let mut reminded = answered;
        reminded.push(Item::system(SystemKind::Reminder, "plan"));
        assert_eq!(status_of(&reminded, &done), Status::Interrupted);
    }
}
