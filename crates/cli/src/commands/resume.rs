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
    if args.text.is_none() {
        // A finished session has nothing to continue: say so, and call no
        // model.
        let summary = session::summary(place.store.as_ref(), id).await;
        if summary.status == session::Status::Done {
            let line = match args.drive.json {
                true => format!(
                    "{}\n",
                    serde_json::json!({"session_id": id, "status": "done", "continued": false})
                ),
                false => format!(
                    "session {id} is done: nothing to continue. Give it a new prompt to go on: \
                     pod resume {} \"...\"\n",
                    &id.to_string()[..8]
                ),
            };
            crate::output::print(&line)?;
            return Ok(Outcome::Done);
        }
    }
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
