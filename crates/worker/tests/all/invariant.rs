//! Every tool call gets exactly one result, whatever happens.

use crate::support::{result_of, shape, Observed, Recorder, TestWorker};
use pod_llm::{ProviderError, ScriptStep};
use pod_worker::{
    AbortReason, Budget, Limit, TurnEndAction, TurnEndReason, WorkerConfig, WorkerError,
};
use serde_json::json;
use std::sync::atomic::Ordering;
use std::time::Duration;

#[tokio::test]
async fn cancelling_while_a_tool_runs_tells_the_tool_and_answers_every_call() {
    let mut t = TestWorker::new(vec![
        ScriptStep::tool_call("slow", json!({})).and_call("echo", json!({"text": "later"})),
        ScriptStep::text("never"),
    ]);
    let started = t.slow.started.clone();
    let cancel = t.cancel.clone();
    let mut hooks = Recorder::new();
    let mut seen = Observed::default();
    let (outcome, ()) = tokio::join!(t.turn(Some("go"), &mut hooks, &mut seen), async {
        started.notified().await;
        cancel.cancel();
    });
    let outcome = outcome.unwrap();
    assert_eq!(outcome.reason, TurnEndReason::Cancelled);
    // The tool saw the cancellation and its own answer is kept.
    assert_eq!(
        result_of(t.history(), "call_0_0"),
        ("slow: stopped because the turn was cancelled".into(), true)
    );
    assert_eq!(
        result_of(t.history(), "call_0_1"),
        (
            "Not run: the turn was cancelled before this call started.".into(),
            true
        )
    );
    assert_eq!(t.echo.runs.load(Ordering::SeqCst), 0);
    assert_eq!(hooks.aborts, [AbortReason::Cancelled]);
    assert_eq!(t.provider.requests().len(), 1);
    t.assert_valid(&seen);
}

#[tokio::test(start_paused = true)]
async fn a_tool_that_ignores_cancellation_is_dropped_after_the_grace_period() {
    let config = WorkerConfig {
        cancel_grace: Duration::from_secs(5),
        ..WorkerConfig::default()
    };
    let mut t = TestWorker::with_config(
        vec![
            ScriptStep::tool_call("stubborn", json!({})),
            ScriptStep::text("never"),
        ],
        config,
    );
    let started = t.stubborn.started.clone();
    let dropped = t.stubborn.dropped.clone();
    let cancel = t.cancel.clone();
    let mut hooks = Recorder::new();
    let mut seen = Observed::default();
    let (outcome, ()) = tokio::join!(t.turn(Some("go"), &mut hooks, &mut seen), async {
        started.notified().await;
        cancel.cancel();
    });
    assert_eq!(outcome.unwrap().reason, TurnEndReason::Cancelled);
    assert!(
        dropped.load(Ordering::SeqCst),
        "the stubborn call was dropped"
    );
    assert_eq!(
        result_of(t.history(), "call_0_0"),
        (
            "Cancelled: the turn was cancelled while this tool was running, and it was stopped."
                .into(),
            true
        )
    );
    assert_eq!(hooks.aborts, [AbortReason::Cancelled]);
    t.assert_valid(&seen);
}

#[tokio::test(start_paused = true)]
async fn cancelling_while_the_model_is_thinking_commits_nothing_of_the_response() {
    let mut t = TestWorker::new(vec![
        ScriptStep::tool_call("echo", json!({"text": "x"})).delayed(Duration::from_secs(60))
    ]);
    let cancel = t.cancel.clone();
    let mut hooks = Recorder::new();
    let mut seen = Observed::default();
    let (outcome, ()) = tokio::join!(t.turn(Some("go"), &mut hooks, &mut seen), async {
        // Paused clock: this fires before the provider's 60 s delay, at once.
        tokio::time::sleep(Duration::from_secs(1)).await;
        cancel.cancel();
    });
    assert_eq!(outcome.unwrap().reason, TurnEndReason::Cancelled);
    assert_eq!(shape(t.history()), ["user:go"]);
    assert_eq!(hooks.aborts, [AbortReason::Cancelled]);
    t.assert_valid(&seen);
}

