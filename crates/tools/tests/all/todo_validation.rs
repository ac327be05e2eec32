//! Every validation rule: the call is an error naming the item and the rule,
//! and the store is exactly as it was.

use crate::harness::{example_plan, raw, todo, TodoHarness};
use pod_tools::todo::{MAX_CONTENT_CHARS, MAX_TODOS};
use pod_tools::{parse_todo_write, TodoError, TodoStatus::Pending};
use serde_json::{json, Value};

/// Seeds the store, makes a call that must be rejected, checks the store is
/// untouched and returns the error text.
async fn rejected(args: &str) -> String {
    let h = TodoHarness::new();
    h.write_ok(&example_plan()).await;
    let before = h.store.snapshot();
    let out = h.write_raw(args).await;
    assert!(
        out.is_error,
        "expected a rejection of {args}, got: {}",
        out.content
    );
    assert_eq!(
        h.store.snapshot(),
        before,
        "store changed after rejecting {args}"
    );
    out.content
}

fn list(items: Vec<Value>) -> String {
    json!({ "todos": items }).to_string()
}

#[tokio::test]
async fn empty_id_is_rejected() {
    let msg = rejected(&list(vec![
        raw("a", "x", "pending"),
        raw("", "y", "pending"),
    ]))
    .await;
    assert_eq!(
        msg,
        "todo_write rejected: todos[1]: id must not be empty. \
         The list was not changed; send the whole corrected list."
    );
    let msg = rejected(&list(vec![raw("  ", "y", "pending")])).await;
    assert!(msg.contains("todos[0]: id must not be empty"), "{msg}");
}

#[tokio::test]
async fn duplicate_id_is_rejected() {
    let msg = rejected(&list(vec![
        raw("a", "x", "pending"),
        raw("b", "y", "pending"),
        raw("a", "z", "completed"),
    ]))
    .await;
    assert_eq!(
        msg,
        "todo_write rejected: todos[2]: id \"a\" is already used by todos[0]; ids must be unique. \
         The list was not changed; send the whole corrected list."
    );
}

#[tokio::test]
async fn empty_or_whitespace_content_is_rejected() {
    for content in ["", "   ", "\n\t "] {
        let msg = rejected(&list(vec![
            raw("a", "x", "pending"),
            raw("b", content, "pending"),
        ]))
        .await;
        assert!(
            msg.contains("todos[1] (id \"b\"): content must not be empty"),
            "{content:?}: {msg}"
        );
    }
}

#[tokio::test]
async fn content_over_the_limit_is_rejected_and_the_limit_itself_is_accepted() {
    assert_eq!(MAX_CONTENT_CHARS, 1000);
    let msg = rejected(&list(vec![raw("long", &"x".repeat(1001), "pending")])).await;
    assert!(
        msg.contains(
            "todos[0] (id \"long\"): content has 1001 characters; at most 1000 are allowed"
        ),
        "{msg}"
    );

    let h = TodoHarness::new();
    let exact = "x".repeat(1000);
    h.write_ok(&[todo("exact", &exact, Pending)]).await;
    assert_eq!(h.store.snapshot()[0].content, exact);
    // The limit counts characters, not bytes.
    let wide = "é".repeat(1000);
    h.write_ok(&[todo("wide", &wide, Pending)]).await;
    assert_eq!(h.store.snapshot()[0].content, wide);
}

#[tokio::test]
async fn unknown_status_is_rejected() {
    let msg = rejected(&list(vec![raw("a", "x", "pending"), raw("b", "y", "done")])).await;
    assert!(
        msg.contains("todos[1]: status \"done\" is not one of pending, in_progress, completed"),
        "{msg}"
    );
    let msg = rejected(&list(vec![json!({"id": "a", "content": "x", "status": 1})])).await;
    assert!(
        msg.contains("todos[0]: \"status\" must be a string, got a number"),
        "{msg}"
    );
}

#[tokio::test]
async fn two_items_in_progress_are_rejected() {
    let msg = rejected(&list(vec![
        raw("a", "x", "in_progress"),
        raw("b", "y", "pending"),
        raw("c", "z", "in_progress"),
    ]))
    .await;
    assert!(
        msg.contains(
            "todos[2] (id \"c\") is in_progress but todos[0] (id \"a\") already is; \
             at most one item may be in_progress"
        ),
        "{msg}"
    );
}

