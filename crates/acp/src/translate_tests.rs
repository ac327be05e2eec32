use super::*;
use serde_json::json;

fn todo(id: &str, content: &str, status: TodoStatus) -> TodoItem {
    TodoItem {
        id: id.into(),
        content: content.into(),
        status,
    }
}

#[test]
fn plan_has_one_medium_entry_per_todo_in_order_and_no_ids() {
    let todos = [
        todo("a", "Read the parser", TodoStatus::Completed),
        todo("b", "Port it", TodoStatus::InProgress),
        todo("c", "Run the tests", TodoStatus::Pending),
    ];
    assert_eq!(
        serde_json::to_value(plan(&todos)).unwrap(),
        json!({"entries": [
            {"content": "Read the parser", "priority": "medium", "status": "completed"},
            {"content": "Port it", "priority": "medium", "status": "in_progress"},
            {"content": "Run the tests", "priority": "medium", "status": "pending"},
        ]})
    );
}

#[test]
fn an_empty_list_is_an_empty_plan() {
    assert_eq!(
        serde_json::to_value(plan(&[])).unwrap(),
        json!({"entries": []})
    );
}

#[test]
fn stop_reasons_map_to_the_five_acp_reasons() {
    let cases = [
        (TurnEndReason::EndTurn, StopReason::EndTurn),
        (TurnEndReason::MaxTokens, StopReason::MaxTokens),
        (TurnEndReason::Refusal, StopReason::Refusal),
        (
            TurnEndReason::Limit(pod_worker::Limit::TurnRequests(5)),
            StopReason::MaxTurnRequests,
        ),
        (
            TurnEndReason::Limit(pod_worker::Limit::RunTokens(9)),
            StopReason::MaxTurnRequests,
        ),
        (TurnEndReason::Cancelled, StopReason::Cancelled),
        (TurnEndReason::Aborted("policy".into()), StopReason::EndTurn),
        (TurnEndReason::Paused("wait".into()), StopReason::EndTurn),
        (TurnEndReason::Rejected("no".into()), StopReason::Refusal),
    ];
    for (reason, expected) in cases {
        assert_eq!(stop_reason(&reason), expected, "{reason:?}");
    }
}

#[test]
fn tool_kinds_follow_the_name() {
    assert_eq!(tool_kind("todo_write"), ToolKind::Think);
    assert_eq!(tool_kind("read_file"), ToolKind::Read);
    assert_eq!(tool_kind("edit_file"), ToolKind::Edit);
    assert_eq!(tool_kind("bash"), ToolKind::Execute);
    assert_eq!(tool_kind("grep"), ToolKind::Search);
    assert_eq!(tool_kind("mystery"), ToolKind::Other);
}

#[test]
fn titles_name_the_tool_and_its_telling_argument() {
    assert_eq!(
        tool_title("todo_write", &json!({"todos": [{}, {}]})),
        "Update plan (2 items)"
    );
    assert_eq!(
        tool_title("read_file", &json!({"path": "src/main.rs"})),
        "read_file src/main.rs"
    );
    assert_eq!(
        tool_title("bash", &json!({"command": "cargo test\nmore"})),
        "bash cargo test…"
    );
    assert_eq!(tool_title("mystery", &json!("not an object")), "mystery");
}

#[test]
fn a_tool_call_carries_id_title_kind_status_and_raw_input() {
    let call = tool_call(
        "c1",
        "read_file",
        r#"{"path":"a.rs"}"#,
        ToolCallStatus::InProgress,
    );
    assert_eq!(
        serde_json::to_value(call).unwrap(),
        json!({
            "toolCallId": "c1",
            "title": "read_file a.rs",
            "kind": "read",
            "status": "in_progress",
            "locations": [{"path": "a.rs"}],
            "rawInput": {"path": "a.rs"},
        })
    );
    let bad = tool_call("c2", "x", "{not json", ToolCallStatus::InProgress);
    assert_eq!(bad.raw_input, Some(json!("{not json")));
}

#[test]
fn a_result_completes_or_fails_the_call_with_its_output() {
    assert_eq!(
        serde_json::to_value(tool_result("c1", "done", false)).unwrap(),
        json!({
            "toolCallId": "c1",
            "status": "completed",
            "content": [{"type": "content", "content": {"type": "text", "text": "done"}}],
            "rawOutput": "done",
        })
    );
    assert_eq!(
        tool_result("c1", "boom", true).fields.status,
        Some(ToolCallStatus::Failed)
    );
}
