//! Tool state: a stateful tool's call takes effect when its result is
//! committed, and replaying the committed items rebuilds the same state.

use crate::support::{Observed, TestWorker};
use pod_llm::{ScriptStep, ScriptedProvider};
use pod_testkit::tools::Tally;
use pod_worker::{NoopInterceptor, ToolRegistry, ToolStates, Worker, WorkerConfig};
use serde_json::json;
use std::sync::Arc;

fn worker(steps: Vec<ScriptStep>) -> (Worker, Tally) {
    let tally = Tally::default();
    let mut tools = ToolRegistry::new();
    tools.register(tally.clone());
    let provider = Arc::new(ScriptedProvider::from_steps(steps));
    (Worker::new(provider, tools, WorkerConfig::default()), tally)
}

fn total(tally: &Tally) -> i64 {
    tally.0.total()
}

#[tokio::test]
async fn committed_results_change_the_state_in_commit_order_and_errors_do_not() {
    let (mut worker, tally) = worker(vec![
        ScriptStep::tool_call("tally", json!({"n": 2})).and_call("tally", json!({"n": -5})),
        ScriptStep::tool_call("tally", json!({"n": 3})),
        ScriptStep::text("done"),
    ]);
    let mut observed = Observed::default();
    worker
        .run_turn(
            Some(pod_llm::Item::user("go")),
            &mut NoopInterceptor,
            &mut observed,
            &Default::default(),
        )
        .await
        .unwrap();
    assert_eq!(total(&tally), 5);
    // The second call's readback saw the first call's committed effect.
    let (content, _) = crate::support::result_of(worker.history(), "call_1_0");
    assert_eq!(content, "total will be 5");

    // Replaying what was committed into a fresh tool gives the same state,
    // and clears whatever the fresh tool held.
    let fresh = Tally::default();
    let mut registry = ToolRegistry::new();
    registry.register(fresh.clone());
    let mut states = ToolStates::of(&registry);
    for item in &observed.items {
        states.observe(item);
    }
    assert_eq!(total(&fresh), 5);
    // Replaying again after a clear does not count twice.
    states.clear();
    for item in &observed.items {
        states.observe(item);
    }
    assert_eq!(total(&fresh), 5);
}

#[tokio::test]
async fn a_result_the_observer_refuses_changes_nothing() {
    // Appends: the prompt (0), the assistant item (1), the result (2).
    let (mut worker, tally) = worker(vec![
        ScriptStep::tool_call("tally", json!({"n": 7})),
        ScriptStep::text("done"),
    ]);
    let mut observed = Observed::failing_at(2);
    let err = worker
        .run_turn(
            Some(pod_llm::Item::user("go")),
            &mut NoopInterceptor,
            &mut observed,
            &Default::default(),
        )
        .await;
    assert!(err.is_err(), "the refused append fails the turn");
    assert_eq!(total(&tally), 0, "the log does not have the result");
}

#[tokio::test]
async fn the_owner_tells_states_of_a_compaction_once_per_state() {
    let (mut worker, tally) = worker(vec![]);
    // A tool registered under two names shares one state.
    let mut registry = ToolRegistry::new();
    registry.register(tally.clone());
    let mut states = ToolStates::of(&registry);
    states.insert("tally_alias", tally.0.clone());
    states.compacted();
    worker.tool_states().compacted();
    assert_eq!(tally.0.compactions(), 2);
}

#[tokio::test]
async fn tools_without_state_are_not_tracked() {
    let test = TestWorker::new(vec![]);
    let mut worker = test.worker;
    assert!(worker.tool_states().is_empty());
}
