//! `pod prune`: delete sessions not updated for a while.

use crate::cli::PruneArgs;
use crate::error::Outcome;
use anyhow::Result;
use chrono::Utc;
use pod_launch::sessions::{self as session, Status};
use std::time::Duration;

/// Deletes (or lists, with `--dry-run`) sessions older than the age given.
pub async fn run(args: PruneArgs, place: super::Place) -> Result<Outcome> {
    let store = place.store.as_ref();
    let age = chrono::Duration::from_std(args.older_than).unwrap_or(chrono::Duration::MAX);
    let cutoff = Utc::now().checked_sub_signed(age);
    let mut old = Vec::new();
    for id in store.list().await? {
        match session::load(store, id).await {
            // A running session is busy, however old its last write.
            Ok(loaded) if loaded.summary.status == Status::Running => {}
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

/// Parses an age such as `30d`, `12h`, `90m`, `45s` or `2w`.
pub fn parse_age(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    let split = text
        .find(|c: char| !c.is_ascii_digit())
        .ok_or_else(|| format!("{text:?} has no unit: use s, m, h, d or w (e.g. 30d)"))?;
    let (number, unit) = text.split_at(split);
    let number: u64 = number
        .parse()
        .map_err(|_| format!("{text:?} does not start with a number (e.g. 30d)"))?;
    let seconds = match unit {
        "s" => 1,
        "m" => 60,
        "h" => 3_600,
        "d" => 86_400,
        "w" => 604_800,
        other => return Err(format!("unknown unit {other:?}: use s, m, h, d or w")),
    };
    number
        .checked_mul(seconds)
        .map(Duration::from_secs)
        .ok_or_else(|| format!("{text:?} is too long"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ages_take_a_number_and_a_unit() {
        assert_eq!(parse_age("30d"), Ok(Duration::from_secs(30 * 86_400)));
        assert_eq!(parse_age("12h"), Ok(Duration::from_secs(12 * 3_600)));
        assert_eq!(parse_age("0s"), Ok(Duration::ZERO));
        assert!(parse_age("30").unwrap_err().contains("no unit"));
        assert!(parse_age("d").unwrap_err().contains("number"));
        assert!(parse_age("3y").unwrap_err().contains("unknown unit"));
    }
}
