//! The Pod as an actor: queueing, cancel, notify, events, shutdown.

use crate::support::{todo_step, wait_for_event, TestPod};
use pod::{PodError, PodEvent};
use pod_llm::{validate_history, ItemKind, ScriptStep, SystemKind};
use pod_worker::TurnEndReason;
use serde_json::json;
use std::time::Duration;
use tokio::sync::broadcast::error::RecvError;

fn user_texts(items: &[pod_llm::Item]) -> Vec<String> {
    items
        .iter()
        .filter_map(|i| match &i.kind {
            ItemKind::User { text } => Some(text.clone()),
            _ => None,
        })
        .collect()
}

#[tokio::test]
async fn queued_prompts_run_in_order() {
    let test = TestPod::new(vec![
        ScriptStep::text("first"),
        ScriptStep::text("second"),
        ScriptStep::text("third"),
    ]);
    let pod = test.spawn().await;
    let (a, b, c) = tokio::join!(pod.prompt("one"), pod.prompt("two"), pod.prompt("three"));
    for outcome in [a, b, c] {
        assert_eq!(outcome.expect("turn").reason, TurnEndReason::EndTurn);
    }
    let history = pod.get_history().await.expect("history");
    assert_eq!(user_texts(&history), ["one", "two", "three"]);
    let requests = test.model.requests();
    for (request, prompt) in requests.iter().zip(["one", "two", "three"]) {
        assert_eq!(
            user_texts(&request.history).last().map(String::as_str),
            Some(prompt)
        );
    }
    pod.shutdown().await.expect("shutdown");
}

#[tokio::test]
async fn cancel_during_a_tool_call_leaves_a_valid_resumable_history() {
    let test =
        TestPod::new(vec![ScriptStep::tool_call("wait_for_cancel", json!({}))
            .and_call("echo", json!({"text": "x"}))]);
    let pod = test.spawn().await;
    let mut events = pod.subscribe();
    let running = {
        let pod = pod.clone();
        tokio::spawn(async move { pod.prompt("wait").await })
    };
    wait_for_event(&mut events, |e| {
        matches!(e, PodEvent::ToolCallStarted { .. })
    })
    .await;
    pod.cancel().await.expect("cancel");
    let outcome = running.await.expect("join").expect("turn");
    assert_eq!(outcome.reason, TurnEndReason::Cancelled);
    let history = pod.get_history().await.expect("history");
    validate_history(&history).expect("valid after cancel");
    let id = pod.session_id();
    pod.shutdown().await.expect("shutdown");

    let resumed = test.resume(id).await;
    let again = resumed.get_history().await.expect("history");
    assert_eq!(
        again, history,
        "resume adds nothing: every call had its result"
    );
    resumed.shutdown().await.expect("shutdown");
}

#[tokio::test]
async fn notify_while_idle_is_delivered_on_the_next_turn() {
    let test = TestPod::new(vec![ScriptStep::text("noted")]);
    let pod = test.spawn().await;
    let mut events = pod.subscribe();
    pod.notify("The build finished.").await.expect("notify");
    assert!(
        pod.get_history().await.expect("history").is_empty(),
        "kept until a turn"
    );
    pod.prompt("What happened?").await.expect("turn");
    let request = &test.model.requests()[0];
    assert!(request.history.iter().any(|i| matches!(
        &i.kind,
        ItemKind::System { kind: SystemKind::Notification, text } if text == "The build finished."
    )));
    wait_for_event(
        &mut events,
        |e| matches!(e, PodEvent::NotificationDelivered { text } if text == "The build finished."),
    )
    .await;
    pod.shutdown().await.expect("shutdown");
}

#[tokio::test]
async fn a_lagging_subscriber_does_not_stall_the_pod() {
    let mut steps: Vec<ScriptStep> = (0..20)
        .map(|_| ScriptStep::tool_call("echo", json!({"text": "a fairly long line of text"})))
        .collect();
    steps.push(ScriptStep::text("done"));
    let mut test = TestPod::new(steps);
    test.event_capacity = 4;
    let pod = test.spawn().await;
    let mut never_read = pod.subscribe();
    let outcome = pod.prompt("go").await.expect("turn");
    assert_eq!(outcome.requests, 21);
    assert!(matches!(never_read.recv().await, Err(RecvError::Lagged(_))));
    pod.shutdown().await.expect("shutdown");
}

