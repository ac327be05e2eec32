//! Compaction keeps the plan: in the context, in the store, across resume.

use crate::support::{todo_step, wait_for_event, TestPod};
use pod::{Pod, PodConfig, PodError, PodEvent};
use pod_llm::{validate_history, Item, ItemKind, ScriptStep, ScriptedProvider, SystemKind};
use pod_tools::render_todos;
use serde_json::json;
use std::sync::Arc;
use std::time::Duration;

fn kind_of(item: &Item) -> Option<SystemKind> {
    match &item.kind {
        ItemKind::System { kind, .. } => Some(*kind),
        _ => None,
    }
}

fn text_of(item: &Item) -> &str {
    match &item.kind {
        ItemKind::System { text, .. } | ItemKind::User { text } => text,
        _ => "",
    }
}

fn bulky_echo(n: usize) -> ScriptStep {
    ScriptStep::tool_call(
        "echo",
        json!({"text": format!("{n}: {}", "data ".repeat(60))}),
    )
}

/// A pod with a small context window and a scripted compact model.
fn compacting_pod(
    steps: Vec<ScriptStep>,
    summaries: Vec<ScriptStep>,
) -> (TestPod, ScriptedProvider) {
    let test = TestPod::new(steps);
    (test, ScriptedProvider::from_steps(summaries))
}

fn config(test: &TestPod, compactor: &ScriptedProvider) -> PodConfig {
    let mut config = test.config();
    config.compaction.context_window = Some(3_000);
    config.compaction.threshold = 0.8;
    config.compaction.tail_tokens = 400;
    config.compact_provider = Some(Arc::new(compactor.clone()));
    config
}

#[tokio::test]
async fn a_long_session_compacts_repeatedly_and_keeps_the_plan() {
    let plan = [
        ("read", "Read the input", "completed"),
        ("work", "Process every record", "in_progress"),
        ("report", "Write the report", "pending"),
    ];
    let mut steps = vec![todo_step(&plan)];
    steps.extend((0..60).map(bulky_echo));
    steps.push(ScriptStep::text("Processed for now."));
    steps.push(ScriptStep::text("Still here."));
    let summaries = (1..=10)
        .map(|n| ScriptStep::text(format!("Summary number {n}: records are being processed.")))
        .collect();
    let (test, compactor) = compacting_pod(steps, summaries);
    let mut config = config(&test, &compactor);
    // The events are read after the turn: room for all of them.
    config.event_capacity = 4_096;
    let pod = Pod::spawn(config).await.expect("spawn");
    let mut events = pod.subscribe();
    pod.prompt("Process the records").await.expect("turn");

    let compact_requests = compactor.requests();
    assert!(
        compact_requests.len() >= 3,
        "only {} compactions",
        compact_requests.len()
    );
    let expected_todos = pod.get_todos().await.expect("todos");
    assert_eq!(expected_todos.len(), 3);
    for request in &compact_requests {
        // The compact worker has no tools and was handed the snapshot.
        assert!(request.tools.is_empty());
        let input = text_of(&request.history[0]);
        assert!(input.contains("<todo-snapshot>"));
        assert!(input.contains(&render_todos(&expected_todos)));
    }
    // After each compaction the next request starts with the summary and
    // carries the unfinished plan after the kept tail.
    let requests = test.model.requests();
    let mut seen = 0;
    for request in &requests {
        let first = &request.history[0];
        if kind_of(first) != Some(SystemKind::Summary) {
            continue;
        }
        seen += 1;
        let carry = request
            .history
            .iter()
            .find(|i| kind_of(i) == Some(SystemKind::CarryOver))
            .expect("carry-over item in the context");
        assert!(text_of(carry).contains(&render_todos(&expected_todos)));
        validate_history(&request.history).expect("valid context");
    }
    assert!(seen >= 3);
    let mut compacted = 0;
    loop {
        let event = match events.try_recv() {
            Ok(event) => event,
            Err(tokio::sync::broadcast::error::TryRecvError::Empty) => break,
            Err(other) => panic!("events lost: {other:?}"),
        };
        if let PodEvent::Compacted {
            tokens_before,
            tokens_after,
            summary_chars,
        } = event
        {
            assert!(tokens_after < tokens_before);
            assert!(summary_chars > 0);
            compacted += 1;
        }
    }
    assert_eq!(compacted, compact_requests.len());

    // The full history keeps every item for audit.
    let full = pod.get_history().await.expect("history");
    assert!(
        full.iter()
            .filter(|i| kind_of(i) == Some(SystemKind::Summary))
            .count()
            >= 3
    );
    assert_eq!(
        full.iter().filter(|i| !i.tool_calls().is_empty()).count(),
        61
    );

    // Resume restores the same active context and todos.
    let last_live = requests.last().expect("requests").history.clone();
    let id = pod.session_id();
    pod.shutdown().await.expect("shutdown");
    let resumed = test.resume(id).await;
    assert_eq!(resumed.get_todos().await.expect("todos"), expected_todos);
    resumed.prompt("Go on").await.expect("turn");
    let after_resume = test
        .model
        .requests()
        .last()
        .expect("request")
        .history
        .clone();
    assert_eq!(&after_resume[..last_live.len()], &last_live[..]);
    resumed.shutdown().await.expect("shutdown");
}

