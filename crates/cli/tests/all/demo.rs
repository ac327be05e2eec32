//! `pod demo` works from a clean home and leaves a finished session.

use crate::support::*;
use predicates::prelude::*;

#[test]
fn demo_succeeds_from_a_clean_home_and_its_session_is_done() {
    let env = TestEnv::new();
    let out = env.pod().arg("demo").output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for stage in [
        "plans 5 steps",
        "write_file: report.sh, bash: sh report.sh",
        "reminds it",
        "read_file: report.sh, edit_file: report.sh",
        "kill -9",
        "todos survived",
        "bash: sh test.sh",
        "compacted",
        "finished: 5 of 5",
        // The demo checked the edited file's content and `pod show --json`.
        "checked: report.sh has every edit, pod show --json lists 5 of 5 completed",
    ] {
        assert!(stdout.contains(stage), "no stage {stage:?} in:\n{stdout}");
    }
    // Exactly the one compaction it narrates, and no failed ones.
    assert_eq!(stdout.matches("compacted ~").count(), 1, "{stdout}");
    assert!(!stdout.contains("compaction failed"), "{stdout}");
    // One line per stage.
    assert_eq!(stdout.matches('▸').count(), 13, "{stdout}");

    let sessions = env.sessions_json();
    assert_eq!(sessions.len(), 1);
    let id = sessions[0]["id"].as_str().unwrap();
    assert_eq!(sessions[0]["status"], "done");
    assert!(stdout.contains(&format!("pod show {id}")));
    assert!(stdout.contains(sessions[0]["log_path"].as_str().unwrap()));

    let shown = env.show_json(id);
    assert_eq!(statuses(&shown["todos"]), ["completed"; 5]);
    let history = shown["history"].as_array().unwrap();
    let system_kinds: Vec<&str> = history
        .iter()
        .filter(|item| item["type"] == "system")
        .map(|item| item["kind"].as_str().unwrap())
        .collect();
    assert!(system_kinds.contains(&"reminder"), "{system_kinds:?}");
    assert!(system_kinds.contains(&"summary"), "{system_kinds:?}");
    // The crash left a call unanswered or a request unanswered; either way
    // the history the model sees is valid again.
    // Every tool call worked: the edits, the test run, the reads.
    let tool_results: Vec<&serde_json::Value> = shown["history"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|item| item["type"] == "tool_result")
        .collect();
    assert!(tool_results.len() >= 15, "{tool_results:?}");
    for result in &tool_results {
        assert_ne!(result["is_error"], true, "{result}");
    }
    let history: Vec<pod_llm::Item> = serde_json::from_value(shown["history"].clone()).unwrap();
    pod_llm::validate_history(&history).unwrap();

    env.pod()
        .args(["show", id])
        .assert()
        .success()
        .stdout(predicate::str::contains("──── compacted"))
        .stdout(predicate::str::contains("⏰ reminder"));
}
