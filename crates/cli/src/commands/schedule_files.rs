//! `pod schedule` on the file store: schedules kept under
//! `POD_HOME/schedules` (`pod_launch::schedules`), fired by the one `pod
//! serve` holding their lock. Same flags and output as on a fleet.

use super::schedule::{at, name_of, no_such};
use super::Place;
use crate::cli::{OverlapArg, ScheduleAddArgs, ScheduleCommand};
use crate::error::{Failure, Outcome};
use anyhow::{bail, Result};
use chrono::Utc;
use pod_launch::schedules::{Overlap, Schedule, Schedules};
use pod_launch::timing::Timing;
use serde_json::json;

/// Runs a `pod schedule` subcommand on the file store.
pub async fn run(command: ScheduleCommand, place: Place) -> Result<Outcome> {
    let schedules = Schedules::new(&place.home);
    match command {
        ScheduleCommand::Add(args) => add(*args, &place, &schedules).await,
        ScheduleCommand::List(args) => list(&schedules, args.json),
        ScheduleCommand::Show(args) => show(&schedules, &name_of(&args.name)?, args.json),
        ScheduleCommand::Pause(args) => pause(&schedules, &name_of(&args.name)?, true),
        ScheduleCommand::Resume(args) => pause(&schedules, &name_of(&args.name)?, false),
        ScheduleCommand::Rm(args) => {
            let name = name_of(&args.name)?;
            if !schedules.remove(&name)? {
                bail!(no_such(&name));
            }
            crate::output::print(&format!("removed schedule {name}\n"))?;
            Ok(Outcome::Done)
        }
        ScheduleCommand::RunNow(args) => run_now(&schedules, &name_of(&args.name)?),
    }
}

async fn add(args: ScheduleAddArgs, place: &Place, schedules: &Schedules) -> Result<Outcome> {
    let name = name_of(&args.name)?;
    let timing = match (&args.cron, args.every) {
        (Some(expr), _) => Timing::cron(expr, args.tz.as_deref()),
        (None, Some(every)) => Timing::every(every),
        (None, None) => bail!("--cron or --every is needed"),
    }
    .map_err(|err| Failure::new(err.to_string(), "see `pod schedule add --help`"))?;
    let task = super::run::task(args.run.task.as_deref(), args.run.task_file.as_deref())?;
    let (header, limits, session) = match &args.session {
        Some(id) => {
            let overlap = match args.overlap {
                OverlapArg::Skip => pod_store_pg::Overlap::Skip,
                OverlapArg::Allow => pod_store_pg::Overlap::Allow,
            };
            let (header, id) = super::schedule::heartbeat(place, id, overlap).await?;
            (header, None, Some(id))
        }
        None => {
            let template = super::submit::Template::new(&args.run, place).await?;
            let (header, _) = template.session(String::new());
            (header, Some(template.limits()).filter(|l| l.is_set()), None)
        }
    };
    let now = Utc::now();
    let next_fire = timing.first(now)?;
    let schedule = Schedule {
        name: name.clone(),
        timing: timing.clone(),
        task,
        template: header,
        limits,
        overlap: match args.overlap {
            OverlapArg::Skip => Overlap::Skip,
            OverlapArg::Allow => Overlap::Allow,
        },
        session,
        paused: false,
        next_fire,
        created_at: now,
        run_now: None,
        last_fire: None,
        last_session: None,
        fires: 0,
        skipped: 0,
        missed: 0,
        recent: Vec::new(),
    };
    if !schedules.add(&schedule)? {
        bail!(Failure::new(
            format!("a schedule named {name} exists"),
            format!("pick another name, or `pod schedule rm {name}` first"),
        ));
    }
    let continues = session.map_or(String::new(), |id| format!(", continuing {id}"));
    crate::output::print(&format!(
        "schedule {name}: {}{continues}, next at {} (a `pod serve` on this POD_HOME fires it)\n",
        timing.describe(),
        at(next_fire)
    ))?;
    Ok(Outcome::Done)
}

