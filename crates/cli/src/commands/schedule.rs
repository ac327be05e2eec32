//! `pod schedule`: sessions started by the clock.
//!
//! On the file store (no `--store postgres://…`) the commands are
//! `schedule_files`'s. A schedule is a row in the fleet's PostgreSQL store: when it fires
//! (`pod_fleet::schedule::Timing`), the task, and the header of the
//! sessions it starts, resolved from `pod submit`'s flags when it is added
//! (API keys excepted: the worker's environment has them). `pod serve`
//! workers fire it; this module only adds, lists and changes it.

use super::Place;
use crate::cli::{OverlapArg, ScheduleAddArgs, ScheduleCommand};
use crate::error::{Failure, Outcome};
use anyhow::{bail, Result};
use chrono::{DateTime, Utc};
use pod_fleet::schedule::{fire_of, Timing};
use pod_store_pg::{Acted, Fire, NewSchedule, Overlap, PgStore, Schedule};
use serde_json::json;

/// Runs a `pod schedule` subcommand.
pub async fn run(command: ScheduleCommand, place: Place) -> Result<Outcome> {
    let Some(store) = place.fleet.clone() else {
        return super::schedule_files::run(command, place).await;
    };
    match command {
        ScheduleCommand::Add(args) => add(*args, &place, &store).await,
        ScheduleCommand::List(args) => list(&store, args.json).await,
        ScheduleCommand::Show(args) => show(&store, &args.name, args.json).await,
        ScheduleCommand::Pause(args) => pause(&store, &args.name, true).await,
        ScheduleCommand::Resume(args) => pause(&store, &args.name, false).await,
        ScheduleCommand::Rm(args) => {
            if !store.remove_schedule(&args.name).await? {
                bail!(no_such(&args.name));
            }
            crate::output::print(&format!("removed schedule {}\n", args.name))?;
            Ok(Outcome::Done)
        }
        ScheduleCommand::RunNow(args) => run_now(&store, &args.name).await,
    }
}

pub(super) fn no_such(name: &str) -> Failure {
    Failure::new(
        format!("there is no schedule named {name}"),
        "`pod schedule list` shows the schedules",
    )
}

/// `text` as a schedule's name, or why it cannot be one.
pub(super) fn name_of(text: &str) -> Result<String, Failure> {
    let name = text.trim().to_string();
    let valid = !name.is_empty()
        && name.len() <= 100
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
    if !valid {
        return Err(Failure::new(
            format!("`{text}` cannot name a schedule"),
            "use up to 100 letters, digits, `-`, `_` and `.`",
        ));
    }
    Ok(name)
}

async fn add(args: ScheduleAddArgs, place: &Place, store: &PgStore) -> Result<Outcome> {
    let name = name_of(&args.name)?;
    let timing = match (&args.cron, args.every) {
        (Some(expr), _) => Timing::cron(expr, args.tz.as_deref()),
        (None, Some(every)) => Timing::every(every),
        (None, None) => bail!("--cron or --every is needed"),
    }
    .map_err(|err| Failure::new(err.to_string(), "see `pod schedule add --help`"))?;
    let task = super::run::task(args.run.task.as_deref(), args.run.task_file.as_deref())?;
    let overlap = match args.overlap {
        OverlapArg::Skip => Overlap::Skip,
        OverlapArg::Allow => Overlap::Allow,
    };
    let (template, limits, session) = match &args.session {
        Some(id) => {
            let (header, id) = heartbeat(place, id, overlap).await?;
            (header, None, Some(id))
        }
        None => {
            let template = super::submit::Template::new(&args.run, place).await?;
            let (header, _) = template.session(String::new());
            (header, Some(template.limits()).filter(|l| l.is_set()), None)
        }
    };
    let next_fire = timing.first(Utc::now())?;
    let added = store
        .add_schedule(&NewSchedule {
            name: name.clone(),
            timing: timing.to_json(),
            task,
            template,
            limits,
            overlap,
            next_fire,
            session,
        })
        .await?;
    if !added {
        bail!(Failure::new(
            format!("a schedule named {name} exists"),
            format!("pick another name, or `pod schedule rm {name}` first"),
        ));
    }
    let continues = session.map_or(String::new(), |id| format!(", continuing {id}"));
    crate::output::print(&format!(
        "schedule {name}: {}{continues}, next at {}\n",
        timing.describe(),
        at(next_fire)
    ))?;
    Ok(Outcome::Done)
}

/// The session a heartbeat continues (`--session`), checked now: it
/// exists, a fleet worker can run it (it records its launch settings), it
/// is no subagent, and the overlap policy is `skip`. Returns its header.
pub(super) async fn heartbeat(
    place: &Place,
    id: &str,
    overlap: Overlap,
) -> Result<(pod::log::SessionHeader, uuid::Uuid)> {
    if overlap == Overlap::Allow {
        bail!(Failure::new(
            "a heartbeat (--session) cannot overlap: its session runs one turn at a time",
            "leave --overlap out; a fire time that finds the session still going is skipped",
        ));
    }
    let id = pod_launch::sessions::resolve(place.store.as_ref(), id).await?;
    let loaded = pod_launch::sessions::load(place.store.as_ref(), id).await?;
    if loaded.header.parent.is_some() {
        bail!(Failure::new(
            format!("session {id} is a subagent's: its parent continues it"),
            "give the id of a top-level session (`pod sessions` lists them)",
        ));
    }
    if loaded.launch.is_none() {
        bail!(Failure::new(
            format!("session {id} records no launch settings, so a worker cannot continue it"),
            "start the session with `pod run` or `pod submit` on this store",
        ));
    }
    Ok((loaded.header, id))
}

