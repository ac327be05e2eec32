//! `pod fork`: a new session from a prefix of another.

use crate::cli::ForkArgs;
use crate::error::{Failure, Outcome};
use anyhow::{bail, Context, Result};
use pod_launch::sessions as session;

/// Forks a session and prints the new id.
pub async fn run(args: ForkArgs, place: super::Place) -> Result<Outcome> {
    let store = place.store.as_ref();
    let source = session::resolve(store, &args.id).await?;
    // Read up to a damaged line, if any: the items before it can be saved.
    let contents = store
        .read_before_damage(source)
        .await
        .with_context(|| format!("cannot read session {source}"))?;
    let sound = pod::fork_item_count(&contents.records);
    match (&contents.damage, args.at) {
        (Some(damage), at) if at.is_none_or(|at| at > sound) => bail!(Failure::new(
            format!(
                "session {source}'s log is damaged at line {} ({}); {}",
                damage.line,
                crate::render::safe::text(&damage.reason),
                match sound {
                    1 => "the 1 item before it is sound".to_string(),
                    n => format!("the {n} items before it are sound"),
                }
            ),
            // `pod show` refuses a damaged log, so it cannot number them
            // here; the fork's `pod show` does.
            format!(
                "`pod fork {source} --at {sound}` saves {}; --at takes any N from 0 to {sound} \
                 (the first N items; `pod show` of the fork numbers them)",
                if sound == 1 { "it" } else { "them" }
            )
        )),
        (None, Some(at)) if at > sound => bail!(Failure::new(
            format!("--at {at} is past the end: session {source} has {sound} items"),
            "`pod show ID` numbers the items; --at takes 0 to that number"
        )),
        _ => {}
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
