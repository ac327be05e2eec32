//! A fleet's database goes away (stopped as a crash, every connection
//! dropped) while its sessions run, and comes back: sessions pause and
//! then finish; none fails. Real PostgreSQL, real `pod serve` processes.

use crate::fleet::{check_finished, wait_line, Fleet, PATIENCE};
use crate::support::*;
use serde_json::json;
use std::process::Child;
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// Queues `n` sessions that plan three steps and run three `sleep 1`
/// commands on the way; their ids.
fn submit(fleet: &Fleet, n: usize) -> Vec<String> {
    let mut steps = vec![write_todos(&plan(0))];
    for step in 1..=3 {
        steps.push(call(
            "bash",
            json!({"command": format!("sleep 1; echo step {step}")}),
        ));
        steps.push(write_todos(&plan(step)));
    }
    steps.push(say("All done."));
    let script = fleet.env.script("outage.json", &script(steps));
    (0..n)
        .map(|i| {
            let out = fleet
                .pod()
                .args(["submit", "--yes", "--script"])
                .arg(&script)
                .arg(format!("Task {i}"))
                .output()
                .unwrap();
            assert_success(&out);
            String::from_utf8(out.stdout).unwrap().trim().to_string()
        })
        .collect()
}

/// Every line until the worker exits (it runs with `--exit-when-idle`),
/// and whether it exited successfully.
fn lines_until_exit(mut worker: Child, out: mpsc::Receiver<String>) -> (Vec<String>, bool) {
    let deadline = Instant::now() + PATIENCE;
    let mut lines = Vec::new();
    loop {
        match out.recv_timeout(Duration::from_millis(200)) {
            Ok(line) => lines.push(line),
            Err(mpsc::RecvTimeoutError::Disconnected) => break,
            Err(mpsc::RecvTimeoutError::Timeout) => {
                if Instant::now() > deadline {
                    let _ = worker.kill();
                    panic!("the worker did not finish: {lines:#?}");
                }
            }
        }
    }
    let status = worker.wait().unwrap();
    (lines, status.success())
}

fn count(lines: &[String], needle: &str) -> usize {
    lines.iter().filter(|l| l.contains(needle)).count()
}