#[tokio::test]
async fn more_than_the_maximum_items_are_rejected_and_the_maximum_is_accepted() {
    assert_eq!(MAX_TODOS, 100);
    let items = |n: usize| -> Vec<Value> {
        (0..n)
            .map(|i| raw(&format!("t{i}"), "step", "pending"))
            .collect()
    };
    let msg = rejected(&list(items(101))).await;
    assert!(
        msg.contains("the list has 101 items; at most 100 are allowed"),
        "{msg}"
    );

    let h = TodoHarness::new();
    let out = h.write_raw(&list(items(100))).await;
    assert!(!out.is_error, "{}", out.content);
    assert_eq!(h.store.snapshot().len(), 100);
    assert!(out
        .content
        .starts_with("Todo list (0 of 100 completed):\n[ ] t0: step\n"));
}

#[tokio::test]
async fn arguments_that_are_not_json_are_rejected() {
    for bad in ["{\"todos\": [", "todos: []", "{'todos': []}"] {
        let msg = rejected(bad).await;
        assert!(
            msg.contains("`todo_write`") && msg.contains("not valid JSON"),
            "{bad}: {msg}"
        );
    }
    // Replay sees the same rule through the shared parser.
    assert!(matches!(
        parse_todo_write("{\"todos\": ["),
        Err(TodoError::NotJson(_))
    ));
}

#[tokio::test]
async fn arguments_of_the_wrong_shape_are_rejected() {
    let cases: &[(&str, &str)] = &[
        ("[]", "expected an object {\"todos\": [...]}: got an array"),
        ("{}", "the field \"todos\" is missing"),
        ("{\"items\": []}", "the field \"todos\" is missing"),
        ("{\"todos\": {}}", "\"todos\" must be an array"),
        ("{\"todos\": \"a, b\"}", "\"todos\" must be an array"),
        (
            "{\"todos\": [\"a\"]}",
            "todos[0]: expected an object, got a string",
        ),
        (
            "{\"todos\": [{\"id\": \"a\", \"status\": \"pending\"}]}",
            "todos[0]: \"content\" is missing",
        ),
        (
            "{\"todos\": [{\"id\": 7, \"content\": \"x\", \"status\": \"pending\"}]}",
            "todos[0]: \"id\" must be a string, got a number",
        ),
        ("null", "expected an object {\"todos\": [...]}: got null"),
    ];
    for (args, expected) in cases {
        let msg = rejected(args).await;
        assert!(msg.starts_with("todo_write rejected: "), "{args}: {msg}");
        assert!(
            msg.contains(expected),
            "{args}: expected {expected:?} in {msg}"
        );
    }
}

#[tokio::test]
async fn a_rejected_call_after_several_writes_leaves_the_latest_list() {
    let h = TodoHarness::new();
    h.write_ok(&example_plan()).await;
    let latest = vec![todo("only", "One thing", Pending)];
    h.write_ok(&latest).await;
    let out = h.write_raw(&list(vec![raw("x", "", "pending")])).await;
    assert!(out.is_error);
    assert_eq!(h.store.snapshot(), latest);
}

#[test]
fn replay_parses_to_the_same_list_the_tool_stores() {
    let args = json!({"todos": [
        {"id": "a", "content": "First", "status": "completed", "activeForm": "Doing first"},
        {"id": "b", "content": "Second", "status": "in_progress"}
    ]})
    .to_string();
    let parsed = parse_todo_write(&args).unwrap();
    assert_eq!(
        parsed,
        vec![
            todo("a", "First", pod_tools::TodoStatus::Completed),
            todo("b", "Second", pod_tools::TodoStatus::InProgress),
        ]
    );
    assert_eq!(
        parse_todo_write(&list(vec![
            raw("a", "x", "pending"),
            raw("a", "y", "pending")
        ])),
        Err(TodoError::DuplicateId {
            id: "a".into(),
            first: 0,
            second: 1
        })
    );
}
