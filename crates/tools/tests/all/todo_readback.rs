//! The readback the model sees, byte for byte.

use crate::harness::{example_plan, todo, TodoHarness};
use pod_tools::TodoStatus::{Completed, InProgress, Pending};
use serde_json::json;

#[tokio::test]
async fn readback_of_the_issue_example_is_exact() {
    let h = TodoHarness::new();
    let out = h
        .write(json!({"todos": [
            {"id": "inventory", "content": "List every test file", "status": "completed"},
            {"id": "config", "content": "Add the config file", "status": "in_progress"},
            {"id": "rewrite", "content": "Rewrite the mocks", "status": "pending"}
        ]}))
        .await;
    assert!(!out.is_error);
    assert_eq!(
        out.content,
        "Todo list (1 of 3 completed):\n\
         [x] inventory: List every test file\n\
         [>] config: Add the config file\n\
         [ ] rewrite: Rewrite the mocks"
    );
    insta::assert_snapshot!(out.content);
}

#[tokio::test]
async fn readback_names_unfinished_items_that_were_dropped() {
    let h = TodoHarness::new();
    h.write_ok(&[
        todo("inventory", "List every test file", Completed),
        todo("config", "Add the config file", InProgress),
        todo("rewrite", "Rewrite the mocks", Pending),
        todo("docs", "Update the docs", Pending),
    ])
    .await;
    // Drops one in-progress, one pending and one completed item.
    let out = h
        .write_ok(&[todo("docs", "Update the docs", InProgress)])
        .await;
    assert_eq!(
        out,
        "Todo list (0 of 1 completed):\n\
         [>] docs: Update the docs\n\
         Removed while unfinished: config, rewrite"
    );
    insta::assert_snapshot!(out);
    // The drop is allowed: the store holds the new list.
    assert_eq!(
        h.store.snapshot(),
        vec![todo("docs", "Update the docs", InProgress)]
    );
}

#[tokio::test]
async fn dropping_only_completed_items_adds_no_line() {
    let h = TodoHarness::new();
    h.write_ok(&example_plan()).await;
    let out = h
        .write_ok(&[
            todo("config", "Add the config file", Completed),
            todo("rewrite", "Rewrite the mocks", InProgress),
        ])
        .await;
    assert_eq!(
        out,
        "Todo list (1 of 2 completed):\n[x] config: Add the config file\n[>] rewrite: Rewrite the mocks"
    );
    assert!(!out.contains("Removed"));
}

#[tokio::test]
async fn clearing_a_list_with_unfinished_items_names_them() {
    let h = TodoHarness::new();
    h.write_ok(&example_plan()).await;
    let out = h.write(json!({"todos": []})).await;
    assert_eq!(
        out.content,
        "Todo list is empty.\nRemoved while unfinished: config, rewrite"
    );
}

#[tokio::test]
async fn a_dropped_item_is_named_only_once() {
    let h = TodoHarness::new();
    h.write_ok(&example_plan()).await;
    let first = h
        .write_ok(&[todo("rewrite", "Rewrite the mocks", InProgress)])
        .await;
    assert!(
        first.ends_with("\nRemoved while unfinished: config"),
        "{first}"
    );
    // The next write compares with the list as it now is.
    let second = h
        .write_ok(&[todo("rewrite", "Rewrite the mocks", Completed)])
        .await;
    assert_eq!(
        second,
        "Todo list (1 of 1 completed):\n[x] rewrite: Rewrite the mocks"
    );
}

#[tokio::test]
async fn readback_of_a_finished_plan() {
    let h = TodoHarness::new();
    let out = h
        .write_ok(&[
            todo("inventory", "List every test file", Completed),
            todo("config", "Add the config file", Completed),
            todo("rewrite", "Rewrite the mocks", Completed),
        ])
        .await;
    insta::assert_snapshot!(out);
}
