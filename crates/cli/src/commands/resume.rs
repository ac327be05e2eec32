//! `pod resume`: reopen a session from its log and continue it.

use crate::approval;
use crate::cli::ResumeArgs;
use crate::drive::{drive, FirstTurn};
use crate::error::Outcome;
use crate::model::{self, Model};
use crate::output::{self, Started};
use crate::session;
use anyhow::{Context, Result};
use pod::Pod;

/// Resumes a session and drives it.
pub async fn run(args: ResumeArgs) -> Result<Outcome> {
    let home = super::home()?;
    let id = session::resolve(&home, &args.id)?;
    let loaded = session::load(&home, id)?;
    let workspace = match &args.workspace {
        Some(dir) => super::run::workspace(Some(dir))?,
        None => loaded.header.workspace.clone(),
    };
    let file = model::config_file(&args.model)?;
    let model = Model::from_file(&args.model, &file)?;
    let policy = approval::policy(&file, &args.approval)?;
    // A scripted model goes on with the step after the last one answered.
    model.resume_at(loaded.assistant_items());
    let mut config = model.pod_config(home, workspace, &args.drive, policy);
    let asks = approval::attach(&mut config, args.drive.json);
    let model_name = config.provider.model_name();
    let handle = Pod::resume(id, config)
        .await
        .with_context(|| format!("cannot resume session {id}"))?;
    let started = Started {
        session_id: id,
        log_path: handle.log_path().to_path_buf(),
        resumed: true,
        model: model_name,
    };
    let first = match args.text {
        Some(text) => FirstTurn::Prompt(text),
        None => FirstTurn::Continue,
    };
    let mut out = output::for_flags(args.drive.json);
    drive(handle, started, first, out.as_mut(), asks).await
}
