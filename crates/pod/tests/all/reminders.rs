//! Todo reminders: where they appear and the cadence rule.

use crate::support::{todo_step, wait_for_event, TestPod};
use pod::PodEvent;
use pod_llm::{Item, ItemKind, ProviderRequest, ScriptStep, SystemKind};
use pod_tools::render_progress;
use pod_worker::TurnEndReason;
use serde_json::json;
use std::time::Duration;

fn is_reminder(item: &Item) -> bool {
    matches!(
        item.kind,
        ItemKind::System {
            kind: SystemKind::Reminder,
            ..
        }
    )
}

/// Whether a reminder was committed right before this request.
fn reminded(request: &ProviderRequest) -> bool {
    request.history.last().is_some_and(is_reminder)
}

fn echo() -> ScriptStep {
    ScriptStep::tool_call("echo", json!({"text": "step"}))
}

#[tokio::test]
async fn reminder_is_in_history_in_the_next_request_and_in_get_history() {
    let test = TestPod::new(vec![
        todo_step(&[
            ("a", "Read the code", "in_progress"),
            ("b", "Fix the bug", "pending"),
        ]),
        ScriptStep::text("Planned."),
        ScriptStep::text("Working on it."),
    ]);
    let pod = test.spawn().await;
    let mut events = pod.subscribe();
    pod.prompt("Fix the bug").await.expect("turn one");
    pod.prompt("Go on").await.expect("turn two");

    let requests = test.model.requests();
    assert!(
        !requests.iter().take(2).any(reminded),
        "no plan yet, no reminder"
    );
    let request = &requests[2];
    assert!(reminded(request), "first request of turn two is reminded");
    let ItemKind::System { text, .. } = &request.history.last().expect("item").kind else {
        panic!("not a system item")
    };
    let todos = pod.get_todos().await.expect("todos");
    assert!(text.starts_with("<system-reminder>") && text.ends_with("</system-reminder>"));
    assert!(text.contains(&render_progress(&todos)), "{text}");

    let history = pod.get_history().await.expect("history");
    assert_eq!(history.iter().filter(|i| is_reminder(i)).count(), 1);
    let at = history
        .iter()
        .position(is_reminder)
        .expect("reminder in history");
    assert!(matches!(&history[at - 1].kind, ItemKind::User { text } if text == "Go on"));
    assert!(matches!(
        wait_for_event(&mut events, |e| matches!(e, PodEvent::ReminderInjected { .. })).await,
        PodEvent::ReminderInjected { text: t } if t == *text
    ));
    pod.shutdown().await.expect("shutdown");
}

#[tokio::test]
async fn cadence_is_turn_start_then_every_n_requests_without_todo_write() {
    let mut steps = vec![
        todo_step(&[("a", "Long job", "in_progress")]),
        ScriptStep::text("Planned."),
    ];
    // Turn two: twelve tool requests, a todo_write as the 13th response,
    // seven more, then the answer.
    steps.extend((0..12).map(|_| echo()));
    steps.push(todo_step(&[
        ("a", "Long job", "in_progress"),
        ("b", "More", "pending"),
    ]));
    steps.extend((0..7).map(|_| echo()));
    steps.push(ScriptStep::text("Done for now."));
    let mut test = TestPod::new(steps);
    test.remind_every = 5;
    let pod = test.spawn().await;
    pod.prompt("Plan").await.expect("turn one");
    pod.prompt("Work").await.expect("turn two");

    let requests = test.model.requests();
    let turn_two: Vec<usize> = requests[2..]
        .iter()
        .enumerate()
        .filter(|(_, r)| reminded(r))
        .map(|(i, _)| i)
        .collect();
    // Request 0 starts the turn; 5 and 10 follow five requests without
    // todo_write; request 12's response calls todo_write, so the count
    // restarts and the next reminder is five requests later, at 18.
    assert_eq!(turn_two, vec![0, 5, 10, 18]);
    // Never two reminders without a model response between them.
    let history = pod.get_history().await.expect("history");
    for pair in history.windows(2) {
        assert!(!(is_reminder(&pair[0]) && is_reminder(&pair[1])));
    }
    pod.shutdown().await.expect("shutdown");
}

#[tokio::test]
async fn no_reminder_when_the_list_is_empty_or_done() {
    let mut steps = vec![
        todo_step(&[("a", "Only step", "completed")]),
        ScriptStep::text("Done."),
    ];
    steps.extend((0..8).map(|_| echo()));
    steps.push(ScriptStep::text("Still done."));
    steps.push(ScriptStep::tool_call("todo_write", json!({"todos": []})));
    steps.push(ScriptStep::text("Cleared."));
    steps.push(ScriptStep::text("Nothing planned."));
    let mut test = TestPod::new(steps);
    test.remind_every = 2;
    let pod = test.spawn().await;
    pod.prompt("one").await.expect("turn");
    pod.prompt("two").await.expect("turn");
    pod.prompt("three").await.expect("turn");
    pod.prompt("four").await.expect("turn");
    let history = pod.get_history().await.expect("history");
    assert!(!history.iter().any(is_reminder));
    pod.shutdown().await.expect("shutdown");
}

#[tokio::test]
async fn an_unanswered_reminder_is_not_repeated_by_the_next_turn() {
    let test = TestPod::new(vec![
        todo_step(&[("a", "Slow step", "in_progress")]),
        ScriptStep::text("Planned."),
        // This response never arrives: the turn is cancelled while it waits.
        ScriptStep::text("late").delayed(Duration::from_secs(3600)),
        ScriptStep::text("Continuing."),
    ]);
    let pod = test.spawn().await;
    pod.prompt("Plan").await.expect("turn one");
    let mut events = pod.subscribe();
    let running = {
        let pod = pod.clone();
        tokio::spawn(async move { pod.continue_turn().await })
    };
    wait_for_event(&mut events, |e| {
        matches!(e, PodEvent::ReminderInjected { .. })
    })
    .await;
    pod.cancel().await.expect("cancel");
    let outcome = running.await.expect("join").expect("turn");
    assert_eq!(outcome.reason, TurnEndReason::Cancelled);

    pod.continue_turn().await.expect("turn three");
    let history = pod.get_history().await.expect("history");
    assert_eq!(history.iter().filter(|i| is_reminder(i)).count(), 1);
    pod.shutdown().await.expect("shutdown");
}
