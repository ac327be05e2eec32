//! `pod budget`: a session's limits, shown or raised (recorded in its log;
//! a session a budget stopped goes on: queued on a fleet, else with
//! `pod resume`).

use crate::cli::BudgetCmdArgs;
use crate::error::{Failure, Outcome};
use anyhow::{bail, Result};
use pod::{PodError, SessionBudget};
use pod_launch::sessions as session;

/// How long a change waits for a session whose process is closing it.
const CLOSING_WAIT: std::time::Duration = std::time::Duration::from_secs(5);

/// Shows the limits, or records the ones given.
pub async fn run(args: BudgetCmdArgs, place: super::Place) -> Result<Outcome> {
    let id = session::resolve(place.store.as_ref(), &args.id).await?;
    let over = SessionBudget {
        requests: args.max_session_requests,
        tokens: args.max_session_tokens,
        cost: args.max_cost,
        wall_secs: args.max_wall,
    };
    if !over.is_set() {
        let loaded = session::load(place.store.as_ref(), id).await?;
        let limits = SessionBudget::recorded(&loaded.records).unwrap_or_default();
        let stopped = pod::limits::stopped_by(&loaded.records);
        let line = match args.json {
            true => format!(
                "{}\n",
                serde_json::json!({"session_id": id, "limits": limits, "stopped_by": stopped})
            ),
            false => format!("{}\n", describe(&limits)),
        };
        crate::output::print(&line)?;
        return Ok(Outcome::Done);
    }
    let raised = match place
        .launcher()
        .raise_limits(id, over, "cli", CLOSING_WAIT)
        .await
    {
        Ok(raised) => raised,
        Err(err)
            if matches!(
                err.pod_error(),
                Some(PodError::SessionBusy { .. } | PodError::SessionLeased { .. })
            ) =>
        {
            bail!(Failure::new(
                format!("session {id} is running in another process"),
                "change its limits when it stops (or cancel it), then resume it"
            ))
        }
        Err(err) => return Err(err.into()),
    };
    let next = match (&raised.stopped_by, raised.queued) {
        (Some(_), true) => "; queued: a fleet worker continues it".to_string(),
        (Some(_), false) => format!("; continue it with: pod resume {id}"),
        (None, _) => String::new(),
    };
    let line = match args.json {
        true => format!(
            "{}\n",
            serde_json::json!({
                "session_id": id,
                "limits": raised.limits,
                "before": raised.before,
                "stopped_by": raised.stopped_by,
                "queued": raised.queued,
            })
        ),
        false => format!("{}{next}\n", describe(&raised.limits)),
    };
    crate::output::print(&line)?;
    Ok(Outcome::Done)
}

/// `limits: money 5.00, wall time 7200s`, or `limits: none`.
fn describe(limits: &SessionBudget) -> String {
    format!("limits: {}", crate::render::history::limits_text(limits))
}
