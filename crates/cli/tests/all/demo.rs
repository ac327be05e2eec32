//! `pod demo` works from a clean home, leaves nothing among the user's
//! sessions, and with `--keep` a finished session to look at.

use crate::support::*;
use predicates::prelude::*;

#[test]
fn demo_leaves_no_session_in_the_users_home_and_removes_its_directory() {
    let env = TestEnv::new();
    // The user's config file has no say in the demo, not even a broken one.
    env.config_file("[budget\nmax_session_requests = 1\n");
    let out = env.pod().arg("demo").output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}");
    assert!(stdout.contains("finished: 5 of 5"), "{stdout}");
    assert!(
        env.sessions_json().is_empty(),
        "the demo joined the user's sessions"
    );
    assert!(!env.pod_home().join("sessions").exists());
    // Its temporary workspace (named in the first stage) is gone.
    let workspace = stdout
        .split(" in ")
        .nth(1)
        .and_then(|rest| rest.split(", with --yes").next())
        .expect("the first stage names the workspace");
    assert!(workspace.contains("pod-demo-"), "{workspace}");
    assert!(
        !std::path::Path::new(workspace).exists(),
        "{workspace} left behind"
    );
    assert!(stdout.contains("pod demo --keep"), "{stdout}");
}

#[test]
fn demo_succeeds_from_a_clean_home_and_its_kept_session_is_done() {
    let env = TestEnv::new();
    let out = env.pod().args(["demo", "--keep"]).output().unwrap();
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

    assert!(
        env.sessions_json().is_empty(),
        "the demo joined the user's sessions"
    );
    // "see it: POD_HOME=DIR pod show ID"
    let see = stdout
        .lines()
        .find_map(|line| line.strip_prefix("see it: POD_HOME="))
        .expect("the kept demo says how to see it");
    let (demo_home, rest) = see.split_once(' ').unwrap();
    let id = rest.strip_prefix("pod show ").unwrap();
    let demo = |args: &[&str]| {
        let mut cmd = env.pod();
        cmd.env("POD_HOME", demo_home).args(args);
        cmd
    };
    let out = demo(&["sessions", "--json"]).output().unwrap();
    let sessions: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(sessions.as_array().unwrap().len(), 1);
    assert_eq!(sessions[0]["id"], id);
    assert_eq!(sessions[0]["status"], "done");
    assert!(stdout.contains(sessions[0]["log_path"].as_str().unwrap()));

    let out = demo(&["show", id, "--json"]).output().unwrap();
    let shown: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
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

    demo(&["show", id])
        .assert()
        .success()
        .stdout(predicate::str::contains("──── compacted"))
        .stdout(predicate::str::contains("⏰ reminder"));
    // The kept directory is the caller's to remove.
    let kept = std::path::Path::new(demo_home).parent().unwrap();
    std::fs::remove_dir_all(kept).unwrap();
}
