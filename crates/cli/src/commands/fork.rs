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
    let id = match &args.files {
        None => pod::fork_session(store, source, args.at)
            .await
            .with_context(|| format!("cannot fork session {source}"))?,
        Some(dir) => fork_with_files(&place, source, args.at.unwrap_or(sound), dir).await?,
    };
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

/// Forks `source` at `at` with its files as they were then, copied into
/// `dir` (new or empty), where the fork works.
async fn fork_with_files(
    place: &super::Place,
    source: uuid::Uuid,
    at: usize,
    dir: &std::path::Path,
) -> Result<uuid::Uuid> {
    let store = place.store.as_ref();
    let occupied = std::fs::read_dir(dir).is_ok_and(|mut entries| entries.next().is_some());
    if occupied {
        bail!(Failure::new(
            format!("{} is not empty", dir.display()),
            "--files takes a new or empty directory"
        ));
    }
    let dir =
        std::path::absolute(dir).with_context(|| format!("cannot resolve {}", dir.display()))?;
    let loaded = session::load(store, source).await?;
    let timeline = pod::checkpoints::Timeline::of(&loaded.records);
    let Some(tree) = timeline.after_items(at) else {
        bail!(Failure::new(
            format!("session {source} has no checkpoints of its workspace"),
            "fork without --files, or copy the files yourself"
        ));
    };
    let shadow = pod::checkpoints::shadow(&place.home, source, loaded.header.workspace.clone());
    shadow
        .export(tree, &dir)
        .await
        .with_context(|| format!("cannot copy the files into {}", dir.display()))?;
    pod::checkpoints::fork_with_files(store, source, at, tree, Some(dir))
        .await
        .with_context(|| format!("cannot fork session {source}"))
}
