//! The approval policy in `pre_tool_call`: allow, deny, ask with and
//! without an approver, and "always" answers that last the session.

use crate::support::{calls_of, result_of, ScriptedApprover, TestPod};
use pod::{ApprovalDecision, ApprovalFlags, ApprovalPolicy, Pod, PodConfig, ToolPolicy};
use pod_llm::{validate_history, ScriptStep};
use pod_worker::TurnEndReason;
use serde_json::json;
use std::sync::Arc;

fn write(path: &str) -> ScriptStep {
    ScriptStep::tool_call("write_file", json!({"path": path, "content": "x"}))
}

fn pod_with(steps: Vec<ScriptStep>) -> TestPod {
    let mut test = TestPod::new(steps);
    test.workspace_tools = true;
    test
}

/// Results of the session's calls, in order: (content, is_error).
async fn results(pod: &pod::PodHandle) -> Vec<(String, bool)> {
    let history = pod.get_history().await.expect("history");
    validate_history(&history).expect("valid history");
    calls_of(&history)
        .iter()
        .map(|(id, _)| result_of(&history, id))
        .collect()
}

#[test]
fn defaults_allow_reads_and_ask_for_writes_and_bash() {
    let policy = ApprovalPolicy::default();
    for tool in [
        "read_file",
        "list_dir",
        "glob",
        "grep",
        "todo_write",
        "some_custom_tool",
    ] {
        assert_eq!(policy.get(tool), ToolPolicy::Allow, "{tool}");
    }
    for tool in ["write_file", "edit_file", "bash"] {
        assert_eq!(policy.get(tool), ToolPolicy::Ask, "{tool}");
    }
}

#[test]
fn the_policy_reads_from_profile_toml_and_flags_override_it() {
    let mut policy: ApprovalPolicy =
        toml::from_str("default = \"ask\"\n[tools]\nbash = \"deny\"\nread_file = \"allow\"\n")
            .expect("valid policy");
    assert_eq!(policy.get("bash"), ToolPolicy::Deny);
    assert_eq!(policy.get("read_file"), ToolPolicy::Allow);
    assert_eq!(policy.get("write_file"), ToolPolicy::Ask);
    // A partial table keeps the built-in defaults for the rest.
    let partial: ApprovalPolicy = toml::from_str("[tools]\nbash = \"allow\"\n").unwrap();
    assert_eq!(partial.get("bash"), ToolPolicy::Allow);
    assert_eq!(partial.get("edit_file"), ToolPolicy::Ask);
    assert!(toml::from_str::<ApprovalPolicy>("[tools]\nbash = \"maybe\"\n").is_err());

    policy.apply_flags(&ApprovalFlags {
        yes: true,
        allow: vec!["bash".into()],
        deny: vec!["grep".into()],
        ask: vec!["read_file".into()],
    });
    assert_eq!(
        policy.get("write_file"),
        ToolPolicy::Allow,
        "--yes allows asks"
    );
    assert_eq!(
        policy.get("anything"),
        ToolPolicy::Allow,
        "--yes allows the default ask"
    );
    assert_eq!(
        policy.get("bash"),
        ToolPolicy::Allow,
        "--allow beats the file's deny"
    );
    assert_eq!(policy.get("grep"), ToolPolicy::Deny);
    assert_eq!(
        policy.get("read_file"),
        ToolPolicy::Ask,
        "an ask entry holds under --yes"
    );
    assert_eq!("Deny".parse::<ToolPolicy>(), Ok(ToolPolicy::Deny));
    assert!("sometimes".parse::<ToolPolicy>().is_err());
}

#[tokio::test]
async fn a_denied_tool_is_not_run_and_the_model_is_told() {
    let test = pod_with(vec![write("a.txt"), ScriptStep::text("ok")]);
    let mut config: PodConfig = test.config();
    config.approval.set("write_file", ToolPolicy::Deny);
    let pod = Pod::spawn(config).await.expect("spawn");
    pod.prompt("Write").await.expect("turn");
    let results = results(&pod).await;
    assert!(results[0].1);
    assert!(
        results[0].0.contains("denied by the approval policy"),
        "{}",
        results[0].0
    );
    assert!(!test.dir.path().join("a.txt").exists());
    pod.shutdown().await.expect("shutdown");
}

