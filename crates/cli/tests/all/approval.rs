//! The approval policy from the command line and the config file: `--yes`,
//! `--allow`, `--deny`, `[approval]`, and the refusal a non-interactive run
//! gives the model. (Under the default sandbox `bash` runs without asking:
//! `sandbox.rs`; these tests turn it off where they need bash to ask.)

use crate::support::*;
use predicates::prelude::*;
use serde_json::{json, Value};

/// A write of `hello.txt`, then a `bash` that creates `ran`, then an answer.
fn write_then_bash(env: &TestEnv) -> std::path::PathBuf {
    env.script(
        "s.json",
        &script(vec![
            call(
                "write_file",
                json!({"path": "hello.txt", "content": "hello\n"}),
            ),
            call("bash", json!({"command": "touch ran"})),
            say("Done."),
        ]),
    )
}

/// `pod run --json ARGS --script S task` (stdin is not a terminal); the
/// session's history as JSON.
fn run(env: &TestEnv, args: &[&str]) -> Vec<Value> {
    let script = write_then_bash(env);
    let out = env
        .pod()
        .args(["run", "--script"])
        .arg(&script)
        .args(args)
        .arg("Write hello.txt and run something")
        .output()
        .unwrap();
    assert_success(&out);
    let id = env.sessions_json()[0]["id"].as_str().unwrap().to_string();
    env.show_json(&id)["history"].as_array().unwrap().clone()
}

/// The tool results the model saw, in order.
fn results(history: &[Value]) -> Vec<String> {
    history
        .iter()
        .filter(|item| item["type"] == "tool_result")
        .map(|item| item.to_string())
        .collect()
}

#[test]
fn yes_lets_write_file_and_bash_run() {
    let env = TestEnv::new();
    let history = run(&env, &["--yes", "--json"]);
    assert_eq!(
        std::fs::read_to_string(env.workspace().join("hello.txt")).unwrap(),
        "hello\n"
    );
    assert!(env.workspace().join("ran").exists());
    for result in results(&history) {
        assert!(!result.contains("Not run"), "{result}");
    }
}

#[test]
fn without_yes_a_non_interactive_run_refuses_and_tells_the_model() {
    let env = TestEnv::new();
    // Human output, stdin not a terminal: nobody can answer. Without the
    // sandbox, bash asks too.
    let history = run(&env, &["--sandbox", "off"]);
    assert!(!env.workspace().join("hello.txt").exists());
    assert!(!env.workspace().join("ran").exists());
    let results = results(&history);
    assert_eq!(results.len(), 2);
    for result in &results {
        assert!(result.contains("needs the user's approval"), "{result}");
        assert!(result.contains("--yes"), "{result}");
    }
}

#[test]
fn deny_wins_over_yes() {
    let env = TestEnv::new();
    let history = run(&env, &["--yes", "--deny", "bash", "--json"]);
    assert!(env.workspace().join("hello.txt").exists());
    assert!(!env.workspace().join("ran").exists());
    let results = results(&history);
    assert!(!results[0].contains("Not run"), "{}", results[0]);
    assert!(
        results[1].contains("denied by the approval policy"),
        "{}",
        results[1]
    );
}

#[test]
fn allow_sets_one_tool() {
    let env = TestEnv::new();
    let history = run(
        &env,
        &["--allow", "write_file", "--sandbox", "off", "--json"],
    );
    assert!(env.workspace().join("hello.txt").exists());
    assert!(!env.workspace().join("ran").exists());
    assert!(results(&history)[1].contains("needs the user's approval"));
}

#[test]
fn the_approval_table_of_the_config_file_is_honoured_and_flags_override_it() {
    let env = TestEnv::new();
    env.config_file("[approval.tools]\nwrite_file = \"allow\"\nbash = \"deny\"\n");
    let history = run(&env, &["--json"]);
    assert!(env.workspace().join("hello.txt").exists());
    assert!(!env.workspace().join("ran").exists());
    assert!(results(&history)[1].contains("denied by the approval policy"));

    // A second session: --allow on the command line beats the file's deny.
    std::fs::remove_file(env.workspace().join("hello.txt")).unwrap();
    let script = write_then_bash(&env);
    env.pod()
        .args(["run", "--json", "--allow", "bash", "--script"])
        .arg(&script)
        .arg("again")
        .assert()
        .success();
    assert!(env.workspace().join("ran").exists());
}

#[test]
fn an_unknown_tool_is_an_error_with_the_list_of_tools() {
    let env = TestEnv::new();
    let script = write_then_bash(&env);
    env.pod()
        .args(["run", "--allow", "bsh", "--script"])
        .arg(&script)
        .arg("task")
        .assert()
        .code(1)
        .stderr(predicate::str::contains("unknown tool `bsh`"))
        .stderr(predicate::str::contains("hint: the tools are:"));
    env.config_file("[approval.tools]\nbash = \"sometimes\"\n");
    env.pod()
        .args(["run", "--script"])
        .arg(&script)
        .arg("task")
        .assert()
        .code(1)
        .stderr(predicate::str::contains("invalid [approval] table"));
}
