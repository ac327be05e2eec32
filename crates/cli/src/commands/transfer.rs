//! `pod store import` and `pod store export`: sessions copied between the
//! file store and PostgreSQL, each read back and compared record by record,
//! keeping when each was created and last written.

use super::Place;
use crate::cli::StoreCommand;
use crate::error::{Failure, Outcome};
use anyhow::{bail, Context, Result};
use pod::{FileStore, PodHome, SessionStore};
use pod_launch::sessions as session;
use uuid::Uuid;

/// Runs `pod store …`.
pub async fn run(command: StoreCommand, place: Place) -> Result<Outcome> {
    let Some(pg) = place.fleet.clone() else {
        bail!(Failure::new(
            "`pod store` copies to or from a PostgreSQL store, and none is given",
            "pass --store postgres://USER@HOST/DB or set POD_STORE"
        ));
    };
    let (named, from, to): (Vec<String>, Box<dyn SessionStore>, Box<dyn SessionStore>) =
        match command {
            StoreCommand::Import(args) => {
                let files = file_store(args.from.as_deref(), &place)?;
                (args.ids, Box::new(files), Box::new(pg))
            }
            StoreCommand::Export(args) => {
                let files = file_store(args.to.as_deref(), &place)?;
                (args.ids, Box::new(pg), Box::new(files))
            }
        };
    let ids = match named.is_empty() {
        true => from.list().await?,
        false => {
            let mut ids = Vec::new();
            for text in &named {
                ids.push(session::resolve(from.as_ref(), text).await?);
            }
            ids
        }
    };
    let mut failed = 0;
    for id in &ids {
        match copy(from.as_ref(), to.as_ref(), *id).await {
            Ok(line) => crate::output::print(&format!("{id}  {line}\n"))?,
            Err(err) => {
                failed += 1;
                let _ = crate::output::eprint(&format!("pod: {id}: {err:#}\n"));
            }
        }
    }
    crate::output::print(&format!(
        "{} of {} copied from {} to {}\n",
        ids.len() - failed,
        crate::render::plural(ids.len(), "session"),
        from.location(),
        to.location()
    ))?;
    if failed > 0 {
        bail!(Failure::new(
            format!("{failed} not copied"),
            "the messages above say why; sessions copied are complete and verified"
        ));
    }
    Ok(Outcome::Done)
}

fn file_store(dir: Option<&std::path::Path>, place: &Place) -> Result<FileStore> {
    Ok(FileStore::new(match dir {
        Some(dir) => PodHome::new(dir),
        None => place.home.clone(),
    }))
}

/// Copies one session and verifies the copy; a session already in the
/// destination is verified, not copied again.
async fn copy(from: &dyn SessionStore, to: &dyn SessionStore, id: Uuid) -> Result<String> {
    let stat = from.stat(id).await?;
    if stat.holder.is_some() {
        bail!("it is running; copy it once it stopped");
    }
    let source = from.read(id).await?;
    let header = source
        .header
        .clone()
        .context("its log has no header; nothing to copy")?;
    let existed = match to.read(id).await {
        Ok(_) => true,
        Err(pod::PodError::NoSuchSession { .. }) => false,
        Err(err) => return Err(err.into()),
    };
    if !existed {
        // Its last-written time goes with it: a copy is not a new session.
        to.import(&header, &source.records, stat.updated_at)
            .await
            .context("the copy failed")?;
    }
    let copy = to.read(id).await?;
    if copy.header.as_ref() != Some(&header) {
        bail!("the copy's header differs from the source's");
    }
    if let Some(at) = (0..source.records.len().max(copy.records.len()))
        .find(|&i| source.records.get(i) != copy.records.get(i))
    {
        bail!(
            "record {} differs between source and copy ({} and {} records)",
            at + 1,
            source.records.len(),
            copy.records.len()
        );
    }
    Ok(format!(
        "{} {} records",
        match existed {
            true => "already there; verified",
            false => "copied and verified",
        },
        source.records.len()
    ))
}
