//! The FileTracker: changed only by committed results, rebuilt from logged
//! calls and results, and marked "read required" after a compaction.

use crate::workspace_support::Ws;
use pod_llm::{Item, ItemKind, ToolCall};
use pod_tools::{FileTracker, Workspace};
use pod_worker::{ToolContext, ToolOutput, ToolRegistry, ToolState, ToolStates};
use serde_json::json;
use std::sync::Arc;
use tokio_util::sync::CancellationToken;

fn call(id: &str, name: &str, args: serde_json::Value) -> Item {
    Item::new(ItemKind::Assistant {
        text: String::new(),
        reasoning: None,
        tool_calls: vec![ToolCall {
            id: id.into(),
            name: name.into(),
            arguments: args.to_string(),
        }],
        usage: None,
    })
}

fn result(id: &str, out: &ToolOutput) -> Item {
    Item::new(ItemKind::ToolResult {
        call_id: id.into(),
        content: out.content.clone(),
        is_error: out.is_error,
        meta: out.meta.as_ref().map(pod_llm::Meta::from),
    })
}

/// Runs a tool call and returns its call and result items, as the log has them.
async fn logged(ws: &Ws, id: &str, name: &str, args: serde_json::Value) -> [Item; 2] {
    let out = ws.call(name, args.clone()).await;
    [call(id, name, args), result(id, &out)]
}

#[tokio::test]
async fn observe_rebuilds_the_tracker_from_logged_calls_and_results() {
    let ws = Ws::new();
    ws.put("a.txt", "alpha");
    ws.put("b.txt", "beta");
    let mut log = Vec::new();
    log.extend(logged(&ws, "1", "read_file", json!({"path": "a.txt"})).await);
    log.extend(
        logged(
            &ws,
            "2",
            "write_file",
            json!({"path": "c.txt", "content": "gamma"}),
        )
        .await,
    );
    // Refused (b.txt was not read): changes nothing.
    log.extend(
        logged(
            &ws,
            "3",
            "edit_file",
            json!({"path": "b.txt", "old_string": "b", "new_string": "B"}),
        )
        .await,
    );
    // A call the approval policy skipped: an error result without meta.
    log.push(call("4", "read_file", json!({"path": "b.txt"})));
    log.push(Item::tool_result(
        "4",
        "denied by the approval policy",
        true,
    ));
    // Another tool's result with file-shaped meta is not ours.
    log.push(call("5", "other_tool", json!({})));
    log.push(result(
        "5",
        &ToolOutput::ok("x").with_meta(json!({"file": {"path": "b.txt", "hash": "h", "size": 1}})),
    ));

    let replayed = FileTracker::new();
    let mut states = states_of(&replayed);
    for item in &log {
        states.observe(item);
    }
    for path in ["a.txt", "c.txt"] {
        assert_eq!(replayed.stamp(path), ws.tracker().stamp(path), "{path}");
        assert!(replayed.stamp(path).is_some(), "{path}");
    }
    assert_eq!(replayed.stamp("b.txt"), None);

    // A resumed session edits a file it read before the restart...
    let resumed = Workspace::new(ws.root(), replayed).unwrap();
    let mut tools = ToolRegistry::new();
    resumed.register(&mut tools);
    let ctx = || ToolContext {
        call_id: "r".into(),
        cancel: CancellationToken::new(),
    };
    let edit = tools.get("edit_file").unwrap();
    let out = edit
        .call_json(
            &json!({"path": "a.txt", "old_string": "alpha", "new_string": "ALPHA"}).to_string(),
            ctx(),
        )
        .await;
    assert!(!out.is_error, "{}", out.content);
    // ...but not one it never read.
    let out = edit
        .call_json(
            &json!({"path": "b.txt", "old_string": "beta", "new_string": "BETA"}).to_string(),
            ctx(),
        )
        .await;
    assert!(
        out.is_error && out.content.contains("has not been read"),
        "{}",
        out.content
    );
}

#[tokio::test]
async fn a_result_without_its_call_is_ignored() {
    let ws = Ws::new();
    ws.put("a.txt", "alpha");
    let out = ws.call("read_file", json!({"path": "a.txt"})).await;
    let tracker = FileTracker::new();
    states_of(&tracker).observe(&result("orphan", &out));
    assert_eq!(tracker.stamp("a.txt"), None);
}

#[tokio::test]
async fn a_result_that_is_never_committed_changes_nothing() {
    let ws = Ws::new();
    ws.put("a.txt", "alpha");
    let out = ws
        .call_uncommitted(
            "read_file",
            json!({"path": "a.txt"}),
            CancellationToken::new(),
        )
        .await;
    assert!(!out.is_error, "{}", out.content);
    assert!(out.meta.is_some(), "the stamp travels in the result");
    assert_eq!(ws.tracker().stamp("a.txt"), None);
    let err = ws
        .err(
            "edit_file",
            json!({"path": "a.txt", "old_string": "alpha", "new_string": "A"}),
        )
        .await;
    assert!(err.contains("has not been read"), "{err}");
}

#[tokio::test]
async fn the_three_file_tools_share_one_state_and_a_compaction_reaches_it() {
    let ws = Ws::new();
    ws.put("a.txt", "alpha");
    ws.ok("read_file", json!({"path": "a.txt"})).await;
    let mut states = ToolStates::of(&ws.tools);
    states.compacted();
    assert_eq!(ws.tracker().read_required(), vec!["a.txt"]);
    states.clear();
    assert!(ws.tracker().known().is_empty());
}

/// The file tools' states over `tracker`, as a Pod registers them.
fn states_of(tracker: &FileTracker) -> ToolStates {
    let state: Arc<dyn ToolState> = Arc::new(tracker.clone());
    let mut states = ToolStates::new();
    for name in ["read_file", "write_file", "edit_file"] {
        states.insert(name, state.clone());
    }
    states
}

#[tokio::test]
async fn mark_read_required_lists_files_and_refuses_edits_until_read_again() {
    let ws = Ws::new();
    ws.put("b.txt", "beta");
    ws.put("a.txt", "alpha");
    ws.ok("read_file", json!({"path": "b.txt"})).await;
    ws.ok("read_file", json!({"path": "a.txt"})).await;
    assert_eq!(ws.tracker().mark_read_required(), vec!["a.txt", "b.txt"]);
    assert_eq!(ws.tracker().read_required(), vec!["a.txt", "b.txt"]);
    let err = ws
        .err(
            "edit_file",
            json!({"path": "a.txt", "old_string": "alpha", "new_string": "A"}),
        )
        .await;
    assert!(
        err.contains("compacted") && err.contains("read_file"),
        "{err}"
    );
    ws.ok("read_file", json!({"path": "a.txt"})).await;
    assert_eq!(ws.tracker().read_required(), vec!["b.txt"]);
    ws.ok(
        "edit_file",
        json!({"path": "a.txt", "old_string": "alpha", "new_string": "A"}),
    )
    .await;
    assert_eq!(ws.get("a.txt"), "A");
}