#[tokio::test]
async fn three_manual_compactions_in_a_row_keep_the_list() {
    let plan = [
        ("one", "First", "completed"),
        ("two", "Second", "in_progress"),
    ];
    let mut steps = vec![todo_step(&plan)];
    steps.extend((0..6).map(bulky_echo));
    steps.push(ScriptStep::text("Paused here."));
    let summaries = (1..=3)
        .map(|n| ScriptStep::text(format!("Summary {n}")))
        .collect();
    let (test, compactor) = compacting_pod(steps, summaries);
    let mut config = config(&test, &compactor);
    config.compaction.context_window = None; // manual only
    config.compaction.tail_tokens = 50;
    let pod = Pod::spawn(config.clone()).await.expect("spawn");
    pod.prompt("Start").await.expect("turn");
    let todos = pod.get_todos().await.expect("todos");
    for n in 1..=3 {
        let report = pod
            .compact()
            .await
            .unwrap_or_else(|e| panic!("compaction {n}: {e}"));
        assert!(report.summary_chars > 0);
        assert_eq!(pod.get_todos().await.expect("todos"), todos);
    }
    // Each later compaction summarised the previous summary and still got the snapshot.
    let inputs: Vec<String> = compactor
        .requests()
        .iter()
        .map(|r| text_of(&r.history[0]).to_string())
        .collect();
    assert!(inputs[1].contains("Summary 1") && inputs[2].contains("Summary 2"));
    assert!(inputs.iter().all(|i| i.contains(&render_todos(&todos))));
    let id = pod.session_id();
    pod.shutdown().await.expect("shutdown");
    let resumed = Pod::resume(id, config).await.expect("resume");
    assert_eq!(resumed.get_todos().await.expect("todos"), todos);
    resumed.shutdown().await.expect("shutdown");
}

