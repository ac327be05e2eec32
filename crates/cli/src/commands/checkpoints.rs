//! `pod diff` and `pod rewind`: what a session changed in its workspace,
//! and going back to how the files were after item N, with the session
//! forked there.

use crate::cli::{DiffArgs, RewindArgs};
use crate::error::{Failure, Outcome};
use anyhow::{bail, Context, Result};
use pod::checkpoints::{Change, Timeline};
use pod_launch::sessions as session;
use serde_json::json;

/// `pod diff ID [--from N] [--to M]`.
pub async fn diff(args: DiffArgs, place: super::Place) -> Result<Outcome> {
    let store = place.store.as_ref();
    let id = session::resolve(store, &args.id).await?;
    let loaded = session::load(store, id).await?;
    let timeline = Timeline::of(&loaded.records);
    let shadow = pod::checkpoints::shadow(&place.home, id, loaded.header.workspace.clone());
    let Some(from) = timeline.after_items(args.from.unwrap_or(0)) else {
        bail!(no_checkpoints(id));
    };
    let to = match args.to {
        Some(m) => timeline.after_items(m),
        None => timeline.after_items(usize::MAX),
    }
    .unwrap_or(from);
    let changes = shadow
        .changes(from, to)
        .await
        .context("cannot compare the checkpoints")?;
    let patch = shadow
        .diff(from, to)
        .await
        .context("cannot diff the checkpoints")?;
    if args.json {
        let doc = json!({
            "session_id": id,
            "from": from,
            "to": to,
            "files": files_json(&changes),
            "patch": patch,
            "not_captured": timeline.skipped(),
            "unindexed": timeline.unindexed(),
        });
        crate::output::print(&format!("{}\n", crate::render::safe::json(&doc, true)?))?;
    } else {
        match changes.is_empty() {
            true => crate::output::print("no changes\n")?,
            false => crate::output::print(&crate::render::safe::text(&patch))?,
        }
        let skipped = timeline.skipped();
        if !skipped.is_empty() {
            let names: Vec<_> = skipped
                .iter()
                .map(|p| crate::render::safe::line(p).into_owned())
                .collect();
            let _ = crate::output::eprint(&format!(
                "not captured (over {} MB, not in any snapshot): {}\n",
                pod::checkpoints::SIZE_LIMIT >> 20,
                names.join(", ")
            ));
        }
        let unindexed = timeline.unindexed();
        if !unindexed.is_empty() {
            let names: Vec<_> = unindexed
                .iter()
                .map(|p| crate::render::safe::line(p).into_owned())
                .collect();
            let _ = crate::output::eprint(&format!(
                "not captured (git cannot store these names; what is in them is not in any \
                 snapshot): {}\n",
                names.join(", ")
            ));
        }
    }
    Ok(Outcome::Done)
}

