//! Concurrency-safe calls run together; results are committed in call order.

use crate::support::{shape, Observed, Recorder, TestWorker};
use pod_llm::{ItemKind, ScriptStep};
use serde_json::json;
use std::sync::atomic::Ordering;

fn gauge(name: &str, yields: usize) -> (String, serde_json::Value) {
    (name.into(), json!({ "yields": yields }))
}

fn step(calls: &[(String, serde_json::Value)]) -> ScriptStep {
    calls.iter().fold(ScriptStep::default(), |s, (name, args)| {
        s.and_call(name, args.clone())
    })
}

#[tokio::test]
async fn safe_calls_run_concurrently_and_results_keep_call_order() {
    // The first call yields longest, so the calls finish in reverse order.
    let mut t = TestWorker::new(vec![
        step(&[
            gauge("parallel", 6),
            gauge("parallel", 3),
            gauge("parallel", 0),
        ]),
        ScriptStep::text("done"),
    ]);
    let mut hooks = Recorder::new();
    let mut seen = Observed::default();
    t.turn(Some("go"), &mut hooks, &mut seen).await.unwrap();

    assert_eq!(t.gauge.max_running.load(Ordering::SeqCst), 3);
    assert_eq!(
        *t.gauge.finished.lock(),
        ["call_0_2", "call_0_1", "call_0_0"]
    );
    assert_eq!(
        shape(t.history()),
        [
            "user:go",
            "assistant:[\"call_0_0\", \"call_0_1\", \"call_0_2\"]",
            "result:call_0_0",
            "result:call_0_1",
            "result:call_0_2",
            "assistant:done[]",
        ]
    );
    // A batch is planned whole, then its results are handled in call order.
    assert_eq!(
        hooks.log[3..9],
        [
            "pre_tool_call call_0_0 parallel",
            "pre_tool_call call_0_1 parallel",
            "pre_tool_call call_0_2 parallel",
            "post_tool_call call_0_0 parallel error=false",
            "post_tool_call call_0_1 parallel error=false",
            "post_tool_call call_0_2 parallel error=false",
        ]
    );
    let ItemKind::ToolResult { content, .. } = &t.history()[2].kind else {
        panic!("a result")
    };
    assert_eq!(content, "call_0_0 done");
    t.assert_valid(&seen);
}

#[tokio::test]
async fn unsafe_calls_run_one_at_a_time() {
    let mut t = TestWorker::new(vec![
        step(&[gauge("serial", 3), gauge("serial", 3), gauge("serial", 0)]),
        ScriptStep::text("done"),
    ]);
    let mut seen = Observed::default();
    t.turn(Some("go"), &mut Recorder::new(), &mut seen)
        .await
        .unwrap();
    assert_eq!(t.gauge.max_running.load(Ordering::SeqCst), 1);
    assert_eq!(
        *t.gauge.finished.lock(),
        ["call_0_0", "call_0_1", "call_0_2"]
    );
    t.assert_valid(&seen);
}

#[tokio::test]
async fn an_unsafe_call_splits_the_batches_around_it() {
    let mut t = TestWorker::new(vec![
        step(&[
            gauge("parallel", 4),
            gauge("parallel", 0),
            gauge("serial", 0),
            gauge("parallel", 4),
            gauge("parallel", 0),
        ]),
        ScriptStep::text("done"),
    ]);
    let mut hooks = Recorder::new();
    let mut seen = Observed::default();
    t.turn(Some("go"), &mut hooks, &mut seen).await.unwrap();
    // Each run of safe calls overlaps within itself, never with the serial call.
    assert_eq!(t.gauge.max_running.load(Ordering::SeqCst), 2);
    assert_eq!(
        *t.gauge.finished.lock(),
        ["call_0_1", "call_0_0", "call_0_2", "call_0_4", "call_0_3"]
    );
    let tool_hooks: Vec<&str> = hooks
        .log
        .iter()
        .filter(|l| l.contains("tool_call"))
        .map(|l| l.split(" error=").next().unwrap())
        .collect();
    assert_eq!(
        tool_hooks,
        [
            "pre_tool_call call_0_0 parallel",
            "pre_tool_call call_0_1 parallel",
            "post_tool_call call_0_0 parallel",
            "post_tool_call call_0_1 parallel",
            "pre_tool_call call_0_2 serial",
            "post_tool_call call_0_2 serial",
            "pre_tool_call call_0_3 parallel",
            "pre_tool_call call_0_4 parallel",
            "post_tool_call call_0_3 parallel",
            "post_tool_call call_0_4 parallel",
        ]
    );
    let results: Vec<String> = shape(t.history())
        .into_iter()
        .filter(|s| s.starts_with("result:"))
        .collect();
    assert_eq!(
        results,
        [
            "result:call_0_0",
            "result:call_0_1",
            "result:call_0_2",
            "result:call_0_3",
            "result:call_0_4"
        ]
    );
    t.assert_valid(&seen);
}
