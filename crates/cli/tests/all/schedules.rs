//! `pod schedule` with `pod serve` workers on a throwaway PostgreSQL: one
//! session per fire time however many workers look (one killed, one
//! stopped), the latest fire time once after downtime, paused schedules,
//! overlap, and bad input.

use crate::fleet::{wait_line, Fleet};
use crate::support::*;
use serde_json::{json, Value};
use std::collections::BTreeSet;
use std::process::Command;
use std::time::Duration;

fn add(fleet: &Fleet, name: &str, extra: &[&str], steps: Vec<Value>) {
    let script = fleet.env.script(&format!("{name}.json"), &script(steps));
    let out = fleet
        .pod()
        .args(["schedule", "add", name])
        .args(extra)
        .args(["--yes", "--script"])
        .arg(&script)
        .arg(format!("The {name} task"))
        .output()
        .unwrap();
    assert_success(&out);
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(said.contains(&format!("schedule {name}:")), "{said}");
}

fn show(fleet: &Fleet, name: &str) -> Value {
    let out = fleet
        .pod()
        .args(["schedule", "show", name, "--json"])
        .output()
        .unwrap();
    assert_success(&out);
    serde_json::from_slice(&out.stdout).unwrap()
}

fn schedule(fleet: &Fleet, verb: &str, name: &str) {
    let out = fleet.pod().args(["schedule", verb, name]).output().unwrap();
    assert_success(&out);
}

/// The fire times of schedule `name` that started a session, in order,
/// in milliseconds since the epoch.
fn started_fire_times(fleet: &Fleet, name: &str) -> Vec<i64> {
    fleet
        .query(
            "SELECT floor(extract(epoch FROM fire_at) * 1000)::bigint FROM pod_schedule_fires
             WHERE schedule = $1 AND outcome = 'started' ORDER BY fire_at",
            &[&name],
        )
        .iter()
        .map(|row| row.get(0))
        .collect()
}

/// The fire times the sessions started by schedule `name` record in their
/// headers, in milliseconds since the epoch, one per session.
fn session_fire_times(fleet: &Fleet, name: &str) -> Vec<i64> {
    fleet
        .query(
            "SELECT floor(extract(epoch FROM (record->'header'->'origin'->>'fire_at')::timestamptz) * 1000)::bigint
             FROM pod_records
             WHERE seq = 0 AND record->'header'->'origin'->>'name' = $1
             ORDER BY 1",
            &[&name],
        )
        .iter()
        .map(|row| row.get(0))
        .collect()
}

