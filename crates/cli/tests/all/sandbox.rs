//! The sandbox through the real `pod` binary: on by default (bash runs
//! without asking, confined by the kernel), recorded with the session so a
//! resume keeps its rules, set by flags and by `[sandbox]`, shown by
//! `pod show`. Needs Landlock, which this project's machines have.

use crate::support::*;
use serde_json::{json, Value};

/// A bash call that writes inside the workspace and outside it, then an
/// answer; returns the script's path.
fn inside_and_outside(env: &TestEnv, name: &str) -> std::path::PathBuf {
    env.script(
        name,
        &script(vec![
            call(
                "bash",
                json!({"command": "echo in > inside.txt; touch ../outside.txt"}),
            ),
            say("Done."),
        ]),
    )
}

fn run_json(env: &TestEnv, script: &std::path::Path, args: &[&str]) -> String {
    let out = env
        .pod()
        .args(["run", "--json", "--script"])
        .arg(script)
        .args(args)
        .arg("Write two files")
        .output()
        .unwrap();
    assert_success(&out);
    session_id(&ndjson(&out.stdout))
}

fn bash_result(env: &TestEnv, id: &str) -> String {
    let history = env.show_json(id)["history"].as_array().unwrap().clone();
    history
        .iter()
        .filter(|item| item["type"] == "tool_result")
        .map(Value::to_string)
        .next_back()
        .expect("a tool result")
}

fn outside(env: &TestEnv) -> std::path::PathBuf {
    env.workspace().parent().unwrap().join("outside.txt")
}

#[test]
fn by_default_bash_runs_without_asking_and_writes_only_in_the_workspace() {
    let env = TestEnv::new();
    let script = inside_and_outside(&env, "s.json");
    // No --yes, not a terminal: without the sandbox this would be refused.
    let id = run_json(&env, &script, &[]);
    assert_eq!(
        std::fs::read_to_string(env.workspace().join("inside.txt")).unwrap(),
        "in\n"
    );
    assert!(!outside(&env).exists());
    let result = bash_result(&env, &id);
    assert!(result.contains("Permission denied"), "{result}");
    assert!(result.contains("[sandbox]"), "{result}");
    assert!(result.contains("workspace-write, network off"), "{result}");

    let show = env.pod().args(["show", &id]).output().unwrap();
    let show = String::from_utf8_lossy(&show.stdout);
    assert!(
        show.contains("sandbox    workspace-write, network off"),
        "{show}"
    );
}

#[test]
fn a_resume_keeps_the_recorded_sandbox_unless_told_otherwise() {
    let env = TestEnv::new();
    let script = env.script(
        "s.json",
        &script(vec![
            call("bash", json!({"command": "echo one > one.txt"})),
            say("Tried."),
            call("bash", json!({"command": "echo two > two.txt"})),
            say("Tried again."),
            call("bash", json!({"command": "echo three > three.txt"})),
            say("Done."),
        ]),
    );
    // read-only: even the workspace is out of reach.
    let id = run_json(&env, &script, &["--sandbox", "read-only"]);
    assert!(!env.workspace().join("one.txt").exists());
    // A resume with no flags keeps read-only...
    let out = env
        .pod()
        .args(["resume", "--json", &id, "Try again"])
        .output()
        .unwrap();
    assert_success(&out);
    assert!(!env.workspace().join("two.txt").exists());
    assert!(bash_result(&env, &id).contains("commands may not write files"));
    // ...and --sandbox widens it for that run.
    let out = env
        .pod()
        .args([
            "resume",
            "--json",
            "--sandbox",
            "workspace-write",
            &id,
            "Once more",
        ])
        .output()
        .unwrap();
    assert_success(&out);
    assert!(env.workspace().join("three.txt").exists());
}

#[test]
fn the_config_file_sets_the_mode_and_off_restores_asking() {
    let env = TestEnv::new();
    env.config_file("[sandbox]\nmode = \"strict\"\n");
    std::fs::write(
        env.workspace().parent().unwrap().join("secret.txt"),
        "s3cret",
    )
    .unwrap();
    let script = env.script(
        "s.json",
        &script(vec![
            call("bash", json!({"command": "cat ../secret.txt"})),
            say("Done."),
        ]),
    );
    let id = run_json(&env, &script, &[]);
    let result = bash_result(&env, &id);
    assert!(!result.contains("s3cret"), "{result}");
    assert!(
        result.contains("Permission denied") && result.contains("strict"),
        "{result}"
    );

    // --sandbox off: bash asks again, and nobody can answer here.
    let id = run_json(
        &env,
        &inside_and_outside(&env, "t.json"),
        &["--sandbox", "off"],
    );
    assert!(!outside(&env).exists());
    assert!(bash_result(&env, &id).contains("needs the user's approval"));
}

#[test]
fn a_bad_sandbox_flag_or_table_is_refused_with_the_choices() {
    let env = TestEnv::new();
    let out = env
        .pod()
        .args(["run", "--sandbox", "tight", "task"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("unknown sandbox mode `tight`"), "{stderr}");
    env.config_file("[sandbox]\nnetwork = \"maybe\"\n");
    let script = inside_and_outside(&env, "s.json");
    let out = env
        .pod()
        .args(["run", "--script"])
        .arg(&script)
        .arg("task")
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("[sandbox]") && stderr.contains("network = true | false"),
        "{stderr}"
    );
}
