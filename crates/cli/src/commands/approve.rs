//! `pod approve`: answer a question a parked session waits on, from any
//! machine that reaches the store.

use crate::cli::ApproveArgs;
use crate::error::{Failure, Outcome};
use anyhow::{bail, Context, Result};
use pod::questions::{self, Answerer};
use pod::{ApprovalDecision, PodError};
use pod_launch::sessions as session;

/// How long an answer waits for a session that is still parking.
const PARKING_WAIT: std::time::Duration = std::time::Duration::from_secs(5);

/// Records the answer (which queues the session on a fleet).
pub async fn run(args: ApproveArgs, place: super::Place) -> Result<Outcome> {
    let id = session::resolve(place.store.as_ref(), &args.id).await?;
    let (which, decision) = match args.answer.as_slice() {
        [decision] => (None, decision),
        [which, decision] => (Some(which.as_str()), decision),
        // clap takes one or two.
        _ => bail!("give the decision, and the call when there are several questions"),
    };
    let decision = parse_decision(decision)?;
    let loaded = session::load(place.store.as_ref(), id).await?;
    let open = pod::questions::Questions::from_records(&loaded.records)
        .open(&pod::replay::replay(&loaded.records).history)
        .into_iter()
        .cloned()
        .collect::<Vec<_>>();
    let question = pick(&open, which, id)?;
    let answered = match questions::answer(
        &place.store,
        id,
        question.id,
        decision,
        &answerer(),
        PARKING_WAIT,
    )
    .await
    {
        Ok(answered) => answered,
        Err(PodError::SessionBusy { .. } | PodError::SessionLeased { .. }) => bail!(Failure::new(
            format!("session {id} is open in another process, which asks the question itself"),
            "answer where it asks (its terminal, its editor), or wait until it parks"
        )),
        Err(err) => return Err(err).context("cannot record the answer"),
    };
    // On a fleet the answer hands the session back to the workers; on the
    // file store whoever continues it (`pod resume`) runs the call.
    let next = match answered.queued {
        true => "queued: a fleet worker runs the call".to_string(),
        false => format!("continue it with: pod resume {id}"),
    };
    let line = match args.json {
        true => format!("{}\n", crate::render::safe::json(&answered.answer, false)?),
        false => format!(
            "answered {} ({}): {}; {next}\n",
            &question.id.to_string()[..8],
            crate::render::safe::line(&question.request.summary),
            decision.as_str()
        ),
    };
    crate::output::print(&line)?;
    Ok(Outcome::Done)
}

/// allow, deny, always, never, or the API's names.
fn parse_decision(text: &str) -> Result<ApprovalDecision> {
    Ok(match text.to_ascii_lowercase().as_str() {
        "allow" | "yes" | "allow_once" => ApprovalDecision::AllowOnce,
        "deny" | "no" | "reject_once" => ApprovalDecision::RejectOnce,
        "always" | "allow_always" => ApprovalDecision::AllowAlways,
        "never" | "reject_always" => ApprovalDecision::RejectAlways,
        other => bail!(Failure::new(
            format!("`{other}` is not an answer"),
            "answer allow, deny, always or never"
        )),
    })
}

/// The question `which` names (a call id or a question id prefix), or the
/// only one.
fn pick<'a>(
    open: &'a [pod::log::QuestionRecord],
    which: Option<&str>,
    id: uuid::Uuid,
) -> Result<&'a pod::log::QuestionRecord> {
    let listed = || {
        open.iter()
            .map(|q| format!("{} ({})", q.request.call_id, q.request.summary))
            .collect::<Vec<_>>()
            .join(", ")
    };
    match which {
        None => match open {
            [one] => Ok(one),
            [] => bail!(Failure::new(
                format!("session {id} waits for no answer"),
                "`pod sessions` shows awaiting_approval for those that do"
            )),
            _ => bail!(Failure::new(
                format!("session {id} waits on {} questions", open.len()),
                format!("name the call: {}", listed())
            )),
        },
        Some(which) => open
            .iter()
            .find(|q| q.request.call_id == which || q.id.to_string().starts_with(which))
            .ok_or_else(|| {
                anyhow::Error::new(Failure::new(
                    format!("session {id} has no open question about `{which}`"),
                    match open.is_empty() {
                        true => "it waits for no answer".to_string(),
                        false => format!("its open questions: {}", listed()),
                    },
                ))
            }),
    }
}

/// This user on this machine, through the CLI.
fn answerer() -> Answerer {
    Answerer {
        via: "cli".into(),
        by: std::env::var("USER").ok().filter(|u| !u.is_empty()),
        from: hostname(),
    }
}

fn hostname() -> Option<String> {
    let name = std::fs::read_to_string("/proc/sys/kernel/hostname").ok()?;
    Some(name.trim().to_string()).filter(|n| !n.is_empty())
}
