//! Done means verified (`--verify`, `--grader`): the operator's checks run
//! when the model ends its turn, their failure goes back to the model, a
//! run whose checks keep failing stops unverified (exit 5), a kill during
//! a check is resumed with the check run once more, and a grader on a real
//! HTTP provider judges the work — all through the real binary.

use crate::support::*;
use serde_json::{json, Value};
use std::path::Path;

/// Exit code of a run whose checks kept failing.
const UNVERIFIED: i32 = 5;

/// A test the model's `add.py` must pass.
fn with_a_test(ws: &Path) {
    std::fs::write(
        ws.join("test_add.py"),
        "from add import add\nassert add(2, 2) == 4, f\"add(2, 2) == {add(2, 2)}, expected 4\"\nprint(\"ok\")\n",
    )
    .unwrap();
}

/// The model writes a buggy `add.py`, completes its plan and ends its
/// turn; `fixes` more answers follow (each an edit that fixes it, when
/// `fix` is true, else a bare answer).
fn buggy_then(fix: bool) -> Value {
    let mut steps = vec![
        write_todos(&[todo("a", "in_progress")]),
        call(
            "write_file",
            json!({"path": "add.py", "content": "def add(a, b):\n    return a - b\n"}),
        ),
        write_todos(&[todo("a", "completed")]),
        say("Done: add.py is written."),
    ];
    match fix {
        true => steps.extend([
            call(
                "edit_file",
                // A new size: Python's bytecode cache trusts a file of the
                // same size changed within the same second.
                json!({"path": "add.py", "old_string": "a - b", "new_string": "(a + b)"}),
            ),
            say("Fixed: add now adds."),
        ]),
        false => steps.extend((0..5).map(|n| say(&format!("Still done ({n}).")))),
    }
    script(steps)
}

/// The session's records of a kind, from its log file.
fn records(env: &TestEnv, id: &str, kind: &str) -> Vec<Value> {
    let log = env.pod_home().join("sessions").join(id).join("log.jsonl");
    std::fs::read_to_string(log)
        .unwrap()
        .lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .filter_map(|line| line.get("rec").and_then(|record| record.get(kind)).cloned())
        .collect()
}

fn summary(env: &TestEnv, id: &str) -> Value {
    env.sessions_json()
        .into_iter()
        .find(|s| s["id"] == id)
        .unwrap_or_else(|| panic!("no session {id}"))
}

#[test]
fn a_failing_check_goes_back_to_the_model_and_its_fix_is_verified() {
    let env = TestEnv::new();
    with_a_test(&env.workspace());
    let script = env.script("s.json", &buggy_then(true));
    let out = env
        .pod()
        .args([
            "run",
            "--json",
            "--yes",
            "--verify",
            "python3 test_add.py",
            "--script",
        ])
        .arg(&script)
        .arg("Write add.py")
        .output()
        .unwrap();
    assert_success(&out);
    let lines = ndjson(&out.stdout);
    let id = session_id(&lines);
    // Two rounds: the buggy answer failed, the fixed one passed.
    let rounds = records(&env, &id, "verify");
    assert_eq!(rounds.len(), 2, "{rounds:?}");
    assert_eq!(rounds[0]["passed"], false);
    assert_eq!(rounds[0]["checks"][0]["exit_code"], 1);
    assert!(rounds[0]["checks"][0]["output_tail"]
        .as_str()
        .unwrap()
        .contains("expected 4"));
    assert_eq!(rounds[1]["passed"], true);
    assert_eq!(rounds[1]["round"], 2);
    // The failure reached the model in the request after it: the reminder
    // is the item before the fixing call.
    let history = env.show_json(&id)["history"].as_array().unwrap().clone();
    let fix = history
        .iter()
        .position(|item| item["tool_calls"][0]["name"] == "edit_file")
        .unwrap();
    let told = history[fix - 1]["text"].as_str().unwrap_or_default();
    assert!(told.contains("<system-reminder>"), "{told}");
    assert!(
        told.contains("python3 test_add.py  ->  exit code 1"),
        "{told}"
    );
    assert!(told.contains("add(2, 2) == 0, expected 4"), "{told}");
    // Both rounds were streamed as events; the run says verified.
    assert_eq!(events(&lines, "verify_started").len(), 2);
    let finished = lines.last().unwrap();
    assert_eq!(finished["verified"], true, "{finished}");
    let session = summary(&env, &id);
    assert_eq!(session["status"], "done");
    assert_eq!(session["verification"]["state"], "verified", "{session}");
    let shown = env.pod().args(["show", &id]).output().unwrap();
    let shown = String::from_utf8_lossy(&shown.stdout);
    assert!(shown.contains("✓ verified (round 2)"), "{shown}");
    assert!(shown.contains("✗ not verified (round 1)"), "{shown}");
}

