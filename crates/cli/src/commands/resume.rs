//! `pod resume`: reopen a session from its log and continue it the way it
//! was started (see [`crate::launch`] for what flags change).

use crate::approval;
use crate::cli::ResumeArgs;
use crate::drive::{drive, FirstTurn};
use crate::error::{Failure, Outcome};
use crate::launch::Launch;
use crate::output::{self, Started};
use crate::session;
use crate::settings::{Flags, RunSettings};
use anyhow::{bail, Context, Result};
use pod::Pod;

/// Resumes a session and drives it.
pub async fn run(args: ResumeArgs, place: super::Place) -> Result<Outcome> {
    let id = session::resolve(place.store.as_ref(), &args.id).await?;
    let loaded = session::load(place.store.as_ref(), id).await?;
    let workspace = match &args.workspace {
        Some(dir) => super::run::workspace(Some(dir))?,
        None => loaded.header.workspace.clone(),
    };
    if !workspace.is_dir() {
        bail!(Failure::new(
            format!("the session's workspace {} is gone", workspace.display()),
            format!("pass another with `pod resume {id} --workspace DIR`, or `pod rm {id}`")
        ));
    }
    let recorded = Launch::from_header(&loaded.header);
    let settings = RunSettings::resolve(
        &Flags {
            model: &args.model,
            budget: &args.budget,
            approval: &args.approval,
            sandbox: &args.sandbox,
            until_done: args.drive.until_done,
        },
        recorded.as_ref(),
    )?;
    // A scripted model goes on with the step after the last one answered.
    settings.model.resume_at(loaded.assistant_items());
    if let Some(warning) = crate::sandbox::warning(&settings.sandbox) {
        eprintln!("{warning}");
    }
    let mut config = settings.pod_config(&place, workspace, args.drive.durability.into());
    // The servers the session had, with what the config names today.
    let had = recorded.as_ref().map_or(&[][..], |l| &l.mcp_servers[..]);
    let servers = crate::mcp::configs(
        &settings.file,
        settings.choice.raw.mcp_servers.as_ref(),
        &args.mcp,
        had,
    )?;
    let mcp = crate::mcp::attach(servers, &mut config, settings.approval_flags.yes).await;
    let asks = approval::attach(&mut config, args.drive.json);
    let model_name = config.provider.model_name();
    let handle = Pod::resume(id, config)
        .await
        .with_context(|| format!("cannot resume session {id}"))?;
    let started = Started {
        session_id: id,
        log_path: place.store.log_location(id),
        store: place.store.clone(),
        resumed: true,
        model: model_name,
    };
    let first = match args.text {
        Some(text) => FirstTurn::Prompt(text),
        None => FirstTurn::Continue,
    };
    let mut out = output::for_flags(args.drive.json);
    let outcome = drive(
        handle,
        started,
        first,
        settings.until_done,
        out.as_mut(),
        asks,
    )
    .await;
    mcp.shutdown().await;
    outcome
}