#[tokio::test]
async fn a_failing_compact_request_loses_nothing_and_stops_after_three() {
    let plan = [("a", "Only item", "in_progress")];
    let mut steps = vec![todo_step(&plan)];
    steps.extend((0..40).map(bulky_echo));
    steps.push(ScriptStep::text("Done for now."));
    let failures = (0..10)
        .map(|_| ScriptStep::http_error(500, "compact model down"))
        .collect();
    let (test, compactor) = compacting_pod(steps, failures);
    let pod = Pod::spawn(config(&test, &compactor)).await.expect("spawn");
    let mut events = pod.subscribe();
    let outcome = pod
        .prompt("Work")
        .await
        .expect("the turn goes on uncompacted");
    assert_eq!(outcome.requests, 42);
    // Three attempts, then automatic compaction pauses until the next prompt.
    assert_eq!(compactor.requests().len(), 3);
    let mut reasons = Vec::new();
    while let Ok(event) = events.try_recv() {
        if let PodEvent::CompactionFailed { reason } = event {
            reasons.push(reason);
        }
    }
    assert_eq!(reasons.len(), 3);
    assert!(reasons[2].contains("compact model down"), "{}", reasons[2]);
    let history = pod.get_history().await.expect("history");
    assert!(!history
        .iter()
        .any(|i| kind_of(i) == Some(SystemKind::Summary)));
    validate_history(&history).expect("valid");
    // A manual compaction that fails reports it and changes nothing.
    let err = pod.compact().await.expect_err("fails");
    assert!(matches!(err, PodError::Compaction(_)), "{err}");
    assert_eq!(pod.get_history().await.expect("history"), history);
    pod.shutdown().await.expect("shutdown");
}

#[tokio::test]
async fn a_crash_before_the_boundary_is_durable_resumes_the_old_context() {
    let plan = [("a", "Only item", "in_progress")];
    let mut steps = vec![todo_step(&plan)];
    steps.extend((0..6).map(bulky_echo));
    steps.push(ScriptStep::text("Paused."));
    let stuck = vec![ScriptStep::text("never").delayed(Duration::from_secs(3600))];
    let (test, compactor) = compacting_pod(steps, stuck);
    let mut config = config(&test, &compactor);
    config.compaction.context_window = None;
    config.compaction.tail_tokens = 50;
    let pod = Pod::spawn(config.clone()).await.expect("spawn");
    pod.prompt("Start").await.expect("turn");
    let before = pod.get_history().await.expect("history");
    let mut events = pod.subscribe();
    let compacting = {
        let pod = pod.clone();
        tokio::spawn(async move { pod.compact().await })
    };
    wait_for_event(&mut events, |e| matches!(e, PodEvent::CompactionStarted)).await;
    // "Kill" the process now: take the log as it is on disk and resume it
    // elsewhere.
    let copy = TestPod::new(vec![]);
    let log = copy.home().log_path(pod.session_id());
    std::fs::create_dir_all(log.parent().expect("dir")).expect("mkdir");
    std::fs::copy(pod.log_path().expect("a file-store session"), &log).expect("copy log");
    let resumed = copy.resume(pod.session_id()).await;
    assert_eq!(resumed.get_history().await.expect("history"), before);
    assert_eq!(
        resumed.get_todos().await.expect("todos"),
        pod.get_todos().await.expect("todos")
    );
    resumed.shutdown().await.expect("shutdown");
    pod.cancel().await.expect("cancel");
    let result = compacting.await.expect("join");
    assert!(matches!(
        result,
        Err(PodError::Compaction(
            pod::compact::CompactionError::Cancelled
        ))
    ));
    // A cancelled compaction is not a failure of the compact model.
    while let Ok(event) = events.try_recv() {
        assert!(
            !matches!(event, PodEvent::CompactionFailed { .. }),
            "{event:?}"
        );
    }
    assert_eq!(pod.get_history().await.expect("history"), before);
    pod.shutdown().await.expect("shutdown");
}

#[tokio::test]
async fn compactions_inside_a_turn_do_not_reset_its_request_budget() {
    let mut steps = vec![todo_step(&[("a", "Only item", "in_progress")])];
    steps.extend((0..60).map(bulky_echo));
    let summaries = (1..=20)
        .map(|n| ScriptStep::text(format!("Summary {n}")))
        .collect();
    let (test, compactor) = compacting_pod(steps, summaries);
    let mut config = config(&test, &compactor);
    config.budget.requests_per_turn = 30;
    let pod = Pod::spawn(config).await.expect("spawn");
    let outcome = pod.prompt("Work").await.expect("turn");
    assert!(!compactor.requests().is_empty(), "the turn must compact");
    assert_eq!(
        outcome.reason,
        pod_worker::TurnEndReason::Limit(pod_worker::Limit::TurnRequests(30))
    );
    assert_eq!(outcome.requests, 30);
    assert_eq!(test.model.requests().len(), 30);
    pod.shutdown().await.expect("shutdown");
}