/// A file-store schedule as `pod schedule list --json` and `GET
/// /api/schedules` show it (the fleet's fields; `last_running` is not
/// known outside the server that fires it).
pub(super) fn as_json(schedule: &Schedule) -> serde_json::Value {
    json!({
        "name": schedule.name,
        "timing": schedule.timing,
        "when": schedule.timing.describe(),
        "task": schedule.task,
        "workspace": schedule.template.workspace,
        "overlap": schedule.overlap.as_str(),
        "session": schedule.session,
        "paused": schedule.paused,
        "next_fire": schedule.next_fire,
        "created_at": schedule.created_at,
        "last_fire": schedule.last_fire,
        "last_session": schedule.last_session,
        "fires": schedule.fires,
        "skipped": schedule.skipped,
        "missed": schedule.missed,
    })
}

fn list(schedules: &Schedules, json: bool) -> Result<Outcome> {
    let list = schedules.list()?;
    let mut out = String::new();
    if json {
        for schedule in &list {
            out.push_str(&format!("{}\n", as_json(schedule)));
        }
    } else if list.is_empty() {
        out.push_str("no schedules (pod schedule add NAME --cron EXPR TASK adds one)\n");
    } else {
        for s in &list {
            let next = match s.paused {
                true => "paused".to_string(),
                false => format!("next {}", at(s.next_fire)),
            };
            let last = match s.last_session {
                Some(id) => format!("last {id}"),
                None => "never fired".to_string(),
            };
            out.push_str(&format!(
                "{}  {}  {next}  {last}  {} started, {} skipped, {} missed\n",
                s.name,
                s.timing.describe(),
                s.fires,
                s.skipped,
                s.missed
            ));
        }
    }
    crate::output::print(&out)?;
    Ok(Outcome::Done)
}

fn show(schedules: &Schedules, name: &str, json: bool) -> Result<Outcome> {
    let Some(schedule) = schedules.get(name)? else {
        bail!(no_such(name));
    };
    if json {
        let mut value = as_json(&schedule);
        value["recent"] = schedule
            .recent
            .iter()
            .rev()
            .map(|f| json!({"fire_at": f.fire_at, "session": f.session, "fired_at": f.fired_at}))
            .collect();
        crate::output::print(&format!("{value}\n"))?;
        return Ok(Outcome::Done);
    }
    let mut out = format!(
        "schedule {}\n  when:      {}\n  task:      {}\n  workspace: {}\n  overlap:   {}\n",
        schedule.name,
        schedule.timing.describe(),
        schedule.task,
        schedule.template.workspace.display(),
        schedule.overlap.as_str(),
    );
    if let Some(session) = schedule.session {
        out.push_str(&format!("  continues: {session} (a heartbeat)\n"));
    }
    out.push_str(&match schedule.paused {
        true => "  paused\n".to_string(),
        false => format!("  next:      {}\n", at(schedule.next_fire)),
    });
    out.push_str(&format!(
        "  {} started, {} skipped (overlap), {} missed (downtime)\n",
        schedule.fires, schedule.skipped, schedule.missed
    ));
    for fire in schedule.recent.iter().rev() {
        out.push_str(&format!(
            "  {}  {}\n",
            at(fire.fire_at),
            match fire.session {
                Some(id) => id.to_string(),
                None => "skipped: the last session was still going".into(),
            }
        ));
    }
    crate::output::print(&out)?;
    Ok(Outcome::Done)
}

fn pause(schedules: &Schedules, name: &str, paused: bool) -> Result<Outcome> {
    let Some(schedule) = schedules.set_paused(name, paused, Utc::now())? else {
        bail!(no_such(name));
    };
    crate::output::print(&match paused {
        true => format!("paused schedule {name}\n"),
        false => format!(
            "resumed schedule {name}: next at {}\n",
            at(schedule.next_fire)
        ),
    })?;
    Ok(Outcome::Done)
}

/// Asks the `pod serve` firing this home's schedules to fire `name` now:
/// it starts the session within a second (the file store has no queue to
/// put it in from here).
fn run_now(schedules: &Schedules, name: &str) -> Result<Outcome> {
    let mut paused = false;
    let asked = schedules.update(name, |s| {
        paused = s.paused;
        s.run_now = Some(Utc::now());
        !paused
    })?;
    if paused {
        bail!(Failure::new(
            format!("schedule {name} is paused"),
            format!("`pod schedule resume {name}` first"),
        ));
    }
    if asked.is_none() {
        bail!(no_such(name));
    }
    crate::output::print(&format!(
        "schedule {name}: asked to fire now (the `pod serve` on this POD_HOME starts it, \
         or the next one to start)\n"
    ))?;
    Ok(Outcome::Done)
}
