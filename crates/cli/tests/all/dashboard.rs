//! The web dashboard in a real browser (headless Chromium over WebDriver):
//! the sessions table, a session's checklist ticking through its plan
//! live, an approval allowed with a click, and a notification the model
//! then receives. Screenshots of a failing step go to
//! `target/tmp/dashboard/`.

use crate::http::Server;
use crate::support::*;
use pod_testkit::browser::Browser;
use serde_json::{json, Value};

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
            "return document.getElementById('s-meta').textContent.startsWith('awaiting_approval');",
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
            "return document.getElementById('s-meta').textContent.startsWith('done');",
        )
        .await;
    browser.screenshot("finished").await;
}