/// Waits until every session has at least one bash result: all of them
/// are mid-plan.
fn wait_all_started(fleet: &Fleet, ids: &[String]) {
    let deadline = Instant::now() + PATIENCE;
    for id in ids {
        loop {
            let history = fleet.show(id)["history"].clone();
            let started = history
                .as_array()
                .is_some_and(|items| items.iter().any(|item| item["type"] == "tool_result"));
            if started {
                break;
            }
            assert!(Instant::now() < deadline, "{id} never started");
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

/// A `[notify]` table whose command appends each outage notification
/// to `notified` (one JSON message a line).
fn notify_outages_to(fleet: &Fleet, notified: &std::path::Path) {
    let file = notified.display();
    fleet.env.config_file(&format!(
        "[notify]\ncommand = [\"sh\", \"-c\", \"cat >> '{file}'; echo >> '{file}'\"]\n\
         events = [\"database_down\", \"database_back\"]\n"
    ));
}

/// The notifications in `notified`, in order.
fn notifications(notified: &std::path::Path) -> Vec<serde_json::Value> {
    std::fs::read_to_string(notified)
        .unwrap_or_default()
        .lines()
        .filter(|line| !line.trim().is_empty())
        .map(|line| serde_json::from_str(line).unwrap())
        .collect()
}

#[test]
fn sessions_pause_through_a_database_outage_and_all_finish() {
    let mut fleet = Fleet::new();
    let notified = fleet.env.config_dir().join("notified.jsonl");
    notify_outages_to(&fleet, &notified);
    let ids = submit(&fleet, 8);
    let (worker, out) = fleet.worker(&[
        "--workers",
        "8",
        "--exit-when-idle",
        "--db-outage-notify-after",
        "3s",
    ]);
    wait_all_started(&fleet, &ids);

    // Down for longer than the store's old retry window (about 6 s) and
    // than several leases (2 s): before, this failed every session.
    fleet.pg.crash();
    let down = wait_line(&out, "is unreachable since");
    assert!(down.contains("sessions pause"), "{down}");
    std::thread::sleep(Duration::from_secs(12));
    fleet.pg.start_again();
    let back = wait_line(&out, "is back after");
    assert!(back.contains("sessions continue"), "{back}");

    let (lines, exited_ok) = lines_until_exit(worker, out);
    assert!(exited_ok, "{lines:#?}");
    // One line each way, not one per session.
    assert_eq!(count(&lines, "is unreachable since"), 0, "{lines:#?}");
    assert_eq!(count(&lines, "is back after"), 0, "{lines:#?}");
    assert_eq!(count(&lines, "dropped"), 0, "no session failed: {lines:#?}");
    assert_eq!(count(&lines, "cannot claim"), 0, "{lines:#?}");
    for id in &ids {
        let finished = lines
            .iter()
            .find(|l| l.starts_with(&format!("finished {id}")))
            .unwrap_or_else(|| panic!("{id} did not finish: {lines:#?}"));
        assert!(finished.contains("3/3 todos done"), "{finished}");
        let history = check_finished(&fleet, id);
        // Each command ran and was recorded once, in order (an answer that
        // arrived during the outage is recorded once when it is back).
        let outputs: Vec<String> = history
            .iter()
            .filter(|item| item["type"] == "tool_result")
            .filter_map(|item| item["content"].as_str())
            .filter(|content| content.contains("step "))
            .map(|content| content.trim().to_string())
            .collect();
        assert_eq!(outputs.len(), 3, "{id}: {outputs:?}");
    }

    // The outage outlasted the 3 s threshold: one notification when it
    // did, one when the database was back, naming the worker and how long.
    let sent = notifications(&notified);
    let types: Vec<&str> = sent.iter().filter_map(|m| m["type"].as_str()).collect();
    assert_eq!(
        types,
        ["fleet.database_unreachable", "fleet.database_back"],
        "{sent:#?}"
    );
    let (down, back) = (&sent[0]["data"], &sent[1]["data"]);
    assert!(down["down_secs"].as_f64().unwrap() >= 3.0, "{down}");
    assert!(back["down_secs"].as_f64().unwrap() >= 12.0, "{back}");
    assert_eq!(down["since"], back["since"], "{sent:#?}");
    assert!(
        down["worker"].as_str().is_some_and(|w| !w.is_empty()),
        "{down}"
    );
}

#[test]
fn a_worker_started_while_the_database_is_down_waits_for_it() {
    let mut fleet = Fleet::new();
    let ids = submit(&fleet, 1);
    fleet.pg.stop();
    let (worker, out) = fleet.worker(&["--exit-when-idle"]);
    let waiting = wait_line(&out, "cannot be reached");
    assert!(waiting.contains("waiting for it"), "{waiting}");
    std::thread::sleep(Duration::from_secs(2));
    fleet.pg.start_again();
    wait_line(&out, "the database is up after");
    let (lines, exited_ok) = lines_until_exit(worker, out);
    assert!(exited_ok, "{lines:#?}");
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with(&format!("finished {}", ids[0])) && l.contains("3/3")),
        "{lines:#?}"
    );
    check_finished(&fleet, &ids[0]);
}

#[test]
fn a_worker_killed_during_an_outage_leaves_its_sessions_to_the_other() {
    let mut fleet = Fleet::new();
    // An 8 s outage is under the default threshold (1 m): nobody is paged.
    let notified = fleet.env.config_dir().join("notified.jsonl");
    notify_outages_to(&fleet, &notified);
    let ids = submit(&fleet, 6);
    // The first takes three sessions, then the second the other three.
    let (mut first, first_out) = fleet.worker(&["--workers", "3"]);
    for _ in 0..3 {
        wait_line(&first_out, "claimed ");
    }
    let (second, second_out) = fleet.worker(&["--workers", "6", "--exit-when-idle"]);
    wait_all_started(&fleet, &ids);

    fleet.pg.crash();
    wait_line(&second_out, "is unreachable since");
    first.kill().unwrap();
    first.wait().unwrap();
    std::thread::sleep(Duration::from_secs(8));
    fleet.pg.start_again();

    let (lines, exited_ok) = lines_until_exit(second, second_out);
    assert!(exited_ok, "{lines:#?}");
    assert_eq!(count(&lines, "dropped"), 0, "{lines:#?}");
    assert_eq!(
        count(&lines, "(its worker died)"),
        3,
        "the second takes over the first's three: {lines:#?}"
    );
    for id in &ids {
        check_finished(&fleet, id);
    }
    assert_eq!(notifications(&notified), Vec::<serde_json::Value>::new());
}

/// A sample of `/metrics` without labels.
fn sample(metrics: &str, name: &str) -> Option<f64> {
    metrics
        .lines()
        .find_map(|line| line.strip_prefix(&format!("{name} ")))
        .and_then(|value| value.parse().ok())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_api_and_metrics_say_the_database_is_unreachable() {
    let mut pg = pod_testkit::postgres::Postgres::start();
    let env = TestEnv::new();
    let script = env.script("done.json", &json!({"steps": [{"text": "Done."}]}));
    let mut serve = env.pod_process();
    serve
        .env("POD_STORE", pg.url())
        .args(["--yes", "--script"])
        .arg(&script);
    let server = crate::http::Server::start_with(serve, &env);
    let metrics = || async {
        reqwest::Client::new()
            .get(format!("{}/metrics", server.base))
            .bearer_auth(&server.token)
            .send()
            .await
            .unwrap()
    };
    let text = metrics().await.text().await.unwrap();
    assert_eq!(sample(&text, "pod_store_up"), Some(1.0), "{text}");
    assert_eq!(
        sample(&text, "pod_store_outages_total"),
        Some(0.0),
        "{text}"
    );

    // The dashboard is open when the database goes.
    let shots = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("outage");
    let browser = pod_testkit::browser::Browser::start(&shots).await;
    browser
        .goto(&format!("{}/#token={}", server.base, server.token))
        .await;
    browser
        .wait_for(
            "the sessions table",
            "return document.getElementById('list-view').hidden === false;",
        )
        .await;
    const BANNER: &str = "const b = document.getElementById('db-banner'); \
                          return b.hidden ? null : b.textContent;";
    assert_eq!(browser.eval(BANNER, vec![]).await, json!(null));

    pg.crash();
    // The worker's next claim finds the database gone.
    let deadline = Instant::now() + PATIENCE;
    loop {
        let response = metrics().await;
        assert_eq!(response.status(), 200, "/metrics answers during an outage");
        let text = response.text().await.unwrap();
        if sample(&text, "pod_store_up") == Some(0.0) {
            assert_eq!(
                sample(&text, "pod_store_outages_total"),
                Some(1.0),
                "{text}"
            );
            break;
        }
        assert!(Instant::now() < deadline, "{text}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let listed = server
        .request(reqwest::Method::GET, "/sessions")
        .send()
        .await
        .unwrap();
    assert_eq!(listed.status(), 503);
    assert_eq!(
        listed
            .headers()
            .get("retry-after")
            .and_then(|v| v.to_str().ok()),
        Some("5")
    );
    let body: serde_json::Value = listed.json().await.unwrap();
    let error = body["error"].as_str().unwrap_or_default();
    assert!(
        error.contains("unreachable since") && error.contains("sessions are paused"),
        "{body}"
    );
    let said = server.get("/server").await;
    assert!(said["store_unreachable_since"].is_string(), "{said}");
    // The dashboard says so in a banner, not in a broken page.
    let banner = browser.wait_for("the database banner", BANNER).await;
    let banner = banner.as_str().unwrap_or_default().to_string();
    assert!(
        banner.contains("database is unreachable since") && banner.contains("paused"),
        "{banner}"
    );
    browser.screenshot("database-down").await;

    pg.start_again();
    let deadline = Instant::now() + PATIENCE;
    loop {
        let text = metrics().await.text().await.unwrap();
        if sample(&text, "pod_store_up") == Some(1.0) {
            assert_eq!(
                sample(&text, "pod_store_outages_total"),
                Some(1.0),
                "{text}"
            );
            let lasted = sample(&text, "pod_store_outage_seconds_total").unwrap_or_default();
            assert!(lasted > 0.0, "{text}");
            break;
        }
        assert!(Instant::now() < deadline, "{text}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let listed = server.get("/sessions").await;
    assert!(listed.is_array() || listed.is_object(), "{listed}");
    assert_eq!(
        server.get("/server").await["store_unreachable_since"],
        json!(null)
    );
    browser
        .wait_for(
            "the banner to go",
            "return document.getElementById('db-banner').hidden || undefined;",
        )
        .await;
}