fn signal(child: &std::process::Child, signal: &str) {
    let status = Command::new("kill")
        .args([signal, &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
}

#[test]
fn each_fire_time_starts_one_session_across_three_workers_one_killed_one_stopped() {
    let fleet = Fleet::new();
    add(
        &fleet,
        "tick",
        &["--every", "2s", "--overlap", "allow"],
        vec![say("Checked.")],
    );
    let mut workers: Vec<_> = (0..3).map(|_| fleet.worker(&["--workers", "4"])).collect();
    std::thread::sleep(Duration::from_secs(5));
    workers[0].0.kill().unwrap();
    workers[0].0.wait().unwrap();
    signal(&workers[1].0, "-STOP");
    std::thread::sleep(Duration::from_secs(9));
    schedule(&fleet, "pause", "tick");
    signal(&workers[1].0, "-CONT");

    let fired = started_fire_times(&fleet, "tick");
    assert!(
        fired.len() >= 5,
        "about seven fire times in 14 s: {fired:?}"
    );
    // None missed: consecutive fire times are one period apart.
    for pair in fired.windows(2) {
        assert_eq!(pair[1] - pair[0], 2000, "a fire time missed: {fired:?}");
    }
    // None doubled: one session per fire time, each recording it.
    assert_eq!(session_fire_times(&fleet, "tick"), fired);
    let shown = show(&fleet, "tick");
    assert_eq!(shown["fires"], fired.len() as u64, "{shown}");
    assert_eq!(shown["missed"], 0, "{shown}");
    assert_eq!(shown["paused"], true, "{shown}");

    // A paused schedule fires nothing.
    std::thread::sleep(Duration::from_secs(4));
    assert_eq!(started_fire_times(&fleet, "tick"), fired);
    for (worker, _) in &mut workers[1..] {
        worker.kill().unwrap();
        worker.wait().unwrap();
    }
}

#[test]
fn after_downtime_a_schedule_runs_its_latest_fire_time_once() {
    let fleet = Fleet::new();
    add(
        &fleet,
        "catchup",
        &["--every", "2s", "--max-wall", "2h"],
        vec![say("Caught up.")],
    );
    let created = show(&fleet, "catchup")["created_at"].clone();
    // No worker for three or four fire times.
    std::thread::sleep(Duration::from_secs(7));
    let (mut worker, out) = fleet.worker(&["--workers", "2"]);
    let fired = wait_line(&out, "schedule catchup fired for");
    schedule(&fleet, "pause", "catchup");
    assert!(fired.contains("earlier fire times missed"), "{fired}");

    let shown = show(&fleet, "catchup");
    assert_eq!(shown["fires"], 1, "the passed fire times run once: {shown}");
    let missed = shown["missed"].as_i64().unwrap();
    assert!(missed >= 2, "{shown}");
    // What ran is the latest of them: the first fire time plus `missed`
    // periods.
    let fire_times = started_fire_times(&fleet, "catchup");
    assert_eq!(fire_times.len(), 1);
    // The schedule waits for the next one (paused right after, so still
    // one period on), and the first fire time was one period after it was
    // added (its row's clock and the command's differ by a moment).
    let next: chrono::DateTime<chrono::Utc> =
        serde_json::from_value(shown["next_fire"].clone()).expect("next_fire");
    assert_eq!(fire_times[0], next.timestamp_millis() - 2000, "{shown}");
    let created: chrono::DateTime<chrono::Utc> =
        serde_json::from_value(created).expect("created_at");
    let first = fire_times[0] - missed * 2000;
    let after_created = first - created.timestamp_millis();
    assert!(
        (1_000..=3_000).contains(&after_created),
        "the first fire time {after_created} ms after the schedule was added: {shown}"
    );

    // The session it started runs and says where it came from.
    let id = shown["last_session"].as_str().unwrap().to_string();
    wait_line(&out, &format!("finished {id}"));
    let session = fleet.show(&id);
    assert_eq!(session["session"]["origin"]["name"], "catchup", "{session}");
    // It holds the schedule's limits, recorded before its task.
    let id: uuid::Uuid = id.parse().unwrap();
    let records: Vec<String> = fleet
        .query(
            "SELECT record::text FROM pod_records WHERE session_id = $1 ORDER BY seq",
            &[&id],
        )
        .iter()
        .map(|row| row.get::<_, String>(0))
        .collect();
    let limits = records.iter().position(|r| r.contains("\"limits\""));
    let task = records.iter().position(|r| r.contains("The catchup task"));
    assert!(limits.is_some() && limits < task, "{records:#?}");
    assert!(
        records[limits.unwrap_or(0)].contains("7200"),
        "{records:#?}"
    );
    worker.kill().unwrap();
    worker.wait().unwrap();
}

#[test]
fn a_fire_time_is_skipped_while_the_last_session_still_runs() {
    let fleet = Fleet::new();
    add(
        &fleet,
        "slow",
        &["--every", "1s"],
        vec![
            call("bash", json!({"command": "sleep 3; echo slow"})),
            say("Slow done."),
        ],
    );
    let (mut worker, out) = fleet.worker(&["--workers", "4"]);
    wait_line(&out, "schedule slow skipped");
    std::thread::sleep(Duration::from_secs(4));
    schedule(&fleet, "pause", "slow");
    worker.kill().unwrap();
    worker.wait().unwrap();

    let shown = show(&fleet, "slow");
    assert!(shown["skipped"].as_i64().unwrap() >= 2, "{shown}");
    // A 3 s session every 1 s: most fire times are skipped, and each one
    // that started a session is recorded by that session.
    let started = started_fire_times(&fleet, "slow");
    assert!(!started.is_empty(), "{shown}");
    assert_eq!(shown["fires"], started.len() as u64, "{shown}");
    assert_eq!(session_fire_times(&fleet, "slow"), started);
}

#[test]
fn bad_schedules_are_refused_with_what_to_do() {
    let fleet = Fleet::new();
    let path = fleet.env.script("bad.json", &script(vec![say("x")]));
    let run = |args: &[&str]| {
        let out = fleet
            .pod()
            .args(["schedule", "add"])
            .args(args)
            .args(["--yes", "--script"])
            .arg(&path)
            .arg("A task")
            .output()
            .unwrap();
        assert!(!out.status.success(), "{args:?} was accepted");
        String::from_utf8_lossy(&out.stderr).to_string()
    };
    let err = run(&["bad", "--cron", "61 * * * *"]);
    assert!(err.contains("61 * * * *"), "{err}");
    let err = run(&["bad", "--cron", "0 3 * * *", "--tz", "Mars/Olympus"]);
    assert!(
        err.contains("Mars/Olympus") && err.contains("IANA"),
        "{err}"
    );
    let err = run(&["bad", "--every", "0s"]);
    assert!(err.contains("at least 1s"), "{err}");
    let err = run(&["no spaces", "--every", "1h"]);
    assert!(err.contains("cannot name a schedule"), "{err}");
    add(&fleet, "dup", &["--every", "1h"], vec![say("x")]);
    let err = run(&["dup", "--every", "1h"]);
    assert!(err.contains("a schedule named dup exists"), "{err}");

    // Nothing half-made: the refused ones are not listed.
    let out = fleet
        .pod()
        .args(["schedule", "list", "--json"])
        .output()
        .unwrap();
    assert_success(&out);
    let names: BTreeSet<String> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|line| {
            serde_json::from_str::<Value>(line).unwrap()["name"]
                .as_str()
                .unwrap()
                .to_string()
        })
        .collect();
    assert_eq!(names, BTreeSet::from(["dup".to_string()]));
    let out = fleet
        .pod()
        .args(["schedule", "rm", "nope"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("no schedule named nope"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_api_lists_the_fleets_schedules() {
    let fleet = Fleet::new();
    add(
        &fleet,
        "nightly",
        &["--cron", "0 3 * * *", "--tz", "Europe/Berlin"],
        vec![say("x")],
    );
    let mut serve = fleet.env.pod_process();
    serve.env("POD_STORE", fleet.pg.url()).args([
        "--workers",
        "1",
        "--yes",
        "--provider",
        "scripted",
    ]);
    let server = crate::http::Server::start_with(serve, &fleet.env);
    let listed = server.get("/schedules").await;
    let schedules = listed["schedules"].as_array().cloned().unwrap_or_default();
    assert_eq!(schedules.len(), 1, "{listed}");
    let nightly = &schedules[0];
    assert_eq!(nightly["name"], "nightly");
    assert_eq!(nightly["when"], "cron 0 3 * * * (Europe/Berlin)");
    assert_eq!(nightly["paused"], false);
    // The next 03:00 in Berlin: 01:00 or 02:00 UTC.
    let next: chrono::DateTime<chrono::Utc> =
        serde_json::from_value(nightly["next_fire"].clone()).unwrap();
    let hour = next.format("%H:%M:%S").to_string();
    assert!(hour == "02:00:00" || hour == "01:00:00", "{nightly}");
    assert_eq!(nightly["task"], "The nightly task");

    // A server on the file store lists the file store's schedules (none
    // here; `file_schedules` fires and lists some), not the fleet's.
    let env = TestEnv::new();
    let script = env.script("x.json", &script(vec![say("x")]));
    let mut serve = env.pod_process();
    serve.args(["--script"]).arg(&script);
    let files = crate::http::Server::start_with(serve, &env);
    let listed = files.get("/schedules").await;
    assert_eq!(listed["schedules"], serde_json::json!([]), "{listed}");
}
