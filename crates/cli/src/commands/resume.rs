//! `pod resume`: reopen a session from its log and continue it the way it
//! was started (see `pod_launch::Launch` for what flags change).

use super::run::drive_session;
use crate::cli::ResumeArgs;
use crate::drive::FirstTurn;
use crate::error::Outcome;
use anyhow::Result;
use pod_launch::sessions as session;

/// Resumes a session and drives it.
pub async fn run(args: ResumeArgs, place: super::Place) -> Result<Outcome> {
    let id = session::resolve(place.store.as_ref(), &args.id).await?;
    let workspace = match &args.workspace {
        Some(dir) => Some(super::run::workspace(Some(dir))?),
        None => None,
    };
    let flags = args.session.flags(args.drive.until_done);
    let plan = place.launcher().plan_resume(id, &flags, workspace).await?;
    let session = super::launch(plan, &args.drive).await?;
    let first = match args.text {
        Some(text) => FirstTurn::Prompt(text),
        None => FirstTurn::Continue,
    };
    drive_session(session, &place, first, true, args.drive.json).await
}
