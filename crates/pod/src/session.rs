//! Opening a session: creating a new log or replaying an existing one.

use crate::config::PodConfig;
use crate::error::PodError;
use crate::interceptors::{SessionBudget, Spent};
use crate::log::{LimitsRecord, LogRecord, ParentLink, SessionHeader};
use crate::questions::Questions;
use crate::replay::replay_into;
use crate::store::{LogWriter, OpenedLog, Store};
use pod_llm::{Item, ItemKind};
use pod_worker::{ToolRegistry, ToolStates};
use std::collections::HashSet;
use uuid::Uuid;

/// A session ready for a Pod: its log writer and its active context (its
/// tools' state is rebuilt into the states the caller passed).
pub(crate) struct OpenSession {
    pub id: Uuid,
    pub log: LogWriter,
    pub history: Vec<Item>,
    /// What the session's answers spent before this Pod.
    pub spent: Spent,
    /// Its questions and answers.
    pub questions: Questions,
    /// When it was created (its wall time counts from then).
    pub created_at: chrono::DateTime<chrono::Utc>,
}

/// The header of a new session `id` (a child's names its parent).
pub(crate) fn header(config: &PodConfig, id: Uuid, parent: Option<ParentLink>) -> SessionHeader {
    let mut header = SessionHeader::new(id, config.provider.model_name(), config.workspace.clone());
    header.launch = config.launch.clone();
    // A subagent was started by its parent, whatever started the parent.
    if parent.is_none() {
        header.origin = config.origin.clone();
    }
    header.parent = parent;
    header
}

/// Creates a new session with an empty history.
pub(crate) async fn create(
    config: &PodConfig,
    store: &Store,
    header: &SessionHeader,
) -> Result<OpenSession, PodError> {
    let log = store.create(header, config.durability).await?;
    if config.session_budget.is_set() {
        record_limits(&log, config.session_budget, "start").await?;
    }
    Ok(OpenSession {
        id: header.session_id,
        log,
        history: Vec::new(),
        spent: Spent::default(),
        questions: Questions::default(),
        created_at: header.created_at,
    })
}

/// Appends `limits` as the session's limits from now on.
pub(crate) async fn record_limits(
    log: &LogWriter,
    limits: SessionBudget,
    via: &str,
) -> Result<(), PodError> {
    let record = LogRecord::Limits(LimitsRecord::now(limits, via));
    log.append(&record, true).await
}

/// The session's limits for a Pod of `config` resuming `opened`: what the
/// log recorded last, with every limit the config sets over it (a front
/// end passes the ones it was given; none clears a recorded one). Written
/// to the log when they differ from the recorded ones, so the next start
/// holds them too.
pub(crate) async fn settle_limits(
    opened: &Opened,
    config: &PodConfig,
) -> Result<SessionBudget, PodError> {
    let recorded = SessionBudget::recorded(&opened.records).unwrap_or_default();
    let limits = recorded.overlaid(config.session_budget);
    if limits != recorded {
        record_limits(&opened.log, limits, "resume").await?;
    }
    Ok(limits)
}

/// A session's log, open for writing and read, before its replay: its
/// header says which tools the session has.
pub(crate) struct Opened {
    pub log: LogWriter,
    pub header: SessionHeader,
    pub records: Vec<LogRecord>,
}

/// Opens session `id`'s log and repairs a torn tail. When the crash cut the
/// very first line, the session had nothing else: a header for `config`
/// (with `parent`) is written as its header. It is made only then: reading
/// the launch record into it cost every resumed session about 47,000
/// instructions (callgrind).
pub(crate) async fn open(
    id: Uuid,
    config: &PodConfig,
    store: &Store,
    parent: Option<ParentLink>,
) -> Result<Opened, PodError> {
    let OpenedLog {
        contents,
        writer: log,
    } = store.open(id, config.durability).await?;
    let header = match contents.header {
        Some(header) => header,
        None => {
            let fallback = header(config, id, parent);
            log.append(&LogRecord::Header(fallback.clone()), true)
                .await?;
            fallback
        }
    };
    Ok(Opened {
        log,
        header,
        records: contents.records,
    })
}

