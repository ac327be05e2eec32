//! write_file and edit_file: creation, read-before-edit, external changes.

use crate::workspace_support::Ws;
use pod_tools::FileMeta;
use serde_json::json;

#[tokio::test]
async fn write_creates_a_file_and_its_parents_without_a_read() {
    let ws = Ws::new();
    let out = ws
        .call(
            "write_file",
            json!({"path": "new/dir/a.txt", "content": "hello\nworld\n"}),
        )
        .await;
    assert!(!out.is_error, "{}", out.content);
    assert_eq!(out.content, "Created `new/dir/a.txt` (12 bytes, 2 lines).");
    assert_eq!(ws.get("new/dir/a.txt"), "hello\nworld\n");
    let meta = FileMeta::from_value(out.meta.as_ref().expect("meta")).expect("file meta");
    assert_eq!(meta.path, "new/dir/a.txt");
    // The model knows what it wrote: it may now edit without reading.
    ws.ok(
        "edit_file",
        json!({"path": "new/dir/a.txt", "old_string": "world", "new_string": "there"}),
    )
    .await;
    assert_eq!(ws.get("new/dir/a.txt"), "hello\nthere\n");
}

#[tokio::test]
async fn overwriting_an_unread_file_is_refused_until_it_is_read() {
    let ws = Ws::new();
    ws.put("a.txt", "original");
    let err = ws
        .err("write_file", json!({"path": "a.txt", "content": "new"}))
        .await;
    assert!(
        err.contains("has not been read") && err.contains("read_file"),
        "{err}"
    );
    assert_eq!(ws.get("a.txt"), "original");
    ws.ok("read_file", json!({"path": "a.txt"})).await;
    let out = ws
        .ok("write_file", json!({"path": "a.txt", "content": "new"}))
        .await;
    assert!(out.starts_with("Overwrote `a.txt`"), "{out}");
    assert_eq!(ws.get("a.txt"), "new");
}

#[tokio::test]
async fn edit_without_read_is_refused() {
    let ws = Ws::new();
    ws.put("a.txt", "alpha beta");
    let err = ws
        .err(
            "edit_file",
            json!({"path": "a.txt", "old_string": "alpha", "new_string": "gamma"}),
        )
        .await;
    assert!(
        err.starts_with("edit_file refused:") && err.contains("read_file"),
        "{err}"
    );
    assert_eq!(ws.get("a.txt"), "alpha beta");
}

#[tokio::test]
async fn edit_after_an_external_change_is_refused_until_read_again() {
    let ws = Ws::new();
    ws.put("a.txt", "alpha beta");
    ws.ok("read_file", json!({"path": "a.txt"})).await;
    // Someone else (the user, a formatter, a bash command) changes it.
    ws.put("a.txt", "alpha beta gamma");
    let args = json!({"path": "a.txt", "old_string": "alpha", "new_string": "omega"});
    let err = ws.err("edit_file", args.clone()).await;
    assert!(
        err.contains("changed on disk") && err.contains("10 bytes then, 16 bytes now"),
        "{err}"
    );
    assert_eq!(ws.get("a.txt"), "alpha beta gamma");
    let err = ws
        .err("write_file", json!({"path": "a.txt", "content": "x"}))
        .await;
    assert!(err.contains("changed on disk"), "{err}");
    ws.ok("read_file", json!({"path": "a.txt"})).await;
    ws.ok("edit_file", args).await;
    assert_eq!(ws.get("a.txt"), "omega beta gamma");
}

#[tokio::test]
async fn edit_replaces_exactly_one_occurrence_and_reports_its_line() {
    let ws = Ws::new();
    ws.put("a.rs", "fn a() {}\nfn b() {\n    old();\n}\n");
    ws.ok("read_file", json!({"path": "a.rs"})).await;
    let out = ws
        .ok(
            "edit_file",
            json!({"path": "a.rs", "old_string": "    old();", "new_string": "    new();"}),
        )
        .await;
    assert_eq!(out, "Edited `a.rs`: replaced 1 occurrence at line 3.");
    assert_eq!(ws.get("a.rs"), "fn a() {}\nfn b() {\n    new();\n}\n");
}

#[tokio::test]
async fn an_absent_or_ambiguous_old_string_is_refused_and_replace_all_replaces_all() {
    let ws = Ws::new();
    ws.put("a.txt", "x = 1\nx = 1\n");
    ws.ok("read_file", json!({"path": "a.txt"})).await;
    let err = ws
        .err(
            "edit_file",
            json!({"path": "a.txt", "old_string": "y = 1", "new_string": "y = 2"}),
        )
        .await;
    assert!(
        err.contains("not found") && err.contains("exactly"),
        "{err}"
    );
    let err = ws
        .err(
            "edit_file",
            json!({"path": "a.txt", "old_string": "x = 1", "new_string": "x = 2"}),
        )
        .await;
    assert!(
        err.contains("occurs 2 times") && err.contains("replace_all"),
        "{err}"
    );
    assert_eq!(ws.get("a.txt"), "x = 1\nx = 1\n");
    let out = ws
        .ok(
            "edit_file",
            json!({"path": "a.txt", "old_string": "x = 1", "new_string": "x = 2", "replace_all": true}),
        )
        .await;
    assert!(out.contains("replaced 2 occurrences"), "{out}");
    assert_eq!(ws.get("a.txt"), "x = 2\nx = 2\n");
}

#[tokio::test]
async fn edit_refuses_empty_identical_missing_and_directory_targets() {
    let ws = Ws::new();
    ws.put("a.txt", "abc");
    ws.put("d/x", "x");
    ws.ok("read_file", json!({"path": "a.txt"})).await;
    let err = ws
        .err(
            "edit_file",
            json!({"path": "a.txt", "old_string": "", "new_string": "z"}),
        )
        .await;
    assert!(
        err.contains("old_string is empty") && err.contains("write_file"),
        "{err}"
    );
    let err = ws
        .err(
            "edit_file",
            json!({"path": "a.txt", "old_string": "a", "new_string": "a"}),
        )
        .await;
    assert!(err.contains("identical"), "{err}");
    let err = ws
        .err(
            "edit_file",
            json!({"path": "b.txt", "old_string": "a", "new_string": "b"}),
        )
        .await;
    assert!(
        err.contains("does not exist") && err.contains("write_file"),
        "{err}"
    );
    let err = ws
        .err(
            "edit_file",
            json!({"path": "d", "old_string": "a", "new_string": "b"}),
        )
        .await;
    assert!(err.contains("is a directory"), "{err}");
    let err = ws
        .err("write_file", json!({"path": "d", "content": "x"}))
        .await;
    assert!(err.contains("is a directory"), "{err}");
}

#[tokio::test]
async fn a_file_read_through_a_symlink_inside_the_workspace_is_the_same_file() {
    let ws = Ws::new();
    ws.put("real.txt", "one");
    crate::workspace_support::symlink(&ws.root().join("real.txt"), &ws.root().join("link.txt"));
    ws.ok("read_file", json!({"path": "link.txt"})).await;
    ws.ok(
        "edit_file",
        json!({"path": "real.txt", "old_string": "one", "new_string": "two"}),
    )
    .await;
    assert_eq!(ws.get("real.txt"), "two");
}