#[tokio::test]
async fn cancelling_before_the_request_sends_nothing() {
    let mut t = TestWorker::new(vec![ScriptStep::text("never")]);
    let mut hooks = Recorder::new().cancel_on_request(t.cancel.clone());
    let mut seen = Observed::default();
    let outcome = t.turn(Some("go"), &mut hooks, &mut seen).await.unwrap();
    assert_eq!(outcome.reason, TurnEndReason::Cancelled);
    assert!(t.provider.requests().is_empty());
    assert_eq!(hooks.aborts, [AbortReason::Cancelled]);
    t.assert_valid(&seen);
}

#[tokio::test]
async fn an_already_cancelled_token_ends_the_turn_after_the_prompt() {
    let mut t = TestWorker::new(vec![ScriptStep::text("never")]);
    t.cancel.cancel();
    let mut hooks = Recorder::new();
    let mut seen = Observed::default();
    let outcome = t.turn(Some("go"), &mut hooks, &mut seen).await.unwrap();
    assert_eq!(outcome.reason, TurnEndReason::Cancelled);
    assert_eq!(outcome.requests, 0);
    assert_eq!(shape(t.history()), ["user:go"]);
    assert_eq!(hooks.log, ["on_prompt_submit", "on_abort Cancelled"]);
    t.assert_valid(&seen);
}

/// Runs one response with a single call, then a closing text; returns the
/// call's result and checks the model read it in the next request.
async fn single_call(step: ScriptStep) -> (String, bool) {
    let mut t = TestWorker::new(vec![step, ScriptStep::text("recovered")]);
    let mut seen = Observed::default();
    let outcome = t
        .turn(Some("go"), &mut Recorder::new(), &mut seen)
        .await
        .unwrap();
    assert_eq!(
        outcome.reason,
        TurnEndReason::EndTurn,
        "an error result is not a crash"
    );
    t.assert_valid(&seen);
    let result = result_of(t.history(), "call_0_0");
    assert_eq!(t.provider.requests()[1].history[..], t.history()[..3]);
    result
}

#[tokio::test]
async fn an_unknown_tool_gets_an_error_result_naming_the_tools() {
    let (content, is_error) = single_call(ScriptStep::tool_call("nope", json!({}))).await;
    assert!(is_error);
    assert_eq!(
        content,
        "Unknown tool `nope`. Available tools: echo, slow, stubborn, panics, parallel, serial."
    );
}