#[tokio::test]
async fn the_system_prompts_instructions_survive_three_compactions_and_a_resume_untouched() {
    let mut steps: Vec<ScriptStep> = (0..6).map(bulky_echo).collect();
    steps.push(ScriptStep::text("Paused here."));
    steps.push(ScriptStep::text("Resumed."));
    let summaries = (1..=3)
        .map(|n| ScriptStep::text(format!("Summary {n}")))
        .collect();
    let (test, compactor) = compacting_pod(steps, summaries);
    let mut config = config(&test, &compactor);
    config.compaction.context_window = None; // manual only
    config.compaction.tail_tokens = 50;
    config.system_prompt = format!(
        "{}\n\n# Project instructions\n\nINSTRUCTIONS-MARKER: run make check.",
        pod::DEFAULT_SYSTEM_PROMPT
    );
    let pod = Pod::spawn(config.clone()).await.expect("spawn");
    pod.prompt("Start").await.expect("turn");
    for n in 1..=3 {
        pod.compact()
            .await
            .unwrap_or_else(|e| panic!("compaction {n}: {e}"));
    }
    let id = pod.session_id();
    pod.shutdown().await.expect("shutdown");
    let resumed = Pod::resume(id, config.clone()).await.expect("resume");
    resumed.prompt("Go on").await.expect("turn");
    resumed.shutdown().await.expect("shutdown");
    let requests = test.model.requests();
    assert!(requests.len() >= 8, "{}", requests.len());
    // Every request, after each compaction and the resume, sends the prompt
    // whole, and it was never history a summary could rewrite.
    for request in &requests {
        assert_eq!(&*request.system_prompt, config.system_prompt.as_str());
        assert!(request
            .history
            .iter()
            .all(|item| !text_of(item).contains("INSTRUCTIONS-MARKER")));
    }
    assert!(compactor
        .requests()
        .iter()
        .all(|r| !format!("{:?}", r.history).contains("INSTRUCTIONS-MARKER")));
}

#[tokio::test]
async fn a_compaction_summary_is_charged_to_the_session_and_read_back_from_the_log() {
    let mut steps: Vec<ScriptStep> = (0..6).map(bulky_echo).collect();
    steps.push(ScriptStep::text("Paused here."));
    let mut summary = ScriptStep::text("Summary");
    summary.usage = Some(pod_llm::Usage {
        prompt_tokens: 1_000_000,
        ..Default::default()
    });
    let (test, compactor) = compacting_pod(steps, vec![summary]);
    let mut config = config(&test, &compactor);
    config.compaction.context_window = None; // manual only
    config.compaction.tail_tokens = 50;
    let prices = pod_llm::Prices {
        input: 1.0,
        ..Default::default()
    };
    let budget = pod::CostBudget::new(None, None, prices);
    config.cost_budget = Some(budget.clone());
    let pod = Pod::spawn(config).await.expect("spawn");
    pod.prompt("Start").await.expect("turn");
    let before = budget.session.spent();
    pod.compact().await.expect("compaction");
    assert_eq!(
        budget.session.spent().micros() - before.micros(),
        pod_llm::Cost::from_amount(1.0).micros()
    );
    let id = pod.session_id();
    pod.shutdown().await.expect("shutdown");
    // What a restart reads back is what the live meter counted.
    let store = pod::FileStore::new(test.home());
    let records = pod::SessionStore::read(&store, id)
        .await
        .expect("read")
        .records;
    assert!(records.iter().any(|record| matches!(
        record,
        pod::log::LogRecord::Compaction(c) if c.usage.is_some()
    )));
    assert_eq!(
        pod::ledger::records_cost(&records, &prices),
        budget.session.spent()
    );
}
