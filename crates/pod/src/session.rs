//! Opening a session: creating a new log or replaying an existing one.

use crate::config::PodConfig;
use crate::error::PodError;
use crate::interceptors::Spent;
use crate::log::{LogRecord, SessionHeader};
use crate::replay::replay_into;
use crate::store::{LogWriter, OpenedLog, Store};
use pod_llm::Item;
use pod_worker::ToolStates;
use uuid::Uuid;

/// A session ready for a Pod: its log writer and its active context (its
/// tools' state is rebuilt into the states the caller passed).
pub(crate) struct OpenSession {
    pub id: Uuid,
    pub log: LogWriter,
    pub history: Vec<Item>,
    /// What the session's answers spent before this Pod.
    pub spent: Spent,
}

/// Creates a new session with an empty history.
pub(crate) async fn create(config: &PodConfig, store: &Store) -> Result<OpenSession, PodError> {
    let id = Uuid::new_v4();
    let mut header = SessionHeader::new(id, config.provider.model_name(), config.workspace.clone());
    header.launch = config.launch.clone();
    let log = store.create(&header, config.durability).await?;
    Ok(OpenSession {
        id,
        log,
        history: Vec::new(),
        spent: Spent::default(),
    })
}

/// Reopens a session from its log: repairs a torn tail, rebuilds the history
/// and the tools' `states`, and commits an "interrupted" result for every
/// call a crash left without one.
pub(crate) async fn resume(
    id: Uuid,
    config: &PodConfig,
    store: &Store,
    states: &mut ToolStates,
) -> Result<OpenSession, PodError> {
    let OpenedLog {
        contents,
        writer: log,
    } = store.open(id, config.durability).await?;
    if contents.header.is_none() {
        // The crash cut the very first line: the session had nothing else.
        let header = SessionHeader::new(id, config.provider.model_name(), config.workspace.clone());
        log.append(&LogRecord::Header(header), true).await?;
    }
    let spent = spent_if(config.session_budget.is_set(), &contents.records);
    let history = commit_replay(&log, contents.records, states).await?;
    Ok(OpenSession {
        id,
        log,
        history,
        spent,
    })
}

/// Replays `records` into `states` and commits an "interrupted" result for
/// every call without one, so the history is valid for model APIs. Returns
/// the history with those results.
async fn commit_replay(
    log: &LogWriter,
    records: Vec<LogRecord>,
    states: &mut ToolStates,
) -> Result<Vec<Item>, PodError> {
    let mut context = replay_into(records, states);
    for item in context.interrupted {
        log.append(&LogRecord::Item(item.clone()), false).await?;
        // An interrupted result is an error: no state changes, but the
        // states see the call closed as the live worker would.
        states.observe(&item);
        context.history.push(item);
    }
    log.sync().await?;
    Ok(context.history)
}

/// Rebuilds the history and `states` of a session whose writer is already
/// open (after a turn task died).
pub(crate) async fn reload(
    store: &Store,
    log: &LogWriter,
    count_spent: bool,
    states: &mut ToolStates,
) -> Result<(Vec<Item>, Spent), PodError> {
    let contents = store.read(log.session_id()).await?;
    let spent = spent_if(count_spent, &contents.records);
    Ok((commit_replay(log, contents.records, states).await?, spent))
}

/// What the log's answers spent, counted only when a session budget needs
/// it: resume stays one pass over the records otherwise.
fn spent_if(count: bool, records: &[LogRecord]) -> Spent {
    match count {
        true => Spent::of_log(records),
        false => Spent::default(),
    }
}
