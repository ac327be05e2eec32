//! The observer sees every committed item, in order, before the turn goes on.

use crate::support::{shape, Observed, Recorder, TestWorker};
use pod_llm::{Item, ScriptStep, SystemKind, ToolCall};
use pod_worker::{PromptAction, TurnEndAction, WorkerError, WorkerEvent};
use serde_json::json;

#[tokio::test]
async fn on_history_append_sees_exactly_the_history_in_order() {
    let mut t = TestWorker::new(vec![
        ScriptStep::tool_call("echo", json!({"text": "a"})).and_call("nope", json!({})),
        ScriptStep::text("first answer"),
        ScriptStep::text("second answer"),
    ]);
    let mut hooks = Recorder::new()
        .on_prompt(PromptAction::ContinueWith(vec![Item::system(
            SystemKind::Other,
            "context",
        )]))
        .appends(vec![Item::system(SystemKind::Reminder, "plan")])
        .turn_end(TurnEndAction::ContinueWithMessages(vec![Item::user(
            "more",
        )]));
    let mut seen = Observed::default();
    t.turn(Some("go"), &mut hooks, &mut seen).await.unwrap();
    assert_eq!(seen.items, t.history());
    assert_eq!(
        shape(&seen.items),
        [
            "user:go",
            "system:context",
            "system:plan",
            "assistant:[\"call_0_0\", \"call_0_1\"]",
            "result:call_0_0",
            "result:call_0_1",
            "assistant:first answer[]",
            "user:more",
            "assistant:second answer[]",
        ]
    );
    t.assert_valid(&seen);
}

#[tokio::test]
async fn events_report_requests_text_and_tool_calls() {
    let mut t = TestWorker::new(vec![
        ScriptStep::tool_call("echo", json!({"text": "a"})),
        ScriptStep::text("all done"),
    ]);
    let mut seen = Observed::default();
    t.turn(Some("go"), &mut Recorder::new(), &mut seen)
        .await
        .unwrap();
    let call = ToolCall {
        id: "call_0_0".into(),
        name: "echo".into(),
        arguments: r#"{"text":"a"}"#.into(),
    };
    let lifecycle: Vec<&WorkerEvent> = seen
        .events
        .iter()
        .filter(|e| !matches!(e, WorkerEvent::TextDelta(_) | WorkerEvent::Usage(_)))
        .collect();
    assert_eq!(
        lifecycle,
        [
            &WorkerEvent::RequestStarted { number: 1 },
            // Said as soon as the call's name streams, before its arguments.
            &WorkerEvent::CallStreaming {
                name: "echo".into()
            },
            &WorkerEvent::ToolCallStarted(call.clone()),
            &WorkerEvent::ToolCallFinished {
                call,
                content: "a".into(),
                is_error: false
            },
            &WorkerEvent::RequestStarted { number: 2 },
        ]
    );
    let text: String = seen
        .events
        .iter()
        .filter_map(|e| match e {
            WorkerEvent::TextDelta(t) => Some(t.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(text, "all done");
    let usages = seen
        .events
        .iter()
        .filter(|e| matches!(e, WorkerEvent::Usage(_)))
        .count();
    assert_eq!(usages, 2);
}

#[tokio::test]
async fn a_persist_failure_stops_the_turn_and_the_item_is_not_committed() {
    let mut t = TestWorker::new(vec![ScriptStep::text("answer")]);
    let mut seen = Observed::failing_at(1);
    let err = t
        .turn(Some("go"), &mut Recorder::new(), &mut seen)
        .await
        .unwrap_err();
    assert!(matches!(err, WorkerError::Persist(_)), "{err:?}");
    assert_eq!(shape(t.history()), ["user:go"]);
    assert_eq!(seen.items, t.history());
}