#[test]
fn a_model_that_never_fixes_it_stops_unverified_after_its_rounds() {
    let env = TestEnv::new();
    with_a_test(&env.workspace());
    let script = env.script("s.json", &buggy_then(false));
    let out = env
        .pod()
        .args([
            "run",
            "--json",
            "--yes",
            "--verify",
            "python3 test_add.py",
            "--max-verify",
            "2",
            "--script",
        ])
        .arg(&script)
        .arg("Write add.py")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(UNVERIFIED), "{out:?}");
    let id = session_id(&ndjson(&out.stdout));
    let rounds = records(&env, &id, "verify");
    assert_eq!(rounds.len(), 2);
    assert!(rounds.iter().all(|r| r["passed"] == false));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr
            .contains("unverified: `python3 test_add.py` still fails (exit code 1) after 2 rounds"),
        "{stderr}"
    );
    let session = summary(&env, &id);
    assert_eq!(session["status"], "unverified", "{session}");
    assert!(session["reason"]
        .as_str()
        .unwrap()
        .contains("python3 test_add.py"));
    // Without --verify the same model is done, unchecked.
    let plain = env
        .pod()
        .args(["run", "--json", "--yes", "--script"])
        .arg(&script)
        .arg("Write add.py")
        .output()
        .unwrap();
    assert_success(&plain);
}