pub(super) fn at(t: DateTime<Utc>) -> String {
    t.format("%Y-%m-%d %H:%M:%S UTC").to_string()
}

fn when(schedule: &Schedule) -> String {
    match Timing::from_json(&schedule.timing) {
        Ok(timing) => timing.describe(),
        Err(err) => err.to_string(),
    }
}

/// A schedule as `pod schedule list --json` and `GET /api/schedules` show it.
pub(super) fn as_json(schedule: &Schedule) -> serde_json::Value {
    json!({
        "name": schedule.name,
        "timing": schedule.timing,
        "when": when(schedule),
        "task": schedule.task,
        "workspace": schedule.template.workspace,
        "overlap": schedule.overlap.as_str(),
        "session": schedule.session,
        "paused": schedule.paused,
        "next_fire": schedule.next_fire,
        "created_at": schedule.created_at,
        "last_fire": schedule.last_fire,
        "last_session": schedule.last_session,
        "last_running": schedule.last_running,
        "fires": schedule.fires,
        "skipped": schedule.skipped,
        "missed": schedule.missed,
    })
}

async fn list(store: &PgStore, json: bool) -> Result<Outcome> {
    let schedules = store.schedules().await?;
    let mut out = String::new();
    if json {
        for schedule in &schedules {
            out.push_str(&format!("{}\n", as_json(schedule)));
        }
    } else if schedules.is_empty() {
        out.push_str("no schedules (pod schedule add NAME --cron EXPR TASK adds one)\n");
    } else {
        for s in &schedules {
            let next = match s.paused {
                true => "paused".to_string(),
                false => format!("next {}", at(s.next_fire)),
            };
            let last = match s.last_session {
                Some(id) => format!(
                    "last {id}{}",
                    if s.last_running { " (running)" } else { "" }
                ),
                None => "never fired".to_string(),
            };
            out.push_str(&format!(
                "{}  {}  {next}  {last}  {} started, {} skipped, {} missed\n",
                s.name,
                when(s),
                s.fires,
                s.skipped,
                s.missed
            ));
        }
    }
    crate::output::print(&out)?;
    Ok(Outcome::Done)
}

async fn show(store: &PgStore, name: &str, json: bool) -> Result<Outcome> {
    let Some(schedule) = store.schedule(name).await? else {
        bail!(no_such(name));
    };
    let fires = store.schedule_fires(name, 20).await?;
    if json {
        let mut value = as_json(&schedule);
        value["recent"] = fires
            .iter()
            .map(|f| json!({"fire_at": f.fire_at, "session": f.session, "fired_at": f.fired_at}))
            .collect();
        crate::output::print(&format!("{value}\n"))?;
        return Ok(Outcome::Done);
    }
    let mut out = format!(
        "schedule {}\n  when:      {}\n  task:      {}\n  workspace: {}\n  overlap:   {}\n",
        schedule.name,
        when(&schedule),
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
    for fire in &fires {
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

/// Pauses or resumes schedule `name`: `None` if there is none, else its
/// next fire time when resumed (the first after now).
pub(super) async fn set_paused(
    store: &PgStore,
    name: &str,
    paused: bool,
) -> Result<Option<Option<DateTime<Utc>>>, pod_http::runner::ScheduleRefused> {
    let Some(schedule) = store.schedule(name).await? else {
        return Ok(None);
    };
    let next = match paused {
        true => None,
        false => Some(
            Timing::from_json(&schedule.timing)
                .and_then(|timing| timing.next_after(schedule.read_at.max(Utc::now())))
                .map_err(|err| pod_http::runner::ScheduleRefused::Bad(err.to_string()))?,
        ),
    };
    match store.set_schedule_paused(name, paused, next).await? {
        true => Ok(Some(next)),
        false => Ok(None),
    }
}

async fn pause(store: &PgStore, name: &str, paused: bool) -> Result<Outcome> {
    let Some(next) = set_paused(store, name, paused).await? else {
        bail!(no_such(name));
    };
    crate::output::print(&match next {
        None => format!("paused schedule {name}\n"),
        Some(next) => format!("resumed schedule {name}: next at {}\n", at(next)),
    })?;
    Ok(Outcome::Done)
}

async fn run_now(store: &PgStore, name: &str) -> Result<Outcome> {
    // A worker may fire it meanwhile (moving next_fire): read again then.
    for _ in 0..5 {
        let Some(schedule) = store.schedule(name).await? else {
            bail!(no_such(name));
        };
        let now = Utc::now();
        let fire = fire_of(store, &schedule, now, false).await?;
        let id = match &fire {
            Fire::Start { header, .. } => Some(header.session_id),
            Fire::Continue { session, .. } => Some(*session),
            Fire::Skip => None,
        };
        let next = schedule.next_fire;
        match store.fire_schedule(name, next, now, next, 0, fire).await? {
            Some(Acted::Started | Acted::Continued) => {
                crate::output::print(&format!("{}\n", id.unwrap_or_default()))?;
                return Ok(Outcome::Done);
            }
            Some(Acted::Skipped) => bail!(Failure::new(
                format!(
                    "schedule {name}'s session {} is still going (or its log ends inside a \
                     tool call)",
                    schedule.session.unwrap_or_default()
                ),
                "try again once it is idle; `pod show ID` says where it stands",
            )),
            None => {}
        }
        if schedule.paused {
            bail!(Failure::new(
                format!("schedule {name} is paused"),
                format!("`pod schedule resume {name}` first"),
            ));
        }
    }
    bail!("schedule {name} kept changing; try again")
}
