//! Usage errors exit 2 with clap's message; runtime errors exit 1 with one
//! line and a hint.

use crate::support::{assert_success, TestEnv};
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
            .stderr(predicate::str::starts_with("error: no session 0123abcd in"))
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

#[test]
fn a_reader_that_goes_away_ends_show_quietly() {
    use crate::support::{ndjson, script, session_id, write_todos};
    use serde_json::json;
    let env = TestEnv::new();
    // A plan big enough that `show --json` overflows a pipe buffer.
    let todos: Vec<_> = (0..100)
        .map(|i| json!({"id": format!("t{i}"), "content": "x".repeat(900), "status": "pending"}))
        .collect();
    let script = env.script(
        "s.json",
        &script(vec![write_todos(&todos), json!({"text": "ok"})]),
    );
    let out = env
        .pod()
        .args(["run", "--json", "--script"])
        .arg(&script)
        .arg("plan")
        .output()
        .unwrap();
    assert_success(&out);
    let id = session_id(&ndjson(&out.stdout));

    let mut child = env
        .pod_process()
        .args(["show", "--json", &id])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Close the read end at once, like `| head -c 0`.
    drop(child.stdout.take());
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "exit {:?}", out.status);
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        "",
        "no panic, no error line"
    );
}

#[test]
fn a_broken_config_file_shows_the_place_and_how_to_run_without_it() {
    let env = TestEnv::new();
    env.config_file("[profiles.local]\nkind = \"openai\"\nmodel = qwen\n");
    let config = env.config_dir().join("config.toml");
    let script = env.script(
        "s.json",
        &serde_json::json!({"steps": [{"text": "Hello."}]}),
    );
    // Its tables (approval, sandbox, budgets) apply to scripted runs too, so
    // a broken file stops them rather than being skipped.
    let out = env
        .pod()
        .args(["run", "--provider", "scripted", "--script"])
        .arg(&script)
        .arg("hi")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    let path = config.display();
    assert_eq!(
        stderr,
        format!(
            "error: cannot read the config file: invalid config file {path}, line 3, column 9: \
             invalid string; expected `\"`, `'`\n\
             \x20 --> {path}:3:9\n\
             \x20 |\n\
             3 | model = qwen\n\
             \x20 |         ^\n\
             hint: fix {path} (docs/configuration.md lists every setting), or run without a \
             config file: POD_CONFIG=/dev/null pod ...\n"
        )
    );

    // As the hint says.
    let out = env
        .pod()
        .env("POD_CONFIG", "/dev/null")
        .args(["run", "--provider", "scripted", "--script"])
        .arg(&script)
        .arg("hi")
        .output()
        .unwrap();
    assert_success(&out);
    assert!(String::from_utf8_lossy(&out.stdout).contains("Hello."));

    // POD_CONFIG may name another file; one that is not there is an error.
    let other = env.config_dir().join("other.toml");
    std::fs::write(
        &other,
        format!(
            "[profiles.mine]\nkind = \"scripted\"\nscript = \"{}\"\n",
            script.display()
        ),
    )
    .unwrap();
    let out = env
        .pod()
        .env("POD_CONFIG", &other)
        .args(["run", "--profile", "mine", "hi"])
        .output()
        .unwrap();
    assert_success(&out);
    let missing = env.config_dir().join("nowhere.toml");
    env.pod()
        .env("POD_CONFIG", &missing)
        .args(["run", "--provider", "scripted", "--script"])
        .arg(&script)
        .arg("hi")
        .assert()
        .code(1)
        .stderr(predicate::str::contains(format!(
            "error: POD_CONFIG names {}, which does not exist",
            missing.display()
        )))
        .stderr(predicate::str::contains("set it to /dev/null for none"));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_refused_key_names_its_variable_and_an_empty_session_can_be_dropped() {
    use pod_testkit::server::{LoopbackServer, Reply};
    let server = LoopbackServer::start(vec![Reply::status(
        401,
        r#"{"error": {"message": "Incorrect API key provided", "type": "invalid_request_error"}}"#,
    )])
    .await;
    let env = TestEnv::new();
    env.config_file(&format!(
        "[profiles.work]\nkind = \"openai\"\nbase_url = \"{}\"\nmodel = \"m\"\napi_key_env = \"WORK_KEY\"\n",
        server.url("/v1")
    ));
    let mut cmd = env.pod_process();
    cmd.env("WORK_KEY", "wrong")
        .args(["run", "--profile", "work", "Say hello"]);
    let out = tokio::task::spawn_blocking(move || cmd.output().unwrap())
        .await
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("the model's server refused the key (HTTP 401): check the key in WORK_KEY (profile `work`)"),
        "{stderr}"
    );
    // Nothing was answered: the session may be dropped instead.
    let id = env.sessions_json()[0]["id"].as_str().unwrap().to_string();
    assert!(
        stderr.contains(&format!("`pod rm {id}` drops the session")),
        "{stderr}"
    );
    // The key's value appears nowhere.
    assert!(!stderr.contains("wrong"), "{stderr}");
}
