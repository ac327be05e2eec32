//! Whole-list replacement and id identity.

use crate::harness::{example_plan, readback, todo, TodoHarness};
use pod_tools::TodoStatus::{Completed, InProgress, Pending};
use serde_json::json;

#[tokio::test]
async fn a_write_replaces_the_whole_list_in_the_order_sent() {
    let h = TodoHarness::new();
    h.write_ok(&example_plan()).await;
    let next = vec![
        todo("rewrite", "Rewrite the mocks", InProgress),
        todo("inventory", "List every test file", Completed),
        todo("docs", "Document the config", Pending),
    ];
    h.write_ok(&next).await;
    // "config" was not sent, so it is gone; order is the new array's order.
    assert_eq!(h.store.snapshot(), next);
}

#[tokio::test]
async fn an_id_that_existed_keeps_its_identity_and_takes_the_new_fields() {
    let h = TodoHarness::new();
    h.write_ok(&example_plan()).await;
    h.write_ok(&[
        todo("config", "Add the config file and its loader", Completed),
        todo("rewrite", "Rewrite the mocks", InProgress),
    ])
    .await;
    let store = h.store.snapshot();
    assert_eq!(store.len(), 2);
    assert_eq!(store[0].id, "config");
    assert_eq!(store[0].content, "Add the config file and its loader");
    assert_eq!(store[0].status, Completed);
    assert_eq!(store[1], todo("rewrite", "Rewrite the mocks", InProgress));
}

#[tokio::test]
async fn a_new_id_with_old_content_is_a_new_item() {
    let h = TodoHarness::new();
    h.write_ok(&[todo("a", "Write tests", InProgress)]).await;
    let out = h
        .write(json!({"todos": [{"id": "b", "content": "Write tests", "status": "pending"}]}))
        .await;
    // Same text, other id: the old item counts as dropped while unfinished.
    assert_eq!(
        out.content,
        "Todo list (0 of 1 completed):\n[ ] b: Write tests\nRemoved while unfinished: a"
    );
    assert_eq!(h.store.snapshot(), vec![todo("b", "Write tests", Pending)]);
}

#[tokio::test]
async fn an_empty_list_clears_the_store() {
    let h = TodoHarness::new();
    h.write_ok(&[todo("a", "Done already", Completed)]).await;
    let out = h.write(json!({"todos": []})).await;
    assert!(!out.is_error);
    assert_eq!(out.content, "Todo list is empty.");
    assert!(h.store.snapshot().is_empty());
    assert!(!h.store.has_unfinished());
}

#[tokio::test]
async fn unknown_extra_fields_are_ignored() {
    // Models trained on other agents send fields such as these.
    let h = TodoHarness::new();
    let out = h
        .write(json!({
            "todos": [{
                "id": "a",
                "content": "Run the suite",
                "status": "in_progress",
                "priority": "high",
                "activeForm": "Running the suite"
            }],
            "merge": false
        }))
        .await;
    assert!(!out.is_error, "{}", out.content);
    assert_eq!(
        h.store.snapshot(),
        vec![todo("a", "Run the suite", InProgress)]
    );
}

#[tokio::test]
async fn content_is_stored_as_sent_and_not_trimmed() {
    let h = TodoHarness::new();
    let out = h.write_ok(&[todo("a", "  padded  ", Pending)]).await;
    assert_eq!(h.store.snapshot()[0].content, "  padded  ");
    assert_eq!(out, "Todo list (0 of 1 completed):\n[ ] a:   padded  ");
    assert_eq!(out, readback(&h.store.snapshot()));
}

#[tokio::test]
async fn the_list_changes_when_the_result_is_committed_not_before() {
    let h = TodoHarness::new();
    h.write_ok(&example_plan()).await;
    let next = vec![todo("docs", "Document the config", InProgress)];
    let out = h
        .write_uncommitted(&crate::harness::args(&next).to_string())
        .await;
    assert!(!out.is_error, "{}", out.content);
    // The readback shows the new list, but until the result is committed
    // the store (what `get_todos` answers) keeps the one the log has.
    assert!(
        out.content.contains("Document the config"),
        "{}",
        out.content
    );
    assert_eq!(h.store.snapshot(), example_plan());
    h.write_ok(&next).await;
    assert_eq!(h.store.snapshot(), next);
}
