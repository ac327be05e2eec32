//! The workspace tools inside a Pod: registered by default, the file tracker
//! rebuilt on resume, and "read required" carried over a compaction.

use crate::support::{calls_of, result_of, wait_for_event, TestPod};
use pod::{ApprovalDecision, ApprovalPolicy, Pod, PodConfig, PodEvent, ToolPolicy};
use pod_llm::{validate_history, ItemKind, ScriptStep, ScriptedProvider, SystemKind};
use serde_json::json;
use std::sync::Arc;

/// A test pod with the workspace tools and every tool allowed.
fn workspace_pod(steps: Vec<ScriptStep>) -> TestPod {
    let mut test = TestPod::new(steps);
    test.workspace_tools = true;
    test
}

fn allow_all(test: &TestPod) -> PodConfig {
    let mut config = test.config();
    config.approval = ApprovalPolicy::all(ToolPolicy::Allow);
    config
}

fn read(path: &str) -> ScriptStep {
    ScriptStep::tool_call("read_file", json!({"path": path}))
}

fn edit(path: &str, old: &str, new: &str) -> ScriptStep {
    ScriptStep::tool_call(
        "edit_file",
        json!({"path": path, "old_string": old, "new_string": new}),
    )
}

#[tokio::test]
async fn the_pod_registers_the_workspace_tools_rooted_at_its_workspace() {
    let test = workspace_pod(vec![
        read("notes.txt"),
        edit("notes.txt", "draft", "final"),
        ScriptStep::text("Edited."),
    ]);
    std::fs::write(test.dir.path().join("notes.txt"), "a draft\n").unwrap();
    let pod = Pod::spawn(allow_all(&test)).await.expect("spawn");
    pod.prompt("Finalise the notes").await.expect("turn");
    assert_eq!(
        std::fs::read_to_string(test.dir.path().join("notes.txt")).unwrap(),
        "a final\n"
    );
    let names: Vec<String> = test.model.requests()[0]
        .tools
        .iter()
        .map(|t| t.name.clone())
        .collect();
    for tool in pod_tools::WORKSPACE_TOOLS {
        assert!(
            names.iter().any(|n| n == tool),
            "{tool} missing from {names:?}"
        );
    }
    pod.shutdown().await.expect("shutdown");
}

#[tokio::test]
async fn workspace_tools_can_be_turned_off() {
    let test = TestPod::new(vec![ScriptStep::text("Hi.")]);
    let pod = test.spawn().await;
    pod.prompt("Hi").await.expect("turn");
    let names: Vec<String> = test.model.requests()[0]
        .tools
        .iter()
        .map(|t| t.name.clone())
        .collect();
    assert!(!names.iter().any(|n| n == "read_file"), "{names:?}");
    pod.shutdown().await.expect("shutdown");
}

#[tokio::test]
async fn the_file_tracker_is_rebuilt_on_resume() {
    let test = workspace_pod(vec![
        read("a.txt"),
        // Refused by the user: it changes nothing in the tracker.
        read("b.txt"),
        ScriptStep::text("Read them."),
        // After the restart, without reading again:
        edit("a.txt", "alpha", "ALPHA"),
        edit("b.txt", "beta", "BETA"),
        ScriptStep::text("Done."),
    ]);
    std::fs::write(test.dir.path().join("a.txt"), "alpha").unwrap();
    std::fs::write(test.dir.path().join("b.txt"), "beta").unwrap();
    let approver = crate::support::ScriptedApprover::new([
        ApprovalDecision::AllowOnce,
        ApprovalDecision::RejectOnce,
    ]);
    let mut config = allow_all(&test);
    config.approval.set("read_file", ToolPolicy::Ask);
    config.approver = Some(approver.clone());
    let pod = Pod::spawn(config).await.expect("spawn");
    pod.prompt("Read the files").await.expect("turn");
    assert_eq!(
        approver.summaries(),
        ["read_file: a.txt", "read_file: b.txt"]
    );
    let id = pod.session_id();
    pod.shutdown().await.expect("shutdown");

    let resumed = Pod::resume(id, allow_all(&test)).await.expect("resume");
    resumed.prompt("Now edit them").await.expect("turn");
    let history = resumed.get_history().await.expect("history");
    let calls = calls_of(&history);
    let (a, a_error) = result_of(&history, &calls[2].0);
    assert!(!a_error, "{a}");
    assert_eq!(
        std::fs::read_to_string(test.dir.path().join("a.txt")).unwrap(),
        "ALPHA"
    );
    let (b, b_error) = result_of(&history, &calls[3].0);
    assert!(b_error && b.contains("has not been read"), "{b}");
    assert_eq!(
        std::fs::read_to_string(test.dir.path().join("b.txt")).unwrap(),
        "beta"
    );
    resumed.shutdown().await.expect("shutdown");
}

