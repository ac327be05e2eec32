//! The web dashboard in a real browser (headless Chromium over WebDriver):
//! the sessions table, a session's checklist ticking through its plan
//! live, an approval allowed with a click, and a notification the model
//! then receives. Screenshots of a failing step go to
//! `target/tmp/dashboard/`.

use crate::http::Server;
use crate::support::*;
use pod::log::EndedHow;
use pod_llm::SystemKind;
use pod_testkit::browser::Browser;
use pod_testkit::logs::{self, SessionLog};
use pod_worker::Limit;
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::time::{Duration, SystemTime};

fn plan(done: usize) -> Value {
    let todos: Vec<Value> = ["Read the brief", "Write the notes", "Check the notes"]
        .iter()
        .enumerate()
        .map(|(i, content)| {
            let status = match i {
                i if i < done => "completed",
                i if i == done => "in_progress",
                _ => "pending",
            };
            json!({"id": format!("t{i}"), "content": content, "status": status})
        })
        .collect();
    json!({ "todos": todos })
}

/// A plan worked through with pauses (so a watcher sees each state), a
/// write that asks, then a long pause in which the notification arrives.
fn script() -> Value {
    json!({"steps": [
        {"text": "Planning.", "tool_calls": [{"name": "todo_write", "arguments": plan(0)}]},
        {"delay_ms": 3000, "tool_calls": [{"name": "todo_write", "arguments": plan(1)}]},
        {"delay_ms": 1500, "tool_calls": [{"name": "write_file", "arguments": {"path": "notes.md", "content": "notes\n"}}]},
        {"delay_ms": 300, "tool_calls": [{"name": "todo_write", "arguments": plan(2)}]},
        {"delay_ms": 4000, "tool_calls": [{"name": "todo_write", "arguments": plan(3)}]},
        {"text": "All three done."}
    ]})
}

const STATUSES: &str = "return Array.from(document.querySelectorAll('#s-todos li'))\
    .map(li => li.dataset.status).join(',');";