#[tokio::test]
async fn todo_events_follow_accepted_writes_only() {
    let test = TestPod::new(vec![
        todo_step(&[("a", "One", "in_progress")]),
        todo_step(&[("a", "One", "in_progress"), ("b", "Two", "in_progress")]),
        todo_step(&[("a", "One", "completed")]),
        ScriptStep::text("done"),
    ]);
    let pod = test.spawn().await;
    let mut events = pod.subscribe();
    pod.prompt("plan").await.expect("turn");
    let mut lists = Vec::new();
    while let Ok(event) = events.try_recv() {
        if let PodEvent::TodosChanged { todos } = event {
            lists.push(todos.into_iter().map(|t| t.id).collect::<Vec<_>>());
        }
    }
    assert_eq!(lists, vec![vec!["a".to_string()], vec!["a".to_string()]]);
    pod.shutdown().await.expect("shutdown");
}

#[tokio::test]
async fn a_provider_error_fails_the_turn_and_the_pod_stays_usable() {
    let test = TestPod::new(vec![
        ScriptStep::http_error(400, "bad request"),
        ScriptStep::text("fine now"),
    ]);
    let pod = test.spawn().await;
    let err = pod.prompt("first").await.expect_err("fails");
    assert!(matches!(err, PodError::Turn(_)), "{err}");
    assert!(err.to_string().contains("bad request"));
    pod.prompt("second").await.expect("works");
    let history = pod.get_history().await.expect("history");
    validate_history(&history).expect("valid");
    assert_eq!(user_texts(&history), ["first", "second"]);
    pod.shutdown().await.expect("shutdown");
}

#[tokio::test]
async fn dropping_every_handle_shuts_the_pod_down() {
    let test = TestPod::new(vec![ScriptStep::text("hi")]);
    let pod = test.spawn().await;
    pod.prompt("hello").await.expect("turn");
    let mut events = pod.subscribe();
    let id = pod.session_id();
    drop(pod);
    // The actor ends and drops its sender; the guard only keeps a broken
    // build from hanging the suite.
    let closed = tokio::time::timeout(Duration::from_secs(30), async {
        loop {
            match events.recv().await {
                Err(RecvError::Closed) => return true,
                _ => continue,
            }
        }
    })
    .await;
    assert_eq!(closed, Ok(true));
    let resumed = test.resume(id).await;
    assert_eq!(resumed.get_history().await.expect("history").len(), 2);
    resumed.shutdown().await.expect("shutdown");
}

#[tokio::test]
async fn a_session_cannot_be_opened_twice() {
    let test = TestPod::new(vec![ScriptStep::text("hi")]);
    let pod = test.spawn().await;
    let err = pod::Pod::resume(pod.session_id(), test.config())
        .await
        .expect_err("second open");
    assert!(matches!(err, PodError::SessionBusy { .. }), "{err}");
    assert!(pod::log::is_locked(
        pod.log_path().expect("a file-store session")
    ));
    pod.shutdown().await.expect("shutdown");
    assert!(!pod::log::is_locked(
        pod.log_path().expect("a file-store session")
    ));
    test.resume(pod.session_id())
        .await
        .shutdown()
        .await
        .expect("reopen");
}

fn continuations(history: &[pod_llm::Item]) -> usize {
    history
        .iter()
        .filter(|i| matches!(&i.kind, ItemKind::System { text, .. } if text.contains("You ended your turn")))
        .count()
}

#[tokio::test]
async fn until_done_continues_until_the_list_is_done() {
    let test = TestPod::new(vec![
        todo_step(&[("a", "First", "in_progress"), ("b", "Second", "pending")]),
        ScriptStep::text("Pausing."),
        todo_step(&[("a", "First", "completed"), ("b", "Second", "in_progress")]),
        ScriptStep::text("Pausing again."),
        todo_step(&[("a", "First", "completed"), ("b", "Second", "completed")]),
        ScriptStep::text("All done."),
    ]);
    let mut config = test.config();
    config.until_done = true;
    let pod = pod::Pod::spawn(config).await.expect("spawn");
    let outcome = pod.prompt("Do both").await.expect("turn");
    assert_eq!(outcome.reason, TurnEndReason::EndTurn);
    assert_eq!(outcome.requests, 6);
    let history = pod.get_history().await.expect("history");
    assert_eq!(continuations(&history), 2);
    validate_history(&history).expect("valid");
    pod.shutdown().await.expect("shutdown");
}