#[tokio::test]
async fn after_a_compaction_files_must_be_read_again_and_the_next_request_says_so() {
    let bulky = |n: usize| {
        ScriptStep::tool_call(
            "echo",
            json!({"text": format!("{n}: {}", "data ".repeat(60))}),
        )
    };
    let mut steps = vec![read("a.txt")];
    steps.extend((0..4).map(bulky));
    steps.push(ScriptStep::text("Read it."));
    steps.push(edit("a.txt", "alpha", "omega"));
    steps.push(read("a.txt"));
    steps.push(edit("a.txt", "alpha", "omega"));
    steps.push(ScriptStep::text("Edited."));
    let test = workspace_pod(steps);
    std::fs::write(test.dir.path().join("a.txt"), "alpha").unwrap();
    let compactor =
        ScriptedProvider::from_steps(vec![ScriptStep::text("Summary: a.txt was read.")]);
    let mut config = allow_all(&test);
    config.compaction.tail_tokens = 50;
    config.compact_provider = Some(Arc::new(compactor.clone()));
    let pod = Pod::spawn(config.clone()).await.expect("spawn");
    pod.prompt("Read a.txt").await.expect("turn");
    pod.compact().await.expect("compaction");
    pod.prompt("Edit a.txt").await.expect("turn");

    let requests = test.model.requests();
    let first_after = requests
        .iter()
        .find(|r| {
            matches!(
                &r.history[0].kind,
                ItemKind::System {
                    kind: SystemKind::Summary,
                    ..
                }
            )
        })
        .expect("a request after the compaction");
    let carried: Vec<&str> = first_after
        .history
        .iter()
        .filter_map(|item| match &item.kind {
            ItemKind::System {
                kind: SystemKind::CarryOver,
                text,
            } => Some(text.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(carried.len(), 1, "{carried:?}");
    assert!(carried[0].contains("Read these files again") && carried[0].contains("- a.txt\n"));

    let history = pod.get_history().await.expect("history");
    validate_history(&history).expect("valid");
    let calls = calls_of(&history);
    let edits: Vec<&(String, String)> = calls.iter().filter(|(_, n)| n == "edit_file").collect();
    let (refused, is_error) = result_of(&history, &edits[0].0);
    assert!(is_error && refused.contains("compacted"), "{refused}");
    let (done, is_error) = result_of(&history, &edits[1].0);
    assert!(!is_error, "{done}");
    assert_eq!(
        std::fs::read_to_string(test.dir.path().join("a.txt")).unwrap(),
        "omega"
    );
    let id = pod.session_id();
    pod.shutdown().await.expect("shutdown");

    // Replay agrees: a resumed session knows a.txt as read after the re-read.
    let test2 = TestPod {
        model: ScriptedProvider::from_steps(vec![
            edit("a.txt", "omega", "delta"),
            ScriptStep::text("ok"),
        ]),
        ..workspace_pod(vec![])
    };
    let mut config = allow_all(&test2);
    config.home = test.home();
    config.workspace = test.dir.path().to_path_buf();
    let resumed = Pod::resume(id, config).await.expect("resume");
    resumed.prompt("Again").await.expect("turn");
    assert_eq!(
        std::fs::read_to_string(test.dir.path().join("a.txt")).unwrap(),
        "delta"
    );
    resumed.shutdown().await.expect("shutdown");
}

#[tokio::test]
async fn cancelling_a_running_bash_command_leaves_a_valid_history() {
    let test = workspace_pod(vec![
        ScriptStep::tool_call("bash", json!({"command": "echo started; sleep 1000"})),
        ScriptStep::text("never reached"),
    ]);
    let pod = Pod::spawn(allow_all(&test)).await.expect("spawn");
    let mut events = pod.subscribe();
    let turn = {
        let pod = pod.clone();
        tokio::spawn(async move { pod.prompt("Run it").await })
    };
    wait_for_event(
        &mut events,
        |e| matches!(e, PodEvent::ToolCallStarted { name, .. } if name == "bash"),
    )
    .await;
    pod.cancel().await.expect("cancel");
    let outcome = turn.await.expect("join").expect("turn");
    assert_eq!(outcome.reason, pod_worker::TurnEndReason::Cancelled);
    let history = pod.get_history().await.expect("history");
    validate_history(&history).expect("valid history after cancel");
    let calls = calls_of(&history);
    let (content, is_error) = result_of(&history, &calls[0].0);
    assert!(
        is_error && content.to_lowercase().contains("cancel"),
        "{content}"
    );
    pod.shutdown().await.expect("shutdown");
}