#[test]
fn a_kill_during_a_check_runs_it_once_more_on_resume_and_finishes() {
    let env = TestEnv::new();
    let ws = env.workspace();
    // Slow the first time (the test kills pod then), quick after.
    let check = "if [ -e checks.log ]; then echo again >> checks.log; \
                 else echo first >> checks.log; sleep 60; fi";
    let script = env.script(
        "s.json",
        &script(vec![
            call(
                "write_file",
                json!({"path": "out.txt", "content": "work\n"}),
            ),
            say("Done."),
        ]),
    );
    let mut child = env
        .pod_process()
        .args(["run", "--json", "--yes", "--verify", check, "--script"])
        .arg(&script)
        .arg("Work")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    // Wait (at most a minute) for the check to be running.
    let log = ws.join("checks.log");
    let started = std::time::Instant::now();
    while !log.exists() {
        assert!(
            started.elapsed() < std::time::Duration::from_secs(60),
            "the check never started"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    child.kill().unwrap();
    let out = child.wait_with_output().unwrap();
    let id = session_id(&ndjson(&out.stdout));
    let session = summary(&env, &id);
    assert_eq!(session["status"], "interrupted", "{session}");
    assert!(
        session["reason"].as_str().unwrap().contains("checks ran"),
        "{session}"
    );
    assert!(records(&env, &id, "verify").is_empty());
    let resume = env.pod().args(["resume", "--json", &id]).output().unwrap();
    assert_success(&resume);
    assert_eq!(std::fs::read_to_string(&log).unwrap(), "first\nagain\n");
    let rounds = records(&env, &id, "verify");
    assert_eq!(rounds.len(), 1);
    assert_eq!(rounds[0]["passed"], true);
    // The model was not asked again: its answer was already there.
    let answers = env.show_json(&id)["history"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|item| item["type"] == "assistant")
        .count();
    assert_eq!(answers, 2);
    assert_eq!(summary(&env, &id)["status"], "done");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_grader_on_a_real_provider_fails_the_work_then_passes_it() {
    use pod_testkit::server::LoopbackServer;
    use pod_testkit::wire::openai_step;
    let server = LoopbackServer::start(vec![
        openai_step(
            r#"{"verdict": "fail", "reasons": ["add.py has no docstring"]}"#,
            &[],
        ),
        openai_step(
            r#"{"verdict": "pass", "reasons": ["documented and tested"]}"#,
            &[],
        ),
    ])
    .await;
    let env = TestEnv::new();
    env.config_file(&format!(
        "[profiles.judge]\nkind = \"openai\"\nbase_url = \"{}\"\nmodel = \"judge-model\"\n\
         api_key_env = \"JUDGE_KEY\"\nprices = {{ input = 1.0, output = 2.0 }}\n",
        server.url("/v1")
    ));
    with_a_test(&env.workspace());
    let script = env.script(
        "s.json",
        &script(vec![
            call(
                "write_file",
                json!({"path": "add.py", "content": "def add(a, b):\n    return a + b\n"}),
            ),
            say("Done."),
            call(
                "write_file",
                json!({"path": "add.py", "content": "def add(a, b):\n    \"\"\"Adds.\"\"\"\n    return a + b\n"}),
            ),
            say("Documented."),
        ]),
    );
    let mut cmd = env.pod_process();
    cmd.env("JUDGE_KEY", "k")
        .args([
            "run",
            "--json",
            "--yes",
            "--verify",
            "python3 test_add.py",
            "--grader",
            "judge",
            "--rubric",
            "Every function has a docstring.",
            "--script",
        ])
        .arg(&script)
        .arg("Write a documented add.py");
    let out = tokio::task::spawn_blocking(move || cmd.output().unwrap())
        .await
        .unwrap();
    assert_success(&out);
    let id = session_id(&ndjson(&out.stdout));
    let rounds = records(&env, &id, "verify");
    assert_eq!(rounds.len(), 2, "{rounds:?}");
    assert_eq!(rounds[0]["grader"]["passed"], false);
    assert_eq!(rounds[0]["grader"]["reasons"][0], "add.py has no docstring");
    assert_eq!(rounds[1]["grader"]["passed"], true);
    assert_eq!(rounds[1]["passed"], true);
    // The grader's reasons reached the model; its tokens are recorded.
    let history = env.show_json(&id)["history"].as_array().unwrap().clone();
    assert!(history.iter().any(|item| item["text"]
        .as_str()
        .is_some_and(|t| t.contains("add.py has no docstring"))));
    assert!(
        rounds[0]["grader"]["usage"]["prompt_tokens"]
            .as_u64()
            .unwrap()
            > 0
    );
    // It judged in a context of its own: the rubric, the checks, the diff.
    let bodies = server.bodies();
    assert_eq!(bodies.len(), 2);
    let asked = bodies[0]["messages"].to_string();
    assert!(asked.contains("Every function has a docstring."), "{asked}");
    assert!(asked.contains("python3 test_add.py"), "{asked}");
    assert!(asked.contains("+    return a + b"), "{asked}");
    assert!(bodies[0]["tools"].is_null(), "the grader has no tools");
    assert_eq!(bodies[0]["model"], "judge-model");
    // A replay plays the grader's verdicts back: it asks no model.
    let mut replay = env.pod_process();
    replay.env("JUDGE_KEY", "k").args(["replay", &id, "--json"]);
    let replayed = tokio::task::spawn_blocking(move || replay.output().unwrap())
        .await
        .unwrap();
    let report: Value = serde_json::from_slice(&replayed.stdout).unwrap();
    assert_eq!(report["status"], "identical", "{report}");
    assert_eq!(server.bodies().len(), 2, "the replay asked the grader");
}

#[tokio::test]
async fn an_api_client_names_the_servers_checks_and_never_a_command() {
    let env = TestEnv::new();
    env.config_file("[goal.checks]\ntest = \"python3 test_add.py\"\n");
    with_a_test(&env.workspace());
    let script = env.script("serve-script.json", &buggy_then(true));
    let mut command = env.pod_process();
    command.arg("--script").arg(script).arg("--yes");
    let server = crate::http::Server::start_with(command, &env);
    let ws = env.workspace();
    // A command is not a name: refused, nothing created.
    let (status, answer) = server
        .post(
            "/sessions",
            &json!({"task": "t", "workspace": ws, "verify": ["python3 test_add.py"]}).to_string(),
        )
        .await;
    assert_eq!(status, 400, "{answer}");
    let error = answer["error"].as_str().unwrap();
    assert!(
        error.contains("no check named `python3 test_add.py`"),
        "{answer}"
    );
    assert!(error.contains("test"), "{answer}");
    assert!(env.sessions_json().is_empty());
    // A name of the server's config is its command.
    let (status, answer) = server
        .post(
            "/sessions",
            &json!({"task": "Write add.py", "workspace": ws, "yes": true, "verify": ["test"]})
                .to_string(),
        )
        .await;
    assert_eq!(status, 201, "{answer}");
    let id = answer["session_id"].as_str().unwrap().to_string();
    let started = std::time::Instant::now();
    loop {
        let one = server.get(&format!("/sessions/{id}")).await;
        if one["session"]["status"] == "done" {
            assert_eq!(one["session"]["verification"]["state"], "verified", "{one}");
            break;
        }
        assert!(
            started.elapsed() < std::time::Duration::from_secs(60),
            "not done: {one}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    let rounds = records(&env, &id, "verify");
    assert_eq!(rounds.len(), 2);
    assert_eq!(rounds[0]["checks"][0]["name"], "test");
}

#[test]
fn a_verified_session_replays_identically_and_a_passing_test_diverges_at_its_round() {
    let env = TestEnv::new();
    with_a_test(&env.workspace());
    let script = env.script("s.json", &buggy_then(true));
    let out = env
        .pod()
        .args([
            "run",
            "--json",
            "--yes",
            "--verify",
            "python3 test_add.py",
            "--script",
        ])
        .arg(&script)
        .arg("Write add.py")
        .output()
        .unwrap();
    assert_success(&out);
    let id = session_id(&ndjson(&out.stdout));
    let replay = env.pod().args(["replay", &id, "--json"]).output().unwrap();
    let report: Value = serde_json::from_slice(&replay.stdout).unwrap();
    assert_eq!(report["status"], "identical", "{report}");
    // The same session in a workspace whose test the buggy add passes:
    // its first round passes, where the recording's failed.
    let elsewhere = env.workspace().parent().unwrap().join("elsewhere");
    std::fs::create_dir(&elsewhere).unwrap();
    std::fs::write(elsewhere.join("test_add.py"), "print('lenient')\n").unwrap();
    let replay = env
        .pod()
        .args(["replay", &id, "--json", "--workspace"])
        .arg(&elsewhere)
        .output()
        .unwrap();
    assert_eq!(replay.status.code(), Some(4));
    let report: Value = serde_json::from_slice(&replay.stdout).unwrap();
    let divergence = &report["divergence"];
    assert!(
        divergence["expected"].to_string().contains("\"verify\""),
        "{report}"
    );
}
