use super::*;
use pod_llm::ToolCall;

fn answer(text: &str, calls: &[(&str, &str)]) -> Item {
    Item::new(ItemKind::Assistant {
        text: text.into(),
        reasoning: None,
        tool_calls: calls
            .iter()
            .enumerate()
            .map(|(i, (name, arguments))| ToolCall {
                id: format!("c{i}-{}", Uuid::new_v4()),
                name: (*name).into(),
                arguments: (*arguments).into(),
            })
            .collect(),
        usage: None,
    })
}

async fn start(guard: &mut LoopGuard, history: &[Item]) {
    let cancel = tokio_util::sync::CancellationToken::new();
    guard
        .on_run_start(&RunStart {
            history,
            prompt: None,
            cancel: &cancel,
        })
        .await;
}

/// Feeds `answers` one at a time as the worker would; returns the answer
/// number (1-based) a reminder came after and the one the stop came after.
async fn feed(guard: &mut LoopGuard, answers: Vec<Item>) -> (Option<usize>, Option<usize>) {
    let mut history = vec![Item::user("go")];
    start(guard, &history).await;
    let (mut reminded, mut stopped) = (None, None);
    for (n, item) in answers.into_iter().enumerate() {
        history.push(item);
        let appended = guard.pending_history_appends(&history).await;
        if !appended.is_empty() && reminded.is_none() {
            reminded = Some(n + 1);
        }
        history.extend(appended);
        let mut request = Arc::new(history.clone());
        if let PreRequestAction::Stop(limit) = guard.pre_llm_request(&mut request).await {
            assert!(matches!(limit, Limit::Loop { .. }), "{limit:?}");
            stopped = Some(n + 1);
            break;
        }
    }
    (reminded, stopped)
}

#[tokio::test]
async fn the_same_successful_call_is_reminded_then_stopped() {
    let mut guard = LoopGuard::new(LoopGuardConfig::default());
    let answers = (0..80)
        .map(|_| answer("", &[("bash", r#"{"command": "echo pending"}"#)]))
        .collect();
    assert_eq!(feed(&mut guard, answers).await, (Some(5), Some(7)));
}

#[tokio::test]
async fn the_stop_names_the_call() {
    let mut guard = LoopGuard::new(LoopGuardConfig::default());
    let mut history = vec![Item::user("go")];
    start(&mut guard, &history).await;
    let mut last = None;
    for _ in 0..7 {
        history.push(answer("", &[("bash", r#"{"command":"echo pending"}"#)]));
        let appended = guard.pending_history_appends(&history).await;
        history.extend(appended);
        last = Some(guard.pre_llm_request(&mut Arc::new(history.clone())).await);
    }
    let limit = match last {
        Some(PreRequestAction::Stop(limit)) => limit,
        other => panic!("{other:?}"),
    };
    assert_eq!(
        limit.stop_line(),
        r#"stopped: loop (bash "echo pending" ×7)"#
    );
}

#[tokio::test]
async fn a_short_cycle_is_a_loop() {
    let mut guard = LoopGuard::new(LoopGuardConfig::default());
    let answers = (0..40)
        .map(|i| match i % 2 {
            0 => answer("", &[("read_file", r#"{"path":"a"}"#)]),
            _ => answer("", &[("bash", r#"{"command":"make"}"#)]),
        })
        .collect();
    // Five cycles of two calls: the tenth answer.
    assert_eq!(feed(&mut guard, answers).await, (Some(10), Some(14)));
}

#[tokio::test]
async fn the_same_text_in_a_row_is_a_loop() {
    let mut guard = LoopGuard::new(LoopGuardConfig::default());
    let answers = (0..20)
        .map(|i| {
            answer(
                "Waiting for the build.",
                &[("bash", &format!("{{\"n\":{i}}}"))],
            )
        })
        .collect();
    assert_eq!(feed(&mut guard, answers).await, (Some(5), Some(7)));
}

#[tokio::test]
async fn a_plan_worked_item_by_item_is_no_loop() {
    let mut guard = LoopGuard::new(LoopGuardConfig::default());
    let mut answers = Vec::new();
    for i in 0..90 {
        answers.push(answer("", &[("list_dir", r#"{"path":"."}"#)]));
        answers.push(answer("", &[("list_dir", r#"{"path":"."}"#)]));
        answers.push(answer("", &[("todo_write", &format!("{{\"done\":{i}}}"))]));
        answers.push(answer("Pausing.", &[]));
    }
    assert_eq!(feed(&mut guard, answers).await, (None, None));
}

#[tokio::test]
async fn breaking_the_pattern_after_the_reminder_starts_over() {
    let mut guard = LoopGuard::new(LoopGuardConfig::default());
    let mut answers: Vec<Item> = (0..6)
        .map(|_| answer("", &[("bash", r#"{"command":"echo pending"}"#)]))
        .collect();
    answers.push(answer("", &[("read_file", r#"{"path":"log"}"#)]));
    answers.extend((0..4).map(|_| answer("", &[("bash", r#"{"command":"echo pending"}"#)])));
    assert_eq!(feed(&mut guard, answers).await, (Some(5), None));
}

#[tokio::test]
async fn exempt_tools_and_zero_turn_it_off() {
    let polling = || {
        (0..30)
            .map(|_| answer("", &[("poll", r#"{"job":"1"}"#)]))
            .collect::<Vec<_>>()
    };
    let mut guard = LoopGuard::new(LoopGuardConfig {
        exempt: vec!["poll".into()],
        ..LoopGuardConfig::default()
    });
    assert_eq!(feed(&mut guard, polling()).await, (None, None));
    let mut guard = LoopGuard::new(LoopGuardConfig {
        repeats: 0,
        exempt: Vec::new(),
    });
    assert_eq!(feed(&mut guard, polling()).await, (None, None));
}

#[tokio::test]
async fn only_the_run_counts() {
    let mut guard = LoopGuard::new(LoopGuardConfig::default());
    let mut history: Vec<Item> = (0..6)
        .map(|_| answer("", &[("bash", r#"{"command":"echo pending"}"#)]))
        .collect();
    start(&mut guard, &history).await;
    history.push(answer("", &[("bash", r#"{"command":"echo pending"}"#)]));
    assert!(guard.pending_history_appends(&history).await.is_empty());
}
