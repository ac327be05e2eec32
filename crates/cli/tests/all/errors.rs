//! Usage errors exit 2 with clap's message; runtime errors exit 1 with one
//! line and a hint.

use crate::support::TestEnv;
use predicates::prelude::*;

#[test]
fn an_unknown_flag_exits_2_and_names_it() {
    let env = TestEnv::new();
    env.pod()
        .args(["run", "--bogus", "task"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("unexpected argument '--bogus'"))
        .stderr(predicate::str::contains("Usage: pod run"));
}

#[test]
fn a_bad_value_exits_2_and_lists_the_choices() {
    let env = TestEnv::new();
    env.pod()
        .args(["run", "--durability", "sometimes", "task"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("always, turn, never"));
    env.pod()
        .args(["run", "--max-turns", "3", "task"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("--until-done"));
}

#[test]
fn a_missing_command_exits_2_with_usage() {
    TestEnv::new()
        .pod()
        .assert()
        .code(2)
        .stderr(predicate::str::contains("Usage: pod"));
}

#[test]
fn an_unknown_session_exits_1_with_a_hint() {
    let env = TestEnv::new();
    for command in ["show", "resume", "fork"] {
        env.pod()
            .args([command, "0123abcd"])
            .assert()
            .code(1)
            .stderr(predicate::str::starts_with(
                "error: no session 0123abcd under",
            ))
            .stderr(predicate::str::contains("hint: run `pod sessions`"));
    }
}

#[test]
fn run_without_a_model_says_how_to_choose_one() {
    TestEnv::new()
        .pod()
        .args(["run", "task"])
        .assert()
        .code(1)
        .stderr(predicate::str::contains("error: no model chosen"))
        .stderr(predicate::str::contains("--provider scripted --script"));
}

#[test]
fn help_teaches_with_examples() {
    TestEnv::new()
        .pod()
        .arg("--help")
        .assert()
        .success()
        .stdout(predicate::str::contains("Examples:"))
        .stdout(predicate::str::contains("pod demo"))
        .stdout(predicate::str::contains("130 interrupted"));
}

#[test]
fn diagnostics_go_to_the_log_file_not_stdout() {
    let env = TestEnv::new();
    let log = env.pod_home().join("diagnostics.log");
    let out = env
        .pod()
        .args(["sessions", "--json", "-vvv", "--log-file"])
        .arg(&log)
        .output()
        .unwrap();
    assert!(out.status.success());
    let sessions: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(sessions, serde_json::json!([]));
    assert!(
        out.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(log.is_file());
}