#[tokio::test]
async fn until_done_stops_at_max_continuations_and_when_the_model_stalls() {
    let steps = vec![
        todo_step(&[("a", "Endless", "in_progress")]),
        ScriptStep::text("Pausing."),
        ScriptStep::tool_call("echo", json!({"text": "work"})),
        ScriptStep::text("Pausing again."),
        ScriptStep::tool_call("echo", json!({"text": "work"})),
        ScriptStep::text("And again."),
    ];
    let test = TestPod::new(steps.clone());
    let mut config = test.config();
    config.until_done = true;
    config.budget.continuations = Some(2);
    let pod = pod::Pod::spawn(config).await.expect("spawn");
    let outcome = pod.prompt("Work forever").await.expect("turn");
    assert_eq!(outcome.requests, 6, "two continuations, then stop");
    assert_eq!(
        outcome.reason,
        TurnEndReason::Limit(pod_worker::Limit::Continuations(2))
    );
    assert_eq!(continuations(&pod.get_history().await.expect("history")), 2);
    pod.shutdown().await.expect("shutdown");

    // A continuation answered without tools made no progress: stop there.
    let test = TestPod::new(vec![
        todo_step(&[("a", "Blocked item", "in_progress")]),
        ScriptStep::text("Pausing."),
        ScriptStep::text("I am blocked: the credentials are missing."),
        ScriptStep::text("never reached"),
    ]);
    let mut config = test.config();
    config.until_done = true;
    let pod = pod::Pod::spawn(config).await.expect("spawn");
    let outcome = pod.prompt("Work").await.expect("turn");
    assert_eq!(outcome.requests, 3);
    assert_eq!(outcome.reason, TurnEndReason::Stalled, "a typed end");
    pod.shutdown().await.expect("shutdown");
}

/// Panics on one chosen request, otherwise plays the scripted model.
struct PanicsOnce {
    model: pod_llm::ScriptedProvider,
    panic_at: usize,
    seen: std::sync::atomic::AtomicUsize,
}

#[async_trait::async_trait]
impl pod_llm::Provider for PanicsOnce {
    async fn stream(
        &self,
        request: &pod_llm::ProviderRequest,
    ) -> Result<pod_llm::EventStream, pod_llm::ProviderError> {
        let n = self.seen.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        assert_ne!(n, self.panic_at, "provider bug on request {n}");
        self.model.stream(request).await
    }

    fn model_name(&self) -> String {
        "panics-once".into()
    }
}

#[tokio::test]
async fn a_crashed_turn_is_rebuilt_from_the_log_and_the_pod_goes_on() {
    let test = TestPod::new(vec![
        todo_step(&[("a", "Survive a crash", "in_progress")]),
        // Request 1 panics before this step is played.
        ScriptStep::text("Back after the crash."),
    ]);
    let mut config = test.config();
    config.provider = std::sync::Arc::new(PanicsOnce {
        model: test.model.clone(),
        panic_at: 1,
        seen: Default::default(),
    });
    let pod = pod::Pod::spawn(config).await.expect("spawn");
    let err = pod
        .prompt("Plan")
        .await
        .expect_err("the turn task panicked");
    assert!(matches!(err, PodError::Crashed(_)), "{err}");
    // Memory was rebuilt from the log: the plan and a valid history remain.
    assert_eq!(pod.get_todos().await.expect("todos").len(), 1);
    let history = pod.get_history().await.expect("history");
    validate_history(&history).expect("valid after the crash");
    let outcome = pod.prompt("Go on").await.expect("the pod goes on");
    assert_eq!(outcome.reason, TurnEndReason::EndTurn);
    pod.shutdown().await.expect("shutdown");
}