#[tokio::test]
async fn ask_without_an_approver_refuses_and_says_how_to_allow() {
    let test = pod_with(vec![
        ScriptStep::tool_call("bash", json!({"command": "touch made"})),
        ScriptStep::text("ok"),
    ]);
    let pod = test.spawn().await;
    pod.prompt("Run").await.expect("turn");
    let results = results(&pod).await;
    assert!(results[0].1);
    assert!(
        results[0].0.contains("--yes") && results[0].0.contains("--allow bash"),
        "{}",
        results[0].0
    );
    assert!(!test.dir.path().join("made").exists());
    pod.shutdown().await.expect("shutdown");
}

#[tokio::test]
async fn ask_goes_to_the_approver_once_or_always() {
    let test = pod_with(vec![
        write("one.txt"),
        write("two.txt"),
        write("three.txt"),
        write("four.txt"),
        ScriptStep::text("ok"),
    ]);
    let approver = ScriptedApprover::new([
        ApprovalDecision::AllowOnce,
        ApprovalDecision::RejectOnce,
        ApprovalDecision::AllowAlways,
    ]);
    let mut config = test.config();
    config.approver = Some(approver.clone());
    let pod = Pod::spawn(config).await.expect("spawn");
    pod.prompt("Write four files").await.expect("turn");
    // The fourth call is allowed by the "always" answer, without asking.
    assert_eq!(
        approver.summaries(),
        [
            "write_file: one.txt",
            "write_file: two.txt",
            "write_file: three.txt"
        ]
    );
    let results = results(&pod).await;
    assert!(!results[0].1, "{}", results[0].0);
    assert!(
        results[1].1 && results[1].0.contains("the user refused"),
        "{}",
        results[1].0
    );
    assert!(!results[2].1 && !results[3].1);
    let exists = |f: &str| test.dir.path().join(f).exists();
    assert!(exists("one.txt") && !exists("two.txt") && exists("three.txt") && exists("four.txt"));
    let request = approver.requests.lock()[0].clone();
    assert_eq!(request.tool, "write_file");
    assert_eq!(
        request.arguments,
        json!({"path": "one.txt", "content": "x"}).to_string()
    );
    pod.shutdown().await.expect("shutdown");
}

#[tokio::test]
async fn reject_always_refuses_the_rest_of_the_session_without_asking() {
    let test = pod_with(vec![
        write("one.txt"),
        ScriptStep::text("refused"),
        write("two.txt"),
        ScriptStep::text("still refused"),
    ]);
    let approver = ScriptedApprover::new([ApprovalDecision::RejectAlways]);
    let mut config = test.config();
    config.approver = Some(approver.clone());
    let pod = Pod::spawn(config).await.expect("spawn");
    pod.prompt("Write").await.expect("turn");
    pod.prompt("Try again").await.expect("turn");
    assert_eq!(approver.summaries().len(), 1);
    let results = results(&pod).await;
    assert!(
        results[1].1 && results[1].0.contains("denied by the approval policy"),
        "{}",
        results[1].0
    );
    assert!(!test.dir.path().join("two.txt").exists());
    pod.shutdown().await.expect("shutdown");
}

#[tokio::test]
async fn a_cancelled_approval_aborts_the_turn_with_a_valid_history() {
    let test = pod_with(vec![write("a.txt"), ScriptStep::text("never")]);
    let approver = ScriptedApprover::new([]);
    let mut config = test.config();
    config.approver = Some(approver as Arc<dyn pod::Approver>);
    let pod = Pod::spawn(config).await.expect("spawn");
    let outcome = pod.prompt("Write").await.expect("turn");
    assert!(
        matches!(outcome.reason, TurnEndReason::Aborted(_)),
        "{:?}",
        outcome.reason
    );
    let results = results(&pod).await;
    assert!(results[0].1);
    assert!(!test.dir.path().join("a.txt").exists());
    pod.shutdown().await.expect("shutdown");
}
