//! Call ids in history are unique even when the provider repeats them.

use crate::support::{result_of, Observed, Recorder, TestWorker};
use pod_llm::{validate_history, ScriptStep};
use serde_json::json;

fn with_ids(mut step: ScriptStep, ids: &[&str]) -> ScriptStep {
    for (call, id) in step.tool_calls.iter_mut().zip(ids) {
        call.id = Some((*id).to_string());
    }
    step
}

#[tokio::test]
async fn duplicate_and_empty_call_ids_are_renamed_uniquely() {
    let echo = |text: &str| json!({ "text": text });
    let mut t = TestWorker::new(vec![
        with_ids(
            ScriptStep::tool_call("echo", echo("a")).and_call("echo", echo("b")),
            &["dup", "dup"],
        ),
        // Reused across responses, and missing.
        with_ids(
            ScriptStep::tool_call("echo", echo("c")).and_call("echo", echo("d")),
            &["dup", ""],
        ),
        ScriptStep::text("done"),
    ]);
    let mut seen = Observed::default();
    t.turn(Some("go"), &mut Recorder::new(), &mut seen)
        .await
        .unwrap();
    let ids: Vec<String> = t
        .history()
        .iter()
        .flat_map(|i| i.tool_calls().iter().map(|c| c.id.clone()))
        .collect();
    assert_eq!(ids, ["dup", "dup_1", "dup_2", "call_3"]);
    validate_history(t.history()).unwrap();
    // Each result answers its own call.
    assert_eq!(result_of(t.history(), "dup"), ("a".into(), false));
    assert_eq!(result_of(t.history(), "dup_1"), ("b".into(), false));
    assert_eq!(result_of(t.history(), "dup_2"), ("c".into(), false));
    assert_eq!(result_of(t.history(), "call_3"), ("d".into(), false));
    // The model is sent the renamed ids.
    assert_eq!(
        t.provider.requests()[2].history[..],
        t.history()[..t.history().len() - 1]
    );
    t.assert_valid(&seen);
}

#[tokio::test]
async fn ids_already_in_a_restored_history_are_not_reused() {
    let mut first = TestWorker::new(vec![
        with_ids(ScriptStep::tool_call("echo", json!({"text": "a"})), &["x"]),
        ScriptStep::text("done"),
    ]);
    let mut seen = Observed::default();
    first
        .turn(Some("go"), &mut Recorder::new(), &mut seen)
        .await
        .unwrap();

    let mut second = TestWorker::new(vec![
        with_ids(ScriptStep::tool_call("echo", json!({"text": "b"})), &["x"]),
        ScriptStep::text("done"),
    ]);
    second.worker.set_history(first.history().to_vec());
    let mut seen = Observed::default();
    second
        .turn(Some("again"), &mut Recorder::new(), &mut seen)
        .await
        .unwrap();
    validate_history(second.history()).unwrap();
    let ids: Vec<String> = second
        .history()
        .iter()
        .flat_map(|i| i.tool_calls().iter().map(|c| c.id.clone()))
        .collect();
    assert_eq!(ids, ["x", "x_1"]);
}