/// `pod rewind ID --to N [--force]`.
pub async fn rewind(args: RewindArgs, place: super::Place) -> Result<Outcome> {
    let store = place.store.as_ref();
    let id = session::resolve(store, &args.id).await?;
    let loaded = session::load(store, id).await?;
    if loaded.summary.holder.is_some() {
        bail!(Failure::new(
            format!("session {id} is running"),
            "stop it first (Ctrl-C, or cancel it in the dashboard); a rewind under a running agent would fight it"
        ));
    }
    let total = loaded.summary.items;
    if args.to > total {
        bail!(Failure::new(
            format!(
                "--to {} is past the end: session {id} has {total} items",
                args.to
            ),
            "`pod show ID` numbers the items; --to takes 0 to that number"
        ));
    }
    let timeline = Timeline::of(&loaded.records);
    let workspace = loaded.header.workspace.clone();
    let shadow = pod::checkpoints::shadow(&place.home, id, workspace.clone());
    let Some(target) = timeline.after_items(args.to) else {
        bail!(no_checkpoints(id));
    };
    let now = shadow
        .snapshot()
        .await
        .context("cannot snapshot the workspace")?;
    if !args.force {
        let mut outside: Vec<Change> = Vec::new();
        match timeline.last_state() {
            Some(last) => outside.extend(shadow.changes(last, &now).await?),
            None => bail!(Failure::new(
                format!(
                    "session {id} stopped while a call ran: what that call changed in {} cannot be told from other changes",
                    workspace.display()
                ),
                "look at the files, then rewind with --force to overwrite them"
            )),
        }
        for (after, before) in timeline.gaps_after(args.to) {
            outside.extend(shadow.changes(after, before).await?);
        }
        if !outside.is_empty() {
            let files: Vec<String> = outside
                .iter()
                .map(|c| format!("{} {}", c.status, crate::render::safe::line(&c.path)))
                .collect();
            bail!(Failure::new(
                format!(
                    "files in {} were changed outside session {id} since item {}: {}",
                    workspace.display(),
                    args.to,
                    files.join(", ")
                ),
                "rewinding would overwrite those changes; keep them elsewhere, then rewind with --force"
            ));
        }
    }
    let restored = shadow.changes(&now, target).await?;
    match shadow.restore(&now, target).await {
        Ok(()) => {}
        Err(pod::checkpoints::CheckpointError::Blocked { paths, done }) => {
            let shown = first_paths(&paths, 10);
            let what = match done {
                true => format!(
                    "{} changed while it was restored: {} not written, since a symbolic link, a \
                     file or a directory session {id}'s checkpoints do not hold lies on the way \
                     ({shown}); the other files are back as after item {}",
                    workspace.display(),
                    crate::render::plural(paths.len(), "path"),
                    args.to
                ),
                false => format!(
                    "{} in {} would be written through a symbolic link, a file or a directory \
                     session {id}'s checkpoints do not hold ({shown}); nothing was changed",
                    crate::render::plural(paths.len(), "path"),
                    workspace.display()
                ),
            };
            bail!(Failure::new(
                what,
                "the workspace changed after the session's last checkpoint (a link may lead \
                 outside it): look at those paths, remove what should not be there, then rewind \
                 again"
            ));
        }
        Err(err) => return Err(err).context("cannot restore the workspace"),
    }
    let fork = pod::checkpoints::fork_with_files(store, id, args.to, target, None)
        .await
        .with_context(|| {
            format!(
                "the files are back as after item {}, but the session could not be forked",
                args.to
            )
        })?;
    if args.json {
        let doc = json!({"session_id": fork, "forked_from": {"id": id, "at": args.to}, "restored": files_json(&restored)});
        crate::output::print(&format!("{}\n", crate::render::safe::json(&doc, true)?))?;
    } else {
        crate::output::print(&format!(
            "rewound {}: {} as after item {} of {id}\nforked {id} at item {} -> {fork}\n  continue with: pod resume {fork}\n",
            workspace.display(),
            match restored.len() {
                1 => "1 file restored".to_string(),
                n => format!("{n} files restored"),
            },
            args.to,
            args.to,
        ))?;
    }
    Ok(Outcome::Done)
}

/// The first `n` of `paths`, safe to print, and how many more.
fn first_paths(paths: &[String], n: usize) -> String {
    let mut shown: Vec<String> = paths
        .iter()
        .take(n)
        .map(|p| crate::render::safe::line(p).into_owned())
        .collect();
    if paths.len() > n {
        shown.push(format!("and {} more", paths.len() - n));
    }
    shown.join(", ")
}

/// Changed files as `--json` lists them.
fn files_json(changes: &[Change]) -> Vec<serde_json::Value> {
    changes
        .iter()
        .map(|c| json!({"path": c.path, "status": status_word(c.status)}))
        .collect()
}

fn status_word(status: char) -> &'static str {
    match status {
        'A' => "added",
        'D' => "deleted",
        'T' => "type_changed",
        _ => "modified",
    }
}

fn no_checkpoints(id: uuid::Uuid) -> Failure {
    Failure::new(
        format!("session {id} has no checkpoints of its workspace"),
        "checkpoints are taken around calls that may change files (write_file, edit_file, bash, …) unless --no-checkpoints or checkpoints = false",
    )
}
