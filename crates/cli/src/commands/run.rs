//! `pod run`: a new session on a task.

use crate::approval;
use crate::cli::RunArgs;
use crate::drive::{drive, FirstTurn};
use crate::error::{Failure, Outcome};
use crate::model::{self, Model};
use crate::output::{self, Started};
use anyhow::{bail, Context, Result};
use pod::Pod;
use std::path::{Path, PathBuf};

/// Starts a session and drives it.
pub async fn run(args: RunArgs) -> Result<Outcome> {
    let home = super::home()?;
    let workspace = workspace(args.workspace.as_deref())?;
    let file = model::config_file(&args.model)?;
    let model = Model::from_file(&args.model, &file)?;
    let policy = approval::policy(&file, &args.approval)?;
    let mut config = model.pod_config(home, workspace, &args.drive, policy);
    let asks = approval::attach(&mut config, args.drive.json);
    let model_name = config.provider.model_name();
    let handle = Pod::spawn(config)
        .await
        .context("cannot start the session")?;
    let started = Started {
        session_id: handle.session_id(),
        log_path: handle.log_path().to_path_buf(),
        resumed: false,
        model: model_name,
    };
    let mut out = output::for_flags(args.drive.json);
    drive(
        handle,
        started,
        FirstTurn::Prompt(args.task),
        out.as_mut(),
        asks,
    )
    .await
}

/// The workspace: `dir` or the current directory, made absolute.
pub fn workspace(dir: Option<&Path>) -> Result<PathBuf> {
    let dir = match dir {
        Some(dir) => dir.to_path_buf(),
        None => std::env::current_dir().context("cannot read the current directory")?,
    };
    if !dir.is_dir() {
        bail!(Failure::new(
            format!("workspace {} is not a directory", dir.display()),
            "pass an existing directory with --workspace DIR"
        ));
    }
    dir.canonicalize()
        .with_context(|| format!("cannot resolve workspace {}", dir.display()))
}
