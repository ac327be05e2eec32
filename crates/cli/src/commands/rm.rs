//! `pod rm`: delete sessions, after asking on a terminal.

use crate::cli::RmArgs;
use crate::error::{Failure, Outcome};
use anyhow::{bail, Result};
use pod::SessionStore;
use pod_launch::sessions as session;
use std::io::IsTerminal;
use uuid::Uuid;

/// Deletes the sessions named.
pub async fn run(args: RmArgs, place: super::Place) -> Result<Outcome> {
    let store = place.store.as_ref();
    let mut ids = Vec::new();
    for text in &args.ids {
        let id = session::resolve(store, text).await?;
        if !ids.contains(&id) {
            ids.push(id);
        }
    }
    if !confirm(&ids, args.yes)? {
        crate::output::print("nothing deleted\n")?;
        return Ok(Outcome::Done);
    }
    remove_all(store, &ids).await
}

/// Deletes `ids`, going on past a failure and reporting each.
pub async fn remove_all(store: &dyn SessionStore, ids: &[Uuid]) -> Result<Outcome> {
    let mut failed = 0;
    for id in ids {
        match store.remove(*id).await {
            Ok(()) => crate::output::print(&format!("deleted {id}\n"))?,
            Err(err) => {
                failed += 1;
                let _ = crate::output::eprint(&format!("pod: cannot delete {id}: {err}\n"));
            }
        }
    }
    if failed > 0 {
        bail!(Failure::new(
            format!(
                "{failed} of {} not deleted",
                crate::render::plural(ids.len(), "session")
            ),
            "a running session is deleted once its `pod` process has ended"
        ));
    }
    Ok(Outcome::Done)
}

/// Whether to go on: `--yes`, or "y" from the user on a terminal.
pub fn confirm(ids: &[Uuid], yes: bool) -> Result<bool> {
    if yes || ids.is_empty() {
        return Ok(true);
    }
    if !std::io::stdin().is_terminal() {
        bail!(Failure::new(
            "refusing to delete sessions without confirmation",
            "pass --yes when stdin is not a terminal"
        ));
    }
    let noun = if ids.len() == 1 {
        "session"
    } else {
        "sessions"
    };
    let _ = crate::output::eprint(&format!("delete {} {noun}? [y/N] ", ids.len()));
    let mut answer = String::new();
    std::io::stdin().read_line(&mut answer)?;
    Ok(matches!(answer.trim(), "y" | "Y" | "yes"))
}