/// A script true once the checklist's statuses are `expected`.
fn statuses_are(expected: &str) -> String {
    format!(
        "return Array.from(document.querySelectorAll('#s-todos li'))\
         .map(li => li.dataset.status).join(',') === '{expected}';"
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_dashboard_follows_a_plan_live_allows_a_write_and_delivers_a_note() {
    let env = TestEnv::new();
    let server = Server::start(&env, &script());
    let shots = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("dashboard");
    let browser = Browser::start(&shots).await;
    // The dashboard is open before the session starts.
    browser
        .goto(&format!("{}/#token={}", server.base, server.token))
        .await;
    browser
        .wait_for(
            "the sessions table",
            "return document.getElementById('list-view').hidden === false;",
        )
        .await;
    let id = server.create(&env, "Write the notes").await;

    // The sessions table lists it, with its plan's progress.
    let row = format!("#sessions tr[data-id='{id}'] a");
    browser
        .wait_for(
            "the session in the table",
            &format!("return document.querySelector(\"{row}\") !== null;"),
        )
        .await;
    browser.screenshot("sessions").await;
    // The table is redrawn as sessions change: click by selector, now.
    browser
        .eval(
            &format!("document.querySelector(\"{row}\").click();"),
            vec![],
        )
        .await;

    // Its page: the checklist ticks through the plan as the agent works.
    let mut seen: Vec<String> = Vec::new();
    loop {
        let statuses = browser.wait_for("the checklist", STATUSES).await;
        let statuses = statuses.as_str().unwrap_or_default().to_string();
        if seen.last() != Some(&statuses) {
            seen.push(statuses.clone());
        }
        let asking = browser
            .eval(
                "return document.querySelector('.approval button.allow') !== null;",
                vec![],
            )
            .await;
        if asking == json!(true) {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(40)).await;
    }
    assert!(
        seen.contains(&"in_progress,pending,pending".to_string())
            && seen.contains(&"completed,in_progress,pending".to_string()),
        "the checklist went through the plan's states live: {seen:?}"
    );
    assert!(!env.workspace().join("notes.md").exists());
    // The session parked on its question: its status says so.
    browser
        .wait_for(
            "the session awaiting approval",
            "return document.getElementById('s-meta').dataset.status === 'awaiting_approval';",
        )
        .await;

    browser.screenshot("approval").await;
    // Allow the write: the turn goes on.
    let allow = browser.find(".approval button.allow").await.unwrap();
    browser.click(&allow).await;
    browser
        .wait_for(
            "the write's result",
            "return document.getElementById('transcript').textContent.includes('Created `notes.md`');",
        )
        .await;
    assert!(env.workspace().join("notes.md").exists());
    browser
        .wait_for(
            "the third item in progress",
            &statuses_are("completed,completed,in_progress"),
        )
        .await;

    // A note, sent while the model thinks, is what it reads next.
    let text = browser.find("#notify-text").await.unwrap();
    browser
        .type_into(&text, "Mention the word BLUEBERRY in the notes.")
        .await;
    browser
        .click(&browser.find("#notify-send").await.unwrap())
        .await;
    browser
        .wait_for(
            "the notification in the transcript",
            "return document.getElementById('transcript').textContent.includes('BLUEBERRY');",
        )
        .await;
    browser
        .wait_for(
            "the final answer",
            "return document.getElementById('transcript').textContent.includes('All three done.');",
        )
        .await;
    browser
        .wait_for(
            "every item completed",
            &statuses_are("completed,completed,completed"),
        )
        .await;
    // The model received it: the note is in history before its last request.
    let history = server.get(&format!("/sessions/{id}/history")).await;
    let items: Vec<&Value> = history["records"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|r| r["record"].get("item"))
        .collect();
    let note = items
        .iter()
        .position(|i| i["text"].as_str().is_some_and(|t| t.contains("BLUEBERRY")))
        .expect("the note was committed");
    let answer = items
        .iter()
        .position(|i| i["text"] == "All three done.")
        .unwrap();
    assert!(
        note < answer,
        "the note came before the model's last answer"
    );
    browser
        .wait_for(
            "the final status",
            "return document.getElementById('s-meta').dataset.status === 'done';",
        )
        .await;
    // What the session changed: the file it wrote, from its checkpoints.
    browser
        .wait_for(
            "the session's changes",
            "return document.getElementById('s-changes').textContent.includes('notes.md');",
        )
        .await;
    let patch = browser
        .eval(
            "return document.getElementById('s-patch-text').textContent;",
            vec![],
        )
        .await;
    assert!(
        patch.as_str().unwrap_or("").contains("+++ b/notes.md"),
        "{patch}"
    );
    browser.screenshot("finished").await;
}

// --- a thousand sessions ----------------------------------------------------

/// Tasks of the generated sessions (a realistic screen, not "Session 17").
const TASKS: &[&str] = &[
    "Fix the flaky retry test in the providers crate",
    "Add pagination to the sessions endpoint",
    "Upgrade axum and fix the handlers that broke",
    "Write the release notes for 0.9",
    "Find out why the nightly build takes forty minutes",
    "Port the webhook signer to the new HMAC crate",
    "Document how fleet leases are renewed",
    "Add --json to pod prune",
    "Reproduce the crash on resume after a compaction",
    "Move the CI cache to the new runners",
    "Review the sandbox policy for network access",
    "Bump the MSRV and fix the new clippy lints",
    "Translate the first chapter of the user guide",
    "Triage the open issues labelled bug",
    "Profile the token estimator on long histories",
    "Split the approval gate into its own module",
];

/// The repositories they work in.
const REPOS: &[&str] = &["pod", "billing-api", "web-frontend", "infra", "docs-site"];

/// A model of the generated sessions.
struct Model {
    name: &'static str,
    profile: &'static str,
    /// Input and output prices per million tokens; a local model has
    /// none, so its sessions have no cost.
    prices: Option<(f64, f64)>,
}

const MODELS: &[Model] = &[
    Model {
        name: "claude-sonnet-4-5",
        profile: "sonnet",
        prices: Some((3.0, 15.0)),
    },
    Model {
        name: "gpt-5-mini",
        profile: "mini",
        prices: Some((0.25, 2.0)),
    },
    Model {
        name: "claude-opus-4-1",
        profile: "opus",
        prices: Some((15.0, 75.0)),
    },
    Model {
        name: "qwen3-coder",
        profile: "local",
        prices: None,
    },
];

/// The generated sessions: how many of each state, and some by name.
struct Fleet {
    counts: BTreeMap<String, u64>,
    /// A `running` session another process holds (the test).
    held: String,
    /// A `done` session.
    done: String,
    /// The locks that keep the held sessions running.
    _locks: Vec<std::fs::File>,
}

/// Writes 1,000 sessions into the test's `POD_HOME`: 5 awaiting approval,
/// 10 stalled (held, no record for 25 minutes or more), 60 running (held),
/// 40 stopped by a budget, 25 interrupted, 10 failed, 5 cancelled, 45
/// idle, 2 damaged and 798 done, updated over the last days.
fn thousand_sessions(env: &TestEnv) -> Fleet {
    let now = SystemTime::now();
    let minutes = |m: u64| now - Duration::from_secs(60 * m);
    let mut counts = BTreeMap::new();
    let mut locks = Vec::new();
    let (mut held, mut done) = (String::new(), String::new());
    for i in 0..1000u64 {
        let model = &MODELS[(i % 4) as usize];
        let task = TASKS[(i as usize * 7) % TASKS.len()];
        let mut launch = json!({"profile": model.profile, "provider": {"model": model.name}});
        if let Some((input, output)) = model.prices {
            launch["provider"]["prices"] = json!({"input": input, "output": output});
        }
        // Where a fleet's agents would work (the server never looks).
        let workspace = std::path::Path::new("/srv/agents").join(REPOS[(i % 5) as usize]);
        let tokens = 2_000 + (i * 7_919) % 180_000;
        let log = SessionLog::new(model.name, &workspace)
            .launch(launch)
            .prompt(&format!("{task}\n\nThe details are in the issue."))
            .plan(&steps((i % 3) as usize))
            .call("read_file", json!({"path": "src/lib.rs"}), tokens, 120)
            .result("//! The crate's root.\n", false);
        let (state, log) = match i {
            0..5 => (
                "awaiting_approval",
                log.call(
                    "bash",
                    json!({"command": "cargo test --workspace"}),
                    tokens,
                    40,
                )
                .ask()
                .updated(minutes(3 + i * 4)),
            ),
            5..15 => ("stalled", log.updated(minutes(25 + i * 5))),
            15..75 => ("running", log.updated(minutes(i % 8))),
            75..115 => {
                let limit = match i % 2 {
                    0 => Limit::TurnRequests(500),
                    _ => Limit::RunCost(pod_llm::Cost::from_amount(3.0)),
                };
                ("stopped", log.stopped(limit).updated(minutes(60 + i * 3)))
            }
            115..140 => (
                "interrupted",
                log.call("bash", json!({"command": "cargo build"}), tokens, 30)
                    .updated(minutes(90 + i * 2)),
            ),
            140..150 => (
                "failed",
                log.ended(
                    EndedHow::Failed,
                    Some("the provider answered 400 Bad Request: prompt is too long"),
                )
                .updated(minutes(100 + i * 2)),
            ),
            150..155 => (
                "cancelled",
                log.ended(EndedHow::Cancelled, None)
                    .updated(minutes(100 + i * 2)),
            ),
            155..200 => (
                "idle",
                log.answer("I need the staging credentials to go on.", tokens, 80)
                    .updated(minutes(200 + i * 11)),
            ),
            _ => (
                "done",
                log.plan(&steps(3))
                    .answer("Done: the change is in and the tests pass.", tokens, 300)
                    .updated(minutes(300 + i * 13)),
            ),
        };
        let path = log.write(&env.pod_home());
        let state = match (state, i) {
            // A bad disk: the log cannot be read any more.
            ("done", 998..) => {
                logs::damage(&path);
                "damaged"
            }
            (state, _) => state,
        };
        if matches!(state, "running" | "stalled") {
            locks.push(logs::hold(&path));
            if state == "running" {
                held = log.id().to_string();
            }
        }
        if state == "done" {
            done = log.id().to_string();
        }
        *counts.entry(state.to_string()).or_insert(0) += 1;
    }
    Fleet {
        counts,
        held,
        done,
        _locks: locks,
    }
}

/// A three-step plan with `done` steps completed and the next in progress.
fn steps(done: usize) -> Vec<(&'static str, &'static str)> {
    ["Read the code", "Make the change", "Run the tests"]
        .into_iter()
        .enumerate()
        .map(|(i, step)| {
            let status = match i {
                i if i < done => "completed",
                i if i == done => "in_progress",
                _ => "pending",
            };
            (step, status)
        })
        .collect()
}

/// The server's model: "Write the notes" plans, writes (which asks) and
/// finishes; "Think slowly" thinks for ten minutes (until cancelled).
fn fleet_script() -> Value {
    let mut script = crate::http::writing_script();
    script["agents"] =
        json!([{"task": "Think slowly", "steps": [{"text": "slow", "delay_ms": 600_000}]}]);
    script
}

/// The rows of the table, by selector.
fn row(id: &str) -> String {
    format!("#sessions tr[data-id='{id}']")
}

/// A script true once session `id`'s row is in `group`.
fn row_in(id: &str, group: &str) -> String {
    format!(
        "const r = document.querySelector(\"{}\"); return r !== null && r.dataset.group === '{group}';",
        row(id)
    )
}

/// The counts the state filters show, by state (`all` for the total).
async fn counts(browser: &Browser) -> BTreeMap<String, u64> {
    let shown = browser
        .eval(
            "return Object.fromEntries(Array.from(document.querySelectorAll('#states .chip'))\
             .map(c => [c.dataset.state, Number(c.querySelector('.n').textContent)]));",
            vec![],
        )
        .await;
    serde_json::from_value(shown).unwrap()
}

/// Whether the page is as wide as the window, at most (and the table as
/// its box): nothing scrolls sideways.
const FITS: &str = "const wrap = document.querySelector('.table-wrap');\
    return document.documentElement.scrollWidth <= window.innerWidth\
    && (wrap.offsetParent === null || wrap.scrollWidth <= wrap.clientWidth);";

/// What is out of order among the shown rows (null when none): awaiting
/// approval, failed, stalled, running, then the rest, each group most
/// recently updated first.
const ORDER: &str = "const rank = {awaiting_approval: 0, failed: 1, damaged: 1, stalled: 2, running: 3};\
    const rows = Array.from(document.querySelectorAll('#sessions tbody tr')).filter(r => !r.hidden);\
    for (let i = 1; i < rows.length; i++) {\
      const [a, b] = [rows[i - 1], rows[i]];\
      const [ra, rb] = [rank[a.dataset.group] ?? 4, rank[b.dataset.group] ?? 4];\
      if (ra > rb || (ra === rb && Number(a.dataset.updated) < Number(b.dataset.updated)))\
        return 'row ' + i + ': ' + a.dataset.group + ' before ' + b.dataset.group;\
    }\
    return rows.length ? null : 'no rows';";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_thousand_sessions_show_what_needs_a_person_first_on_a_desk_and_a_phone() {
    let env = TestEnv::new();
    let fleet = thousand_sessions(&env);
    let server = Server::start(&env, &fleet_script());
    let slow = server.create(&env, "Think slowly").await;
    let id = server.create(&env, "Write the notes").await;
    let shots = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("dashboard");
    let browser = Browser::start(&shots).await;
    browser.set_viewport(1400, 1000).await;
    browser
        .goto(&format!("{}/#token={}", server.base, server.token))
        .await;

    // Every session is listed; the write parks on its question.
    browser
        .wait_for(
            "1,002 sessions",
            "return document.querySelector('#states [data-state=all] .n')?.textContent === '1002';",
        )
        .await;
    browser
        .wait_for(
            "the write awaiting approval",
            &row_in(&id, "awaiting_approval"),
        )
        .await;
    browser
        .wait_for("the slow session running", &row_in(&slow, "running"))
        .await;

    // The counts per state.
    let mut expected = fleet.counts.clone();
    *expected.get_mut("awaiting_approval").unwrap() += 1;
    *expected.get_mut("running").unwrap() += 1;
    expected.insert("all".into(), 1002);
    assert_eq!(counts(&browser).await, expected);

    // What needs a person first: a question, then the stalled, then what
    // runs, then the rest, each most recent first.
    let order = browser.eval(ORDER, vec![]).await;
    assert_eq!(order, Value::Null, "{order}");
    let first = browser
        .eval(
            "return document.querySelector('#sessions tbody tr').dataset.group;",
            vec![],
        )
        .await;
    assert_eq!(first, "awaiting_approval");
    // Each row says what it is: its task, its plan, tokens, cost, age.
    let cells = browser
        .eval(
            &format!(
                "const r = document.querySelector(\"{}\");\
                 return ['task', 'plan', 'tokens', 'when'].map(c => r.querySelector('td.' + c).textContent);",
                row(&fleet.done)
            ),
            vec![],
        )
        .await;
    assert!(
        cells[0].as_str().unwrap().len() > 20,
        "a task title: {cells}"
    );
    assert_eq!(cells[1].as_str().unwrap(), "3/3", "{cells}");
    assert!(cells[2].as_str().unwrap().ends_with('k'), "{cells}");
    assert!(cells[3].as_str().unwrap().ends_with(" ago"), "{cells}");
    browser.screenshot("thousand-1400").await;

    // A count filters the list to its state, and back.
    let stopped = browser.find("#states [data-state=stopped]").await.unwrap();
    browser.click(&stopped).await;
    browser
        .wait_for(
            "only the stopped sessions",
            "const shown = Array.from(document.querySelectorAll('#sessions tbody tr')).filter(r => !r.hidden);\
             return shown.length === 40 && shown.every(r => r.dataset.status === 'stopped')\
             && location.hash === '#/?state=stopped';",
        )
        .await;
    let detail = browser
        .eval(
            "return document.querySelector('#sessions tbody tr:not([hidden]) td.state .detail').textContent;",
            vec![],
        )
        .await;
    assert!(
        detail.as_str().unwrap().starts_with("stopped by "),
        "{detail}"
    );
    // A failed session says why, a damaged one where.
    for (state, said) in [
        ("failed", "400 Bad Request"),
        ("damaged", "log.jsonl:3: corrupt"),
    ] {
        let count = browser
            .find(&format!("#states [data-state={state}]"))
            .await
            .unwrap();
        browser.click(&count).await;
        let detail = browser
            .wait_for(
                &format!("the {state} sessions"),
                &format!(
                    "const shown = Array.from(document.querySelectorAll('#sessions tbody tr')).filter(r => !r.hidden);\
                     if (!shown.length || !shown.every(r => r.dataset.status === '{state}')) return null;\
                     return shown[0].querySelector('td.state .detail').textContent;"
                ),
            )
            .await;
        assert!(detail.as_str().unwrap().contains(said), "{state}: {detail}");
    }
    let all = browser.find("#states [data-state=all]").await.unwrap();
    browser.click(&all).await;
    browser
        .wait_for(
            "every session shown again",
            "return Array.from(document.querySelectorAll('#sessions tbody tr')).every(r => !r.hidden);",
        )
        .await;

    // Allow, from the list: the parked write runs. Rows are kept and
    // updated in place meanwhile, never redrawn.
    browser
        .eval(
            "window.rowsBefore = new Map(Array.from(document.querySelectorAll('#sessions tbody tr'))\
             .map(r => [r.dataset.id, r]));",
            vec![],
        )
        .await;
    let summary = browser
        .eval(
            &format!(
                "return document.querySelector(\"{} td.state .detail\").textContent;",
                row(&id)
            ),
            vec![],
        )
        .await;
    assert_eq!(summary, "write_file: notes.md");
    let allow = browser
        .find(&format!("{} button.allow", row(&id)))
        .await
        .unwrap();
    browser.click(&allow).await;
    browser
        .wait_for("the write done", &row_in(&id, "done"))
        .await;
    assert!(env.workspace().join("notes.md").exists());
    let replaced = browser
        .eval(
            "const now = Array.from(document.querySelectorAll('#sessions tbody tr'));\
             return now.length === window.rowsBefore.size\
             ? now.filter(r => window.rowsBefore.get(r.dataset.id) !== r).length : -1;",
            vec![],
        )
        .await;
    assert_eq!(replaced, 0, "rows redrawn instead of updated");
    let order = browser.eval(ORDER, vec![]).await;
    assert_eq!(order, Value::Null, "{order}");

    // Bulk cancel: the running one here is cancelled; the one another
    // process runs and the finished one are reported.
    for pick in [&slow, &fleet.held, &fleet.done] {
        let pick = browser
            .find(&format!("{} input.pick", row(pick)))
            .await
            .unwrap();
        browser.click(&pick).await;
    }
    browser
        .wait_for(
            "three selected",
            "return document.getElementById('bulk-count').textContent === '3 selected, 2 running';",
        )
        .await;
    browser
        .click(&browser.find("#bulk-cancel").await.unwrap())
        .await;
    let report = browser
        .wait_for(
            "the cancel's report",
            "const r = document.getElementById('bulk-report'); return !r.hidden && r.textContent;",
        )
        .await;
    assert!(
        report.as_str().unwrap().contains("Cancel sent to 1 of 3"),
        "{report}"
    );
    let reasons = browser
        .eval(
            "return Object.fromEntries(Array.from(document.querySelectorAll('#bulk-report li'))\
             .map(li => [li.dataset.id, li.textContent]));",
            vec![],
        )
        .await;
    let reasons = reasons.as_object().unwrap();
    assert_eq!(reasons.len(), 2, "{reasons:?}");
    assert!(
        reasons[&fleet.held]
            .as_str()
            .unwrap()
            .contains("not running in this server"),
        "{reasons:?}"
    );
    assert!(
        reasons[&fleet.done]
            .as_str()
            .unwrap()
            .contains("not running (done)"),
        "{reasons:?}"
    );
    browser
        .wait_for(
            "the slow session cancelled",
            &format!(
                "const r = document.querySelector(\"{}\"); return r.dataset.group !== 'running';",
                row(&slow)
            ),
        )
        .await;

    // On a phone: nothing scrolls sideways; the table keeps its first
    // columns.
    browser.set_viewport(390, 844).await;
    browser.wait_for("the list fitting 390 px", FITS).await;
    let model = browser
        .eval(
            &format!(
                "return getComputedStyle(document.querySelector(\"{} td.model\")).display;",
                row(&id)
            ),
            vec![],
        )
        .await;
    assert_eq!(model, "none");
    browser.screenshot("thousand-390").await;
    // A session's page stacks its plan above its transcript.
    browser
        .click(
            &browser
                .find(&format!("{} a.title", row(&id)))
                .await
                .unwrap(),
        )
        .await;
    browser
        .wait_for(
            "the transcript",
            "return document.getElementById('transcript').textContent.includes('Notes written.');",
        )
        .await;
    browser
        .wait_for("the session page fitting 390 px", FITS)
        .await;
    let stacked = browser
        .eval(
            "const plan = document.querySelector('.col-plan').getBoundingClientRect();\
             const log = document.querySelector('.col-log').getBoundingClientRect();\
             return plan.bottom <= log.top && log.width > 300;",
            vec![],
        )
        .await;
    assert_eq!(stacked, true);
    browser.screenshot("session-390").await;
}

// --- a session's transcript, a wrong token, a server gone and back -------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_transcript_folds_calls_and_reminders_and_the_page_says_what_went_wrong() {
    let env = TestEnv::new();
    let arguments = json!({"path": "src/config/loader.rs", "content": "fn load() {}\n"});
    // A result line with no place to break: it must wrap, not widen the page.
    let long = "x".repeat(600);
    let log = SessionLog::new("claude-sonnet-4-5", &env.workspace())
        .prompt("Tidy the config loader")
        .system(
            SystemKind::Reminder,
            "<system-reminder>Plan: 0 of 2 done. Update it with todo_write.</system-reminder>",
        )
        .plan(&[("Read the loader", "in_progress"), ("Tidy it", "pending")])
        .call("write_file", arguments.clone(), 1_000, 50)
        .result(&format!("Created `src/config/loader.rs`.\n{long}"), false)
        .system(SystemKind::Notification, "Keep the public API as it is.")
        .prompt(
            "Go on.\n<system-reminder>Your todo list still has unfinished items.</system-reminder>",
        )
        .call("bash", json!({"command": "cargo test"}), 2_000, 40)
        .result("error: 2 tests failed", true)
        .stopped(Limit::TurnRequests(500));
    log.write(&env.pod_home());
    let id = log.id().to_string();
    let mut server = Server::start(&env, &json!({"steps": []}));
    let shots = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("dashboard");
    let browser = Browser::start(&shots).await;
    browser.set_viewport(1400, 1000).await;

    // A wrong token is said, not silently asked again.
    browser
        .goto(&format!("{}/#token=not-the-token", server.base))
        .await;
    let said = browser
        .wait_for(
            "the refused token's message",
            "const e = document.getElementById('login-error');\
             return !document.getElementById('login').hidden && !e.hidden && e.textContent;",
        )
        .await;
    assert!(said.as_str().unwrap().contains("refused"), "{said}");
    let input = browser.find("#token-input").await.unwrap();
    browser.type_into(&input, &server.token).await;
    browser
        .click(&browser.find("#login-form button").await.unwrap())
        .await;
    browser
        .wait_for(
            "the list",
            &format!("return document.querySelector(\"{}\") !== null;", row(&id)),
        )
        .await;
    assert_eq!(
        browser
            .eval(
                "return document.getElementById('login-error').hidden;",
                vec![]
            )
            .await,
        true
    );
    let detail = browser
        .eval(
            &format!(
                "return document.querySelector(\"{} td.state .detail\").textContent;",
                row(&id)
            ),
            vec![],
        )
        .await;
    assert_eq!(detail, "stopped by 500 requests in one turn");

    // The transcript: reminders apart and folded, calls one line each.
    browser
        .click(
            &browser
                .find(&format!("{} a.title", row(&id)))
                .await
                .unwrap(),
        )
        .await;
    browser
        .wait_for(
            "the transcript",
            "return document.querySelectorAll('#transcript details.call').length === 3;",
        )
        .await;
    let text = browser
        .eval(
            "return document.getElementById('transcript').textContent;",
            vec![],
        )
        .await;
    assert!(
        !text.as_str().unwrap().contains("system-reminder"),
        "{text}"
    );
    let reminders = browser
        .eval(
            "return Array.from(document.querySelectorAll('#transcript .item.reminder'))\
             .map(r => [r.open, r.querySelector('summary').textContent]);",
            vec![],
        )
        .await;
    assert_eq!(
        reminders,
        json!([
            [
                false,
                "reminderPlan: 0 of 2 done. Update it with todo_write."
            ],
            [false, "reminderYour todo list still has unfinished items."]
        ])
    );
    let said = browser
        .eval(
            "return Array.from(document.querySelectorAll('#transcript .item.user, #transcript .item.note'))\
             .map(r => r.textContent);",
            vec![],
        )
        .await;
    assert_eq!(
        said,
        json!([
            "Tidy the config loader",
            "Keep the public API as it is.",
            "Go on."
        ])
    );
    let calls = browser
        .eval(
            "return Array.from(document.querySelectorAll('#transcript details.call'))\
             .map(c => [c.open, c.className, c.querySelector('summary').textContent]);",
            vec![],
        )
        .await;
    // A long result's first line is cut: 60 characters, the last "…".
    let cut: String = format!("Created `src/config/loader.rs`. {long}")
        .chars()
        .take(59)
        .collect();
    assert_eq!(
        calls,
        json!([
            [
                false,
                "item call ok",
                "todo_write0/2 done✓ Todo list updated: 0/2 completed."
            ],
            [
                false,
                "item call ok",
                format!("write_filesrc/config/loader.rs✓ {cut}…")
            ],
            [
                false,
                "item call error",
                "bashcargo test✗ error: 2 tests failed"
            ]
        ])
    );
    // A click opens a call on its arguments, pretty-printed, and result.
    let write = browser
        .find("#transcript details[data-call=call_2] summary")
        .await
        .unwrap();
    browser.click(&write).await;
    let opened = browser
        .wait_for(
            "the write's arguments",
            "const c = document.querySelectorAll('#transcript details.call')[1];\
             return c.open && [c.querySelector('pre.json').textContent, c.querySelector('pre.result').textContent];",
        )
        .await;
    assert_eq!(
        opened[0].as_str().unwrap(),
        serde_json::to_string_pretty(&arguments).unwrap()
    );
    assert!(opened[1].as_str().unwrap().ends_with(&long));
    let stopped = browser
        .eval(
            "return document.getElementById('s-detail').textContent;",
            vec![],
        )
        .await;
    assert_eq!(stopped, "stopped by 500 requests in one turn");
    browser.screenshot("transcript-1400").await;

    // On a phone the page still fits, the open call and its long line too.
    browser.set_viewport(390, 844).await;
    browser
        .wait_for("the session page fitting 390 px", FITS)
        .await;
    browser.screenshot("transcript-390").await;

    // The server goes away: the page says so.
    assert_eq!(
        browser
            .eval(
                "return document.getElementById('conn').dataset.state;",
                vec![]
            )
            .await,
        "connected"
    );
    server.kill();
    let gone = browser
        .wait_for(
            "the server gone",
            "const c = document.getElementById('conn'); return c.dataset.state === 'gone' && c.textContent;",
        )
        .await;
    assert!(gone.as_str().unwrap().contains("server gone"), "{gone}");
    browser.screenshot("server-gone").await;
    // Back at the same address: the page is live again by itself.
    let addr = server.base.trim_start_matches("http://").to_string();
    let _again = Server::start_on(&env, &json!({"steps": []}), &addr);
    browser
        .wait_for(
            "the page live again",
            "return document.getElementById('conn').dataset.state === 'connected';",
        )
        .await;
}
