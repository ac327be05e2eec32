use super::*;
use pod_llm::{Item, ToolCall};
use serde_json::json;

fn call(id: &str) -> ToolCall {
    ToolCall {
        id: id.into(),
        name: "read_file".into(),
        arguments: r#"{"path":"a"}"#.into(),
    }
}

fn assistant(text: &str, calls: Vec<ToolCall>) -> LogRecord {
    LogRecord::Item(Item::new(ItemKind::Assistant {
        text: text.into(),
        reasoning: None,
        tool_calls: calls,
        usage: None,
    }))
}

fn lines(events: &[serde_json::Value]) -> Vec<String> {
    events.iter().map(|e| e.to_string()).collect()
}

fn started(id: &str) -> serde_json::Value {
    json!({"event": "tool_call_started", "call_id": id, "name": "read_file", "arguments": "{\"path\":\"a\"}"})
}

fn finished(id: &str) -> serde_json::Value {
    json!({"event": "tool_call_finished", "call_id": id, "name": "read_file", "content": "ok", "is_error": false})
}

#[test]
fn a_finished_call_acknowledges_its_result() {
    let acks = acknowledged(&lines(&[started("c1"), finished("c1")]));
    assert_eq!(acks.len(), 2, "{acks:?}");
    assert_eq!(
        acks[1],
        Ack::Result {
            call_id: "c1".into(),
            content: "ok".into(),
            is_error: false
        }
    );
}

#[test]
fn a_lost_result_a_lost_call_and_changed_text_are_reported() {
    let records = vec![assistant("Looking.", vec![call("c1")])];
    let acks = acknowledged(&lines(&[
        json!({"event": "text_delta", "text": "Looking"}),
        started("c1"),
        finished("c1"),
        started("c2"),
    ]));
    let problems = missing(&acks, None, &records, 0);
    assert_eq!(problems.len(), 3, "{problems:#?}");
    assert!(problems[0].contains("item text"), "{}", problems[0]);
    // The result is acknowledged by the next event, before c2's call.
    assert!(problems[1].contains("result of call c1"), "{}", problems[1]);
    assert!(problems[2].contains("c2") && problems[2].contains("not in the log"));
}

#[test]
fn acknowledged_todos_must_be_the_accepted_lists_in_order() {
    let todo_call = ToolCall {
        id: "t1".into(),
        name: "todo_write".into(),
        arguments: json!({"todos": [{"id": "a", "content": "A", "status": "pending"}]}).to_string(),
    };
    let records = vec![
        assistant("", vec![todo_call]),
        LogRecord::Item(Item::tool_result("t1", "ok", false)),
    ];
    let list = pod_tools::parse_todo_write(
        &json!({"todos": [{"id": "a", "content": "A", "status": "pending"}]}).to_string(),
    )
    .unwrap();
    let acks = vec![Ack::Todos(list.clone())];
    assert!(missing(&acks, None, &records, 0).is_empty());
    // Records before `base` belong to an earlier process.
    assert_eq!(missing(&acks, None, &records, 2).len(), 1);
    let twice = vec![Ack::Todos(list.clone()), Ack::Todos(list)];
    assert_eq!(missing(&twice, None, &records, 0).len(), 1);
}

#[test]
fn turn_end_needs_the_final_answer_last() {
    let records = vec![assistant("Done.", vec![])];
    let ok = vec![Ack::TurnEnded {
        text: "Done.".into(),
    }];
    assert!(missing(&ok, None, &records, 0).is_empty());
    let records = vec![assistant("Done.", vec![call("c9")])];
    assert_eq!(missing(&ok, None, &records, 0).len(), 1);
}
