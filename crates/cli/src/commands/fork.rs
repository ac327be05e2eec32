//! `pod fork`: a new session from a prefix of another.

use crate::cli::ForkArgs;
use crate::error::{Failure, Outcome};
use anyhow::{bail, Context, Result};
use pod_launch::sessions as session;

/// Forks a session and prints the new id.
pub async fn run(args: ForkArgs, place: super::Place) -> Result<Outcome> {
    let store = place.store.as_ref();
    let source = session::resolve(store, &args.id).await?;
    let loaded = session::load(store, source).await?;
    let total = loaded.summary.items;
    if let Some(at) = args.at.filter(|at| *at > total) {
        bail!(Failure::new(
            format!("--at {at} is past the end: session {source} has {total} items"),
            "`pod show ID` numbers the items; --at takes 0 to that number"
        ));
    }
    let id = pod::fork_session(store, source, args.at)
        .await
        .with_context(|| format!("cannot fork session {source}"))?;
    let fork = session::load(store, id).await?;
    if args.json {
        let json =
            crate::render::safe::json(&fork.summary, true).context("cannot encode the session")?;
        crate::output::print(&format!("{json}\n"))?;
    } else {
        crate::output::print(&format!(
            "forked {source} at item {} -> {id} ({} todos)\n  continue with: pod resume {id}\n",
            fork.summary.items,
            crate::render::progress(&fork.todos)
        ))?;
    }
    Ok(Outcome::Done)
}