/// Rebuilds the history and the tools' `states` of an opened session, and
/// commits an "interrupted" result for every call a crash left without one,
/// except the calls of [`resumable`](pod_worker::Tool::resumable) tools,
/// which the next run finishes.
pub(crate) async fn resume(
    opened: Opened,
    config: &PodConfig,
    tools: &ToolRegistry,
    states: &mut ToolStates,
) -> Result<OpenSession, PodError> {
    let Opened {
        log,
        header,
        records,
    } = opened;
    let spent = spent_if(config.session_budget.is_set(), &records);
    let (history, questions) = commit_replay(&log, records, tools, states).await?;
    Ok(OpenSession {
        id: header.session_id,
        log,
        history,
        spent,
        questions,
        created_at: header.created_at,
    })
}

/// Replays `records` into `states` and commits an "interrupted" result for
/// every call a crash left without one, so the history is valid for model
/// APIs: all but the calls that never started (from the first one a
/// question parked, which the next run runs) and those of resumable tools.
/// Returns the history with those results, and the session's questions.
async fn commit_replay(
    log: &LogWriter,
    records: Vec<LogRecord>,
    tools: &ToolRegistry,
    states: &mut ToolStates,
) -> Result<(Vec<Item>, Questions), PodError> {
    let questions = Questions::from_records(&records);
    let mut context = replay_into(records, states);
    let mut keep_open = resumable_calls(&context.history, tools);
    keep_open.extend(parked_calls(&context.history, &questions));
    for item in context.interrupted {
        if item_call_id(&item).is_some_and(|id| keep_open.contains(id)) {
            continue;
        }
        log.append(&LogRecord::Item(item.clone()), false).await?;
        // An interrupted result is an error: no state changes, but the
        // states see the call closed as the live worker would.
        states.observe(&item);
        context.history.push(item);
    }
    log.sync().await?;
    Ok((context.history, questions))
}

/// The last answer's calls from the first one a question parked on: none
/// of them started.
fn parked_calls(history: &[Item], questions: &Questions) -> HashSet<String> {
    let Some(first) = questions.parked_from(history) else {
        return HashSet::new();
    };
    let last = history
        .iter()
        .rev()
        .find(|item| matches!(item.kind, ItemKind::Assistant { .. }));
    last.map(|item| item.tool_calls())
        .unwrap_or_default()
        .iter()
        .skip_while(|call| call.id != first)
        .map(|call| call.id.clone())
        .collect()
}

/// Rebuilds the history and `states` of a session whose writer is already
/// open (after a turn task died).
pub(crate) async fn reload(
    store: &Store,
    log: &LogWriter,
    count_spent: bool,
    tools: &ToolRegistry,
    states: &mut ToolStates,
) -> Result<(Vec<Item>, Spent, Questions), PodError> {
    let contents = store.read(log.session_id()).await?;
    let spent = spent_if(count_spent, &contents.records);
    let (history, questions) = commit_replay(log, contents.records, tools, states).await?;
    Ok((history, spent, questions))
}

/// The ids of the last answer's calls to resumable tools.
fn resumable_calls(history: &[Item], tools: &ToolRegistry) -> HashSet<String> {
    let last = history
        .iter()
        .rev()
        .find(|item| matches!(item.kind, ItemKind::Assistant { .. }));
    last.map(|item| item.tool_calls())
        .unwrap_or_default()
        .iter()
        .filter(|call| tools.get(&call.name).is_some_and(|tool| tool.resumable()))
        .map(|call| call.id.clone())
        .collect()
}

fn item_call_id(item: &Item) -> Option<&str> {
    match &item.kind {
        ItemKind::ToolResult { call_id, .. } => Some(call_id),
        _ => None,
    }
}

/// What the log's answers spent, counted only when a session budget needs
/// it: resume stays one pass over the records otherwise.
fn spent_if(count: bool, records: &[LogRecord]) -> Spent {
    match count {
        true => Spent::of_log(records),
        false => Spent::default(),
    }
}