#[tokio::test]
async fn malformed_json_arguments_get_an_error_result() {
    let step = ScriptStep::default().and_raw_call("echo", r#"{"text": "unterminated"#);
    let (content, is_error) = single_call(step).await;
    assert!(is_error);
    assert!(
        content.starts_with("The arguments of this `echo` call are not valid JSON ("),
        "{content}"
    );
}

#[tokio::test]
async fn wrongly_shaped_arguments_get_an_error_result_with_the_schema() {
    let (content, is_error) = single_call(ScriptStep::tool_call("echo", json!({"txt": 1}))).await;
    assert!(is_error);
    assert!(
        content.starts_with("Invalid arguments for `echo`: missing field `text`"),
        "{content}"
    );
    assert!(content.contains(r#""required":["text"]"#), "{content}");
}

#[tokio::test]
async fn a_panicking_tool_gets_an_error_result() {
    let step = ScriptStep::tool_call("panics", json!({"text": "boom"}));
    let (content, is_error) = single_call(step).await;
    assert!(is_error);
    assert_eq!(
        content,
        "The tool `panics` crashed (boom). Its effects are unknown; check before retrying."
    );
}

#[tokio::test]
async fn a_provider_error_returns_the_error_and_keeps_history_valid() {
    let mut t = TestWorker::new(vec![
        ScriptStep::tool_call("echo", json!({"text": "a"})),
        ScriptStep::http_error(503, "overloaded"),
    ]);
    let mut seen = Observed::default();
    let err = t
        .turn(Some("go"), &mut Recorder::new(), &mut seen)
        .await
        .unwrap_err();
    assert!(
        matches!(&err, WorkerError::Provider(ProviderError::Http { status: 503, message, .. }) if message == "overloaded"),
        "{err:?}"
    );
    assert_eq!(
        shape(t.history()),
        ["user:go", "assistant:[\"call_0_0\"]", "result:call_0_0"]
    );
    t.assert_valid(&seen);
}

fn dropped_midway() -> ScriptStep {
    let mut failing = ScriptStep::http_error(502, "connection reset");
    failing.fail_mid_stream = true;
    failing.text = "I will call a tool".into();
    failing.tool_calls = ScriptStep::tool_call("echo", json!({"text": "x"})).tool_calls;
    failing
}

#[tokio::test]
async fn a_failure_mid_stream_commits_nothing_of_that_response() {
    let config = WorkerConfig {
        stream_retries: 0,
        ..WorkerConfig::default()
    };
    let mut t = TestWorker::with_config(vec![dropped_midway()], config);
    let mut seen = Observed::default();
    let err = t
        .turn(Some("go"), &mut Recorder::new(), &mut seen)
        .await
        .unwrap_err();
    assert!(matches!(
        err,
        WorkerError::Provider(ProviderError::Http { status: 502, .. })
    ));
    // Text and a complete tool call were streamed, but none of it is kept.
    assert!(seen
        .events
        .iter()
        .any(|e| matches!(e, pod_worker::WorkerEvent::TextDelta(_))));
    assert_eq!(shape(t.history()), ["user:go"]);
    assert_eq!(t.echo.runs.load(Ordering::SeqCst), 0);
    t.assert_valid(&seen);
}

#[tokio::test(start_paused = true)]
async fn a_stream_dropped_midway_is_retried_and_its_tool_runs_once() {
    let mut t = TestWorker::new(vec![
        dropped_midway(),
        ScriptStep::tool_call("echo", json!({"text": "x"})),
        ScriptStep::text("done"),
    ]);
    let mut seen = Observed::default();
    let outcome = t
        .turn(Some("go"), &mut Recorder::new(), &mut seen)
        .await
        .unwrap();
    assert_eq!(
        outcome.requests, 2,
        "a retry is the same request, not a new one"
    );
    assert_eq!(
        shape(t.history()),
        [
            "user:go",
            "assistant:[\"call_1_0\"]",
            "result:call_1_0",
            "assistant:done[]"
        ]
    );
    assert_eq!(t.echo.runs.load(Ordering::SeqCst), 1);
    assert!(seen.events.iter().any(|e| matches!(
        e,
        pod_worker::WorkerEvent::RequestRetried { attempt: 1, .. }
    )));
    // The retry sent exactly what the failed attempt sent.
    let requests = t.provider.requests();
    assert_eq!(requests[0], requests[1]);
    t.assert_valid(&seen);
}

#[tokio::test(start_paused = true)]
async fn a_stream_that_keeps_dropping_fails_the_turn_after_the_retries() {
    let mut t = TestWorker::new(vec![dropped_midway(), dropped_midway(), dropped_midway()]);
    let mut seen = Observed::default();
    let err = t
        .turn(Some("go"), &mut Recorder::new(), &mut seen)
        .await
        .unwrap_err();
    assert!(matches!(
        err,
        WorkerError::Provider(ProviderError::Http { status: 502, .. })
    ));
    assert_eq!(t.provider.requests().len(), 3);
    assert_eq!(shape(t.history()), ["user:go"]);
    assert_eq!(t.echo.runs.load(Ordering::SeqCst), 0);
    t.assert_valid(&seen);
}

#[tokio::test]
async fn max_requests_per_turn_stops_a_tool_loop_with_every_call_answered() {
    let config = WorkerConfig {
        budget: Budget {
            requests_per_turn: 2,
            ..Budget::default()
        },
        ..WorkerConfig::default()
    };
    let call = || ScriptStep::tool_call("echo", json!({"text": "again"}));
    let mut t = TestWorker::with_config(vec![call(), call(), call()], config);
    let mut seen = Observed::default();
    let outcome = t
        .turn(Some("go"), &mut Recorder::new(), &mut seen)
        .await
        .unwrap();
    assert_eq!(outcome.reason, TurnEndReason::Limit(Limit::TurnRequests(2)));
    assert_eq!(outcome.requests, 2);
    assert_eq!(t.provider.requests().len(), 2);
    assert_eq!(t.echo.runs.load(Ordering::SeqCst), 2);
    assert_eq!(
        shape(t.history()),
        [
            "user:go",
            "assistant:[\"call_0_0\"]",
            "result:call_0_0",
            "assistant:[\"call_1_0\"]",
            "result:call_1_0",
        ]
    );
    t.assert_valid(&seen);
}

#[tokio::test]
async fn each_continuation_gets_a_fresh_per_turn_request_budget() {
    let config = WorkerConfig {
        budget: Budget {
            requests_per_turn: 2,
            ..Budget::default()
        },
        ..WorkerConfig::default()
    };
    let call = || ScriptStep::tool_call("echo", json!({"text": "work"}));
    let steps = vec![
        call(),
        ScriptStep::text("one"),
        call(),
        ScriptStep::text("two"),
        call(),
        ScriptStep::text("three"),
    ];
    let mut t = TestWorker::with_config(steps, config);
    let go_on = || TurnEndAction::ContinueWithMessages(vec![pod_llm::Item::user("go on")]);
    let mut hooks = Recorder::new().turn_end(go_on()).turn_end(go_on());
    let mut seen = Observed::default();
    let outcome = t.turn(Some("go"), &mut hooks, &mut seen).await.unwrap();
    // Six requests in one run, never more than two in one turn.
    assert_eq!(outcome.reason, TurnEndReason::EndTurn);
    assert_eq!(outcome.requests, 6);
    t.assert_valid(&seen);
}

#[tokio::test]
async fn the_continuation_limit_ends_the_run_without_committing_the_continuation() {
    let config = WorkerConfig {
        budget: Budget {
            continuations: Some(1),
            ..Budget::default()
        },
        ..WorkerConfig::default()
    };
    let steps = vec![ScriptStep::text("one"), ScriptStep::text("two")];
    let mut t = TestWorker::with_config(steps, config);
    let go_on = || TurnEndAction::ContinueWithMessages(vec![pod_llm::Item::user("go on")]);
    let mut hooks = Recorder::new().turn_end(go_on()).turn_end(go_on());
    let mut seen = Observed::default();
    let outcome = t.turn(Some("go"), &mut hooks, &mut seen).await.unwrap();
    assert_eq!(
        outcome.reason,
        TurnEndReason::Limit(Limit::Continuations(1))
    );
    assert_eq!(outcome.requests, 2);
    assert_eq!(
        shape(t.history()),
        [
            "user:go",
            "assistant:one[]",
            "user:go on",
            "assistant:two[]"
        ]
    );
    t.assert_valid(&seen);
}

#[tokio::test]
async fn a_model_repeating_the_same_failing_call_is_stopped() {
    let same = || ScriptStep::tool_call("no_such_tool", json!({"path": "x"}));
    let steps: Vec<ScriptStep> = (0..20).map(|_| same()).collect();
    let mut t = TestWorker::new(steps);
    let mut seen = Observed::default();
    let outcome = t
        .turn(Some("go"), &mut Recorder::new(), &mut seen)
        .await
        .unwrap();
    assert_eq!(
        outcome.reason,
        TurnEndReason::Limit(Limit::RepeatedFailure {
            tool: "no_such_tool".into(),
            times: pod_worker::DEFAULT_REPEATED_FAILURES,
        })
    );
    assert_eq!(outcome.requests, pod_worker::DEFAULT_REPEATED_FAILURES);
    t.assert_valid(&seen);
}

#[tokio::test]
async fn the_loop_guard_stops_the_rest_of_a_response_with_results() {
    let config = WorkerConfig {
        budget: Budget {
            repeated_failures: 2,
            ..Budget::default()
        },
        ..WorkerConfig::default()
    };
    let bad = json!({"path": "x"});
    let step = ScriptStep::tool_call("no_such_tool", bad.clone())
        .and_call("no_such_tool", bad)
        .and_call("echo", json!({"text": "never"}));
    let mut t = TestWorker::with_config(vec![step], config);
    let mut seen = Observed::default();
    let outcome = t
        .turn(Some("go"), &mut Recorder::new(), &mut seen)
        .await
        .unwrap();
    assert!(matches!(
        outcome.reason,
        TurnEndReason::Limit(Limit::RepeatedFailure { times: 2, .. })
    ));
    let (content, is_error) = result_of(t.history(), "call_0_2");
    assert!(is_error);
    assert!(content.contains("loop guard"), "{content}");
    assert_eq!(t.echo.runs.load(Ordering::SeqCst), 0);
    t.assert_valid(&seen);
}
