//! `pod prune`: delete sessions not updated for a while.

use crate::cli::PruneArgs;
use crate::error::Outcome;
use anyhow::Result;
use chrono::Utc;
use pod_launch::sessions::{self as session, Status};

/// Deletes (or lists, with `--dry-run`) sessions older than the age given.
pub async fn run(args: PruneArgs, place: super::Place) -> Result<Outcome> {
    let store = place.store.as_ref();
    let age = chrono::Duration::from_std(args.older_than).unwrap_or(chrono::Duration::MAX);
    let cutoff = Utc::now().checked_sub_signed(age);
    let mut old = Vec::new();
    for id in store.list().await? {
        match session::load(store, id).await {
            // A running session is busy, however old its last write; one
            // that waits for a person's answer or a worker is not done.
            Ok(loaded)
                if loaded.summary.holder.is_some()
                    || matches!(
                        loaded.summary.status,
                        Status::Running
                            | Status::AwaitingApproval
                            | Status::Answered
                            | Status::Queued
                    ) => {}
            Ok(loaded) if cutoff.is_none_or(|cutoff| loaded.summary.updated_at < cutoff) => {
                old.push(loaded.summary)
            }
            Ok(_) => {}
            Err(err) => {
                let _ = crate::output::eprint(&format!("pod: skipping session {id}: {err:#}\n"));
            }
        }
    }
    old.sort_by_key(|s| s.updated_at);
    for summary in &old {
        crate::output::print(&format!(
            "{}  {}  {}\n",
            summary.id,
            summary.updated_at.format("%Y-%m-%d %H:%M"),
            summary.status.as_str()
        ))?;
    }
    if old.is_empty() {
        crate::output::print("no session is that old\n")?;
        return Ok(Outcome::Done);
    }
    let ids: Vec<_> = old.iter().map(|s| s.id).collect();
    if args.dry_run || !super::rm::confirm(&ids, args.yes)? {
        crate::output::print("nothing deleted\n")?;
        return Ok(Outcome::Done);
    }
    super::rm::remove_all(store, &ids).await
}
