//! Embedders' interceptors in a Pod's stack, and the session budget guard.

use crate::support::*;
use pod::{
    Interceptor, Limit, Pod, PreToolAction, SessionBudget, ToolCallInfo, TurnEndAction,
    TurnEndReason,
};
use pod_llm::{validate_history, Item, ScriptStep};
use serde_json::json;
use std::sync::Arc;

/// Skips every `echo` call, as an embedder's policy might.
struct NoEcho;

#[async_trait::async_trait]
impl Interceptor for NoEcho {
    async fn pre_tool_call(&mut self, call: &mut ToolCallInfo) -> PreToolAction {
        match call.name.as_str() {
            "echo" => PreToolAction::Skip("Not run: echo is not allowed here.".into()),
            _ => PreToolAction::Continue,
        }
    }
}

/// Ends every turn at once, even in until-done mode (it pauses).
struct StopAtTurnEnd;

#[async_trait::async_trait]
impl Interceptor for StopAtTurnEnd {
    async fn on_turn_end(&mut self, _turn: &[Item]) -> TurnEndAction {
        TurnEndAction::Pause
    }
}

#[tokio::test]
async fn an_embedders_interceptor_skips_calls_before_the_pods_own() {
    let test = TestPod::new(vec![
        ScriptStep::tool_call("echo", json!({"text": "hi"})),
        ScriptStep::text("Skipped, fine."),
    ]);
    let mut config = test.config();
    config.interceptors.push(Arc::new(|| Box::new(NoEcho)));
    let pod = Pod::spawn(config).await.expect("spawn");
    let outcome = pod.prompt("Echo").await.expect("turn");
    assert_eq!(outcome.reason, TurnEndReason::EndTurn);
    let history = pod.get_history().await.expect("history");
    let call = &calls_of(&history)[0].0;
    assert_eq!(
        result_of(&history, call),
        ("Not run: echo is not allowed here.".into(), true)
    );
    validate_history(&history).expect("valid");
    pod.shutdown().await.expect("shutdown");
}

#[tokio::test]
async fn an_embedders_interceptor_can_end_a_turn_that_until_done_would_continue() {
    let test = TestPod::new(vec![
        todo_step(&[("a", "Endless", "in_progress")]),
        ScriptStep::text("Pausing."),
        ScriptStep::text("never"),
    ]);
    let mut config = test.config();
    config.until_done = true;
    config
        .interceptors
        .push(Arc::new(|| Box::new(StopAtTurnEnd)));
    let pod = Pod::spawn(config).await.expect("spawn");
    let outcome = pod.prompt("Work").await.expect("turn");
    assert!(matches!(outcome.reason, TurnEndReason::Paused(_)));
    assert_eq!(outcome.requests, 2);
    pod.shutdown().await.expect("shutdown");
}

#[tokio::test]
async fn the_session_budget_spans_resumes_and_ends_the_run_cleanly() {
    let echo = || ScriptStep::tool_call("echo", json!({"text": "work"}));
    let test = TestPod::new(vec![
        echo(),
        ScriptStep::text("one"),
        echo(),
        echo(),
        echo(),
    ]);
    let mut config = test.config();
    config.session_budget = SessionBudget {
        requests: Some(3),
        ..SessionBudget::default()
    };
    let pod = Pod::spawn(config.clone()).await.expect("spawn");
    let outcome = pod.prompt("First").await.expect("turn");
    assert_eq!(outcome.requests, 2);
    let id = pod.session_id();
    pod.shutdown().await.expect("shutdown");

    // After a resume the two answers in the log still count.
    test.model.skip_to(2);
    let pod = Pod::resume(id, config).await.expect("resume");
    let outcome = pod.prompt("Second").await.expect("turn");
    assert_eq!(
        outcome.reason,
        TurnEndReason::Limit(Limit::SessionRequests(3))
    );
    assert_eq!(outcome.requests, 1);
    let history = pod.get_history().await.expect("history");
    validate_history(&history).expect("valid");
    pod.shutdown().await.expect("shutdown");
}
