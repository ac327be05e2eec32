//! The fleet's side of schedules through the HTTP API: `pod serve --http`
//! on a PostgreSQL store adds, pauses, resumes and removes them for
//! `POST`, `PATCH` and `DELETE /api/schedules`, by the rules `pod schedule`
//! follows (names, timings, overlap). The API checked each schedule's
//! session settings against its ceiling before this sees them.

use super::schedule::{as_json, name_of, set_paused};
use pod_fleet::schedule::Timing;
use pod_http::runner::{NewSchedule, ScheduleRefused};
use pod_store_pg::{Overlap, PgStore};

/// What `new` asks for, checked by `pod schedule`'s rules: its name, its
/// timing, whether it may overlap, and its first fire time.
fn checked(
    new: &NewSchedule,
) -> Result<(String, Timing, bool, chrono::DateTime<chrono::Utc>), ScheduleRefused> {
    let bad = |why: String| ScheduleRefused::Bad(why);
    let name = name_of(&new.name).map_err(|f| bad(f.to_string()))?;
    let timing = match (&new.cron, &new.every) {
        (Some(_), Some(_)) => return Err(bad("give `cron` or `every`, not both".into())),
        (Some(expr), None) => Timing::cron(expr, new.tz.as_deref()),
        (None, Some(every)) => {
            let period = crate::cli::parse_age(every).map_err(bad)?;
            Timing::every(period)
        }
        (None, None) => return Err(bad("`cron` or `every` is needed".into())),
    }
    .map_err(|err| bad(err.to_string()))?;
    let allow =
        match new.overlap.as_deref() {
            None | Some("skip") => false,
            Some("allow") if new.session.is_some() => return Err(bad(
                "a heartbeat cannot overlap: a fire time that finds its session still going is \
                 skipped"
                    .into(),
            )),
            Some("allow") => true,
            Some(other) => {
                return Err(bad(format!(
                    "`{other}` is not an overlap policy: `skip` or `allow`"
                )))
            }
        };
    let next_fire = timing
        .first(chrono::Utc::now())
        .map_err(|err| bad(err.to_string()))?;
    Ok((name, timing, allow, next_fire))
}

/// Adds `new` to the file store's schedules (a server without a fleet):
/// what `GET /api/schedules` shows of it.
pub(super) fn add_to_files(
    schedules: &pod_launch::schedules::Schedules,
    new: NewSchedule,
) -> Result<serde_json::Value, ScheduleRefused> {
    use pod_launch::schedules::{Overlap as FileOverlap, Schedule};
    let (name, timing, allow, next_fire) = checked(&new)?;
    let schedule = Schedule {
        name: name.clone(),
        timing,
        task: new.task,
        template: new.template,
        limits: new.limits.filter(|l| l.is_set()),
        overlap: if allow {
            FileOverlap::Allow
        } else {
            FileOverlap::Skip
        },
        session: new.session,
        paused: false,
        next_fire,
        created_at: chrono::Utc::now(),
        run_now: None,
        last_fire: None,
        last_session: None,
        fires: 0,
        skipped: 0,
        missed: 0,
        recent: Vec::new(),
    };
    let failed =
        |e: pod_launch::schedules::ScheduleError| ScheduleRefused::Bad(pod_llm::error_chain(&e));
    if !schedules.add(&schedule).map_err(failed)? {
        return Err(ScheduleRefused::Exists(format!(
            "a schedule named {name} exists"
        )));
    }
    Ok(super::schedule_files::as_json(&schedule))
}

/// Adds `new`: what `GET /api/schedules` shows of it.
pub(super) async fn add(
    store: &PgStore,
    new: NewSchedule,
) -> Result<serde_json::Value, ScheduleRefused> {
    let (name, timing, allow, next_fire) = checked(&new)?;
    let overlap = if allow { Overlap::Allow } else { Overlap::Skip };
    let added = store
        .add_schedule(&pod_store_pg::NewSchedule {
            name: name.clone(),
            timing: timing.to_json(),
            task: new.task,
            template: new.template,
            limits: new.limits.filter(|l| l.is_set()),
            overlap,
            next_fire,
            session: new.session,
        })
        .await?;
    if !added {
        return Err(ScheduleRefused::Exists(format!(
            "a schedule named {name} exists"
        )));
    }
    shown(store, &name).await
}

/// Pauses or resumes schedule `name`.
pub(super) async fn pause(
    store: &PgStore,
    name: &str,
    paused: bool,
) -> Result<serde_json::Value, ScheduleRefused> {
    match set_paused(store, name, paused).await? {
        Some(_) => shown(store, name).await,
        None => Err(missing(name)),
    }
}

/// Removes schedule `name`.
pub(super) async fn remove(store: &PgStore, name: &str) -> Result<(), ScheduleRefused> {
    match store.remove_schedule(name).await? {
        true => Ok(()),
        false => Err(missing(name)),
    }
}

async fn shown(store: &PgStore, name: &str) -> Result<serde_json::Value, ScheduleRefused> {
    match store.schedule(name).await? {
        Some(schedule) => Ok(as_json(&schedule)),
        // Removed the moment after.
        None => Err(missing(name)),
    }
}

fn missing(name: &str) -> ScheduleRefused {
    ScheduleRefused::Missing(format!("there is no schedule named {name}"))
}
