//! Forking a session: a new session whose log starts with a prefix of
//! another's.
//!
//! The fork's log is a copy of the source's records up to its `at`-th item,
//! under a new header that names the source (`forked_from`). Nothing else is
//! copied: todos and other tool state are rebuilt by replay like in any
//! session, so forking from before a plan change brings the older plan back.
//! The source log is only read, never locked or written, so a running
//! session can be forked too (its torn tail, if any, is left out).
//!
//! A prefix may end between a tool call and its result; the fork then has an
//! unanswered call, which [`Pod::resume`](crate::Pod::resume) closes with the
//! usual "interrupted" result.

use crate::config::Durability;
use crate::error::PodError;
use crate::log::{LogRecord, SessionHeader};
use crate::store::SessionStore;
use uuid::Uuid;

/// Creates a new session in `store` from the first `at` history items of
/// session `source` (all of them when `at` is `None`; an `at` beyond the
/// end takes all) and returns its id. A log damaged in the middle can be
/// forked from any `at` up to the items before its damaged line; a wider
/// `at` (or none) is refused with the line and how many items are sound.
///
/// Items are counted as [`fork_item_count`] counts them: one per committed
/// history item, in log order.
pub async fn fork_session(
    store: &dyn SessionStore,
    source: Uuid,
    at: Option<usize>,
) -> Result<Uuid, PodError> {
    fork_session_in(store, source, at, None).await
}

/// [`fork_session`], the fork working in `workspace` instead of its
/// source's (`pod fork --files DIR`, with the files as they were).
pub async fn fork_session_in(
    store: &dyn SessionStore,
    source: Uuid,
    at: Option<usize>,
    workspace: Option<std::path::PathBuf>,
) -> Result<Uuid, PodError> {
    let contents = store.read_before_damage(source).await?;
    let Some(source_header) = contents.header else {
        return Err(PodError::CorruptLog {
            path: store.location().into(),
            line: 1,
            reason: format!("session {source} has no header; nothing to fork"),
        });
    };
    let total = fork_item_count(&contents.records);
    if let Some(damage) = &contents.damage {
        // The items before the damage are sound; the fork must stop there
        // and say so, since "all of them" is not what the log held.
        if at.is_none_or(|at| at > total) {
            return Err(PodError::CorruptLog {
                path: store.log_location(source).into(),
                line: damage.line,
                reason: format!(
                    "{}; the {total} items before it can be forked with --at {total}",
                    damage.reason
                ),
            });
        }
    }
    let take = at.unwrap_or(total).min(total);
    let prefix = record_prefix(&contents.records, take);

    let id = Uuid::new_v4();
    let header = SessionHeader {
        forked_from: Some((source, take)),
        // A fork starts the way its source did.
        launch: source_header.launch,
        ..SessionHeader::new(
            id,
            source_header.model,
            workspace.unwrap_or(source_header.workspace),
        )
    };
    let log = store.create(&header, Durability::Turn).await?;
    for record in prefix {
        log.append(record, false).await?;
    }
    // Shutdown syncs the copy: the fork is durable before its id is returned.
    log.shutdown().await?;
    Ok(id)
}

/// The number of history items in `records`, as [`fork_session`]'s `at`
/// counts them.
pub fn fork_item_count(records: &[LogRecord]) -> usize {
    records
        .iter()
        .filter(|r| matches!(r, LogRecord::Item(_)))
        .count()
}

/// The records up to and including the `take`-th item; records that are not
/// items (such as compaction boundaries) come along when they precede it.
fn record_prefix(records: &[LogRecord], take: usize) -> &[LogRecord] {
    if take == 0 {
        return &[];
    }
    let mut seen = 0;
    for (index, record) in records.iter().enumerate() {
        if matches!(record, LogRecord::Item(_)) {
            seen += 1;
            if seen == take {
                return &records[..=index];
            }
        }
    }
    records
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{FileStore, PodHome};
    use pod_llm::Item;

    #[test]
    fn prefix_counts_items_only() {
        let records: Vec<LogRecord> = (0..4)
            .map(|i| LogRecord::Item(Item::user(format!("{i}"))))
            .collect();
        assert_eq!(record_prefix(&records, 0).len(), 0);
        assert_eq!(record_prefix(&records, 2).len(), 2);
        assert_eq!(record_prefix(&records, 9).len(), 4);
        assert_eq!(fork_item_count(&records), 4);
    }

    fn source_launch() -> Option<crate::log::LaunchJson> {
        crate::log::LaunchJson::of(&serde_json::json!({"front_end": "settings"})).ok()
    }

    #[tokio::test]
    async fn fork_copies_a_prefix_and_names_its_source() {
        let dir = tempfile::tempdir().unwrap();
        let home = PodHome::new(dir.path());
        let store = FileStore::new(home.clone());
        let source = Uuid::new_v4();
        let mut header = SessionHeader::new(source, "m".into(), "/w".into());
        header.launch = source_launch();
        let log = store.create(&header, Durability::Turn).await.unwrap();
        for i in 0..3 {
            log.append(&LogRecord::Item(Item::user(format!("{i}"))), false)
                .await
                .unwrap();
        }
        log.shutdown().await.unwrap();
        let before = std::fs::read(home.log_path(source)).unwrap();

        let fork = fork_session(&store, source, Some(2)).await.unwrap();
        let contents = store.read(fork).await.unwrap();
        let header = contents.header.unwrap();
        assert_eq!(header.session_id, fork);
        assert_eq!(header.forked_from, Some((source, 2)));
        assert_eq!(header.launch, source_launch());
        assert_eq!(header.model, "m");
        assert_eq!(contents.records.len(), 2);
        assert_eq!(std::fs::read(home.log_path(source)).unwrap(), before);

        let missing = fork_session(&store, Uuid::new_v4(), None).await;
        assert!(matches!(missing, Err(PodError::NoSuchSession { .. })));
    }
}
