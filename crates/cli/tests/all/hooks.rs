//! Operators' hooks in Claude Code's settings format, run by the real `pod`
//! binary with real shell and Python scripts.

use crate::http::{is_record_text, writing_script, Server};
use crate::support::*;
use serde_json::{json, Value};
use std::path::{Path, PathBuf};

/// Writes `settings` (a Claude Code settings document) and returns its path.
fn settings_file(env: &TestEnv, settings: &Value) -> PathBuf {
    let path = env.pod_home().join("../hook-settings.json");
    std::fs::write(&path, settings.to_string()).unwrap();
    path
}

/// Writes an executable hook script named `name`.
fn hook_script(env: &TestEnv, name: &str, body: &str) -> PathBuf {
    let dir = env.pod_home().join("../hooks");
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(name);
    std::fs::write(&path, body).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path
}

fn command(path: &Path) -> String {
    path.to_string_lossy().into_owned()
}

/// `pod run --json --yes --script S --hooks H TASK`; (exit code, events, stderr).
fn run_with_hooks(
    env: &TestEnv,
    steps: Vec<Value>,
    hooks: &Path,
    extra: &[&str],
) -> (Option<i32>, Vec<Value>, String) {
    let script = env.script("s.json", &script(steps));
    let out = env
        .pod()
        .args(["run", "--json", "--yes", "--script"])
        .arg(&script)
        .arg("--hooks")
        .arg(hooks)
        .args(extra)
        .arg("Do the work")
        .output()
        .unwrap();
    (
        out.status.code(),
        ndjson(&out.stdout),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// The tool results of session `id`, in order.
fn results(env: &TestEnv, id: &str) -> Vec<(String, bool)> {
    env.show_json(id)["history"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|item| item["type"] == "tool_result")
        .map(|item| {
            (
                item["content"].as_str().unwrap_or("").to_string(),
                item["is_error"] == true,
            )
        })
        .collect()
}

/// The session's log records of one kind.
fn records(env: &TestEnv, id: &str, kind: &str) -> Vec<Value> {
    let log = env.pod_home().join("sessions").join(id).join("log.jsonl");
    std::fs::read_to_string(log)
        .unwrap()
        .lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        // A line is the record beside its checksum.
        .filter_map(|line| {
            line.as_object()?
                .values()
                .find_map(|record| record.get(kind).cloned())
        })
        .collect()
}

#[test]
fn a_pre_tool_use_hook_blocks_rm_rf_and_the_model_reads_why() {
    let env = TestEnv::new();
    std::fs::create_dir_all(env.workspace().join("keep")).unwrap();
    std::fs::write(env.workspace().join("keep/data.txt"), "precious").unwrap();
    let guard = hook_script(
        &env,
        "no-rm-rf.py",
        r#"#!/usr/bin/env python3
import json, sys
event = json.load(sys.stdin)
command = event.get("tool_input", {}).get("command", "")
if event["tool_name"] == "Bash" and "rm -rf" in command:
    print("rm -rf is not allowed here; delete files one by one", file=sys.stderr)
    sys.exit(2)
sys.exit(0)
"#,
    );
    let hooks = settings_file(
        &env,
        &json!({"hooks": {"PreToolUse": [
            {"matcher": "Bash", "hooks": [{"type": "command", "command": command(&guard)}]}
        ]}}),
    );
    let (code, events, stderr) = run_with_hooks(
        &env,
        vec![
            call("bash", json!({"command": "rm -rf keep"})),
            call("bash", json!({"command": "echo fine"})),
            say("Understood."),
        ],
        &hooks,
        &[],
    );
    assert_eq!(code, Some(0), "{stderr}");
    assert_eq!(
        std::fs::read_to_string(env.workspace().join("keep/data.txt")).unwrap(),
        "precious"
    );
    let id = session_id(&events);
    let results = results(&env, &id);
    assert!(results[0].1, "{results:?}");
    assert!(
        results[0]
            .0
            .contains("rm -rf is not allowed here; delete files one by one"),
        "{results:?}"
    );
    // The next command was not blocked.
    assert!(
        !results[1].1 && results[1].0.ends_with("fine"),
        "{results:?}"
    );
    // Each decision is in the log, before its call's result (the second
    // decided nothing: the policy decides).
    let decided = records(&env, &id, "hook");
    assert_eq!(decided.len(), 2, "{decided:?}");
    assert_eq!(decided[0]["decision"], "deny");
    assert_eq!(decided[0]["tool"], "bash");
    assert_eq!(decided[1]["decision"], "none");
    // The JSON stream says who refused the call, with its command.
    let refused = crate::support::events(&events, "call_not_run");
    assert_eq!(refused.len(), 1, "{events:?}");
    assert_eq!(refused[0]["by"], "hook");
    assert!(refused[0]["arguments"]
        .as_str()
        .unwrap()
        .contains("rm -rf keep"));
    // Under --yes, a person reads the blocked command and the hook's
    // reason, not advice about approval.
    let script = env.script(
        "again.json",
        &script(vec![
            call("bash", json!({"command": "rm -rf keep"})),
            say("Ok."),
        ]),
    );
    let out = env
        .pod()
        .args(["run", "--yes", "--hooks"])
        .arg(&hooks)
        .arg("--script")
        .arg(&script)
        .arg("Clean up")
        .output()
        .unwrap();
    assert_success(&out);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains(r#"✗ bash({"command":"rm -rf keep"}) not run: blocked by a PreToolUse hook: rm -rf is not allowed here"#),
        "{stdout}"
    );
    assert!(
        stdout.contains("1 tool call not run (bash): blocked by the operator's PreToolUse hook"),
        "{stdout}"
    );
    assert!(!stdout.contains("--allow"), "{stdout}");
    let shown = env.pod().args(["show", &id]).output().unwrap();
    let shown = String::from_utf8_lossy(&shown.stdout);
    assert!(!shown.contains("no decision"), "{shown}");
}

#[test]
fn updated_input_rewrites_a_command_and_post_tool_use_sees_the_response() {
    let env = TestEnv::new();
    let rewrite = hook_script(
        &env,
        "rewrite.sh",
        r#"#!/bin/sh
cat > /dev/null
cat <<'JSON'
{"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "allow",
 "permissionDecisionReason": "rewritten", "updatedInput": {"command": "echo rewritten > out.txt; echo done"}}}
JSON
"#,
    );
    let seen = env.pod_home().join("../post-input.json");
    let post = hook_script(
        &env,
        "post.sh",
        &format!(
            "#!/bin/sh\ncat > {}\necho '{{\"hookSpecificOutput\": {{\"hookEventName\": \"PostToolUse\", \"additionalContext\": \"checked by post hook\"}}}}'\n",
            seen.display()
        ),
    );
    let hooks = settings_file(
        &env,
        &json!({"hooks": {
            "PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": command(&rewrite)}]}],
            "PostToolUse": [{"matcher": "bash", "hooks": [{"type": "command", "command": command(&post), "timeout": 30}]}]
        }}),
    );
    let (code, events, stderr) = run_with_hooks(
        &env,
        vec![
            call("bash", json!({"command": "echo original > out.txt"})),
            say("Done."),
        ],
        &hooks,
        &[],
    );
    assert_eq!(code, Some(0), "{stderr}");
    assert_eq!(
        std::fs::read_to_string(env.workspace().join("out.txt")).unwrap(),
        "rewritten\n"
    );
    let id = session_id(&events);
    // The PostToolUse hook got the call as it ran and its response.
    let input: Value = serde_json::from_str(&std::fs::read_to_string(&seen).unwrap()).unwrap();
    assert_eq!(input["hook_event_name"], "PostToolUse");
    assert_eq!(input["tool_name"], "Bash");
    assert_eq!(input["session_id"], id.as_str());
    assert_eq!(
        input["tool_input"]["command"],
        "echo rewritten > out.txt; echo done"
    );
    assert!(
        input["tool_response"]["content"]
            .as_str()
            .unwrap()
            .ends_with("stdout ---\ndone"),
        "{input}"
    );
    assert_eq!(input["tool_response"]["success"], true);
    assert!(input["transcript_path"]
        .as_str()
        .unwrap()
        .ends_with("log.jsonl"));
    // Its context reached the model with the result.
    let results = results(&env, &id);
    assert!(results[0].0.contains("stdout ---\ndone"), "{results:?}");
    assert!(results[0].0.contains("checked by post hook"), "{results:?}");
    // The rewrite is recorded with the decision.
    let decided = records(&env, &id, "hook");
    assert_eq!(decided[0]["decision"], "allow");
    assert_eq!(
        serde_json::from_str::<Value>(decided[0]["arguments"].as_str().unwrap()).unwrap()
            ["command"],
        "echo rewritten > out.txt; echo done"
    );
}

#[test]
fn a_stop_hook_keeps_an_until_done_run_going_once() {
    let env = TestEnv::new();
    let stop = hook_script(
        &env,
        "stop.py",
        r#"#!/usr/bin/env python3
import json, sys
event = json.load(sys.stdin)
if not event["stop_hook_active"]:
    print(json.dumps({"decision": "block", "reason": "run the tests before you stop"}))
"#,
    );
    let hooks = settings_file(
        &env,
        &json!({"hooks": {"Stop": [{"hooks": [{"type": "command", "command": command(&stop)}]}]}}),
    );
    let (code, events, stderr) = run_with_hooks(
        &env,
        vec![
            write_todos(&plan(3)),
            say("All done."),
            say("Tests pass; done now."),
            say("Never reached."),
        ],
        &hooks,
        &["--until-done"],
    );
    assert_eq!(code, Some(0), "{stderr}");
    let finished = events.last().unwrap();
    assert_eq!(finished["requests"], 3, "{finished}");
    let id = session_id(&events);
    let history = env.show_json(&id)["history"].clone();
    let texts: Vec<&str> = history
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|item| item["text"].as_str())
        .collect();
    let reminder = texts
        .iter()
        .position(|t| t.contains("run the tests before you stop"))
        .expect("the hook's reason reached the model");
    assert_eq!(texts[reminder - 1], "All done.");
    assert_eq!(texts[reminder + 1], "Tests pass; done now.");
}

#[test]
fn a_settings_file_written_for_claude_code_works_unchanged() {
    let env = TestEnv::new();
    // Claude Code's documented example shape: protect .env files from
    // Write and Edit, reading tool_input.file_path.
    let protect = hook_script(
        &env,
        "protect.py",
        r#"#!/usr/bin/env python3
import json, sys
data = json.load(sys.stdin)
path = data.get("tool_input", {}).get("file_path", "")
if path.endswith(".env"):
    print(json.dumps({"hookSpecificOutput": {"hookEventName": "PreToolUse",
        "permissionDecision": "deny",
        "permissionDecisionReason": f"{path} holds secrets"}}))
sys.exit(0)
"#,
    );
    let log = env.pod_home().join("../commands.log");
    let hooks = settings_file(
        &env,
        &json!({
            "permissions": {"allow": ["Bash(npm run lint)"]},
            "hooks": {
                "PreToolUse": [
                    {"matcher": "Write|Edit", "hooks": [{"type": "command", "command": command(&protect)}]},
                    {"matcher": "Bash", "hooks": [{"type": "command",
                        "command": format!("jq -r '.tool_input.command' >> {}", log.display())}]}
                ]
            }
        }),
    );
    let (code, events, stderr) = run_with_hooks(
        &env,
        vec![
            call("write_file", json!({"path": ".env", "content": "KEY=1\n"})),
            call("write_file", json!({"path": "notes.md", "content": "n\n"})),
            call("bash", json!({"command": "echo logged"})),
            say("Done."),
        ],
        &hooks,
        &[],
    );
    assert_eq!(code, Some(0), "{stderr}");
    assert!(!env.workspace().join(".env").exists());
    assert!(env.workspace().join("notes.md").exists());
    let id = session_id(&events);
    let results = results(&env, &id);
    assert!(
        results[0].1 && results[0].0.contains(".env holds secrets"),
        "{results:?}"
    );
    assert!(!results[1].1, "{results:?}");
    assert_eq!(std::fs::read_to_string(&log).unwrap(), "echo logged\n");
}

#[test]
fn a_hanging_hook_times_out_and_fails_open_unless_it_blocks_on_error() {
    let env = TestEnv::new();
    let hooks = settings_file(
        &env,
        &json!({"hooks": {"PreToolUse": [
            {"matcher": "Bash", "hooks": [{"type": "command", "command": "sleep 30", "timeout": 1}]}
        ]}}),
    );
    let script = env.script(
        "s.json",
        &script(vec![
            call("bash", json!({"command": "echo ran"})),
            say("Done."),
        ]),
    );
    let out = env
        .pod()
        .args(["run", "--yes", "--script"])
        .arg(&script)
        .arg("--hooks")
        .arg(&hooks)
        .arg("Go")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let said: Vec<&str> = stdout.lines().filter(|l| l.contains("⚓")).collect();
    assert_eq!(said.len(), 1, "reported once: {stdout}");
    assert!(
        said[0].contains("`sleep 30` failed: it did not finish within its timeout of 1 s"),
        "{stdout}"
    );
    let id = env.sessions_json()[0]["id"].as_str().unwrap().to_string();
    let ran = &results(&env, &id)[0];
    assert!(!ran.1 && ran.0.ends_with("ran"), "{ran:?}");

    // The same hook marked to block on error keeps the call from running.
    let closed = settings_file(
        &env,
        &json!({"hooks": {"PreToolUse": [
            {"matcher": "Bash", "hooks": [{"type": "command", "command": "sleep 30", "timeout": 1, "onError": "block"}]}
        ]}}),
    );
    let (code, events, stderr) = run_with_hooks(
        &env,
        vec![
            call("bash", json!({"command": "touch ran.txt"})),
            say("Done."),
        ],
        &closed,
        &[],
    );
    assert_eq!(code, Some(0), "{stderr}");
    assert!(!env.workspace().join("ran.txt").exists());
    let results = results(&env, &session_id(&events));
    assert!(
        results[0].1 && results[0].0.contains("timeout of 1 s"),
        "{results:?}"
    );
}

#[test]
fn a_prompt_hook_adds_context_and_a_bad_hooks_file_stops_the_start() {
    let env = TestEnv::new();
    let hooks = settings_file(
        &env,
        &json!({"hooks": {"UserPromptSubmit": [
            {"hooks": [{"type": "command", "command": "echo 'The deploy freeze is on until Friday.'"}]}
        ]}}),
    );
    let (code, events, stderr) = run_with_hooks(&env, vec![say("Noted.")], &hooks, &[]);
    assert_eq!(code, Some(0), "{stderr}");
    let history = env.show_json(&session_id(&events))["history"].clone();
    assert_eq!(history[0]["text"], "Do the work");
    assert!(
        history[1]["text"]
            .as_str()
            .unwrap()
            .contains("The deploy freeze is on until Friday."),
        "{history}"
    );

    // A hook that blocks the prompt (exit 2) keeps it from the model.
    let refuse = settings_file(
        &env,
        &json!({"hooks": {"UserPromptSubmit": [
            {"hooks": [{"type": "command", "command": "echo 'no deploys today' >&2; exit 2"}]}
        ]}}),
    );
    let (code, _, stderr) = run_with_hooks(&env, vec![say("Never.")], &refuse, &[]);
    assert_eq!(code, Some(1), "{stderr}");
    assert!(stderr.contains("no deploys today"), "{stderr}");
    assert!(
        stderr.contains("the operator's hook refused it"),
        "{stderr}"
    );
    let sessions = env.sessions_json().len();

    let broken = settings_file(
        &env,
        &json!({"hooks": {"Stop": [{"hooks": [{"type": "command"}]}]}}),
    );
    let (code, _, stderr) = run_with_hooks(&env, vec![say("Never.")], &broken, &[]);
    assert_eq!(code, Some(1));
    assert!(
        stderr.contains("hooks.Stop[0].hooks[0].command"),
        "{stderr}"
    );
    assert_eq!(
        env.sessions_json().len(),
        sessions,
        "no session for a start that failed"
    );
}

/// A hook that asked for a person parks the session under `pod serve`;
/// the server is SIGKILLed; another answers, and the call runs with the
/// recorded decision: the hook never runs twice.
#[tokio::test(flavor = "multi_thread")]
async fn a_decided_call_survives_sigkill_and_its_hook_never_runs_again() {
    let env = TestEnv::new();
    let runs = env.pod_home().join("../hook-runs.log");
    let ask = hook_script(
        &env,
        "ask.sh",
        &format!(
            "#!/bin/sh\ncat > /dev/null\necho ran >> {}\necho '{{\"hookSpecificOutput\": {{\"hookEventName\": \"PreToolUse\", \"permissionDecision\": \"ask\", \"permissionDecisionReason\": \"a person checks notes\"}}}}'\n",
            runs.display()
        ),
    );
    let settings = env.config_dir().join("hooks.json");
    let told = env.pod_home().join("../notified.log");
    std::fs::write(
        &settings,
        json!({"hooks": {
            "PreToolUse": [
                {"matcher": "Write", "hooks": [{"type": "command", "command": command(&ask)}]}
            ],
            "Notification": [{"hooks": [{"type": "command",
                "command": format!("jq -r .message >> {}", told.display())}]}]
        }})
        .to_string(),
    )
    .unwrap();
    // The policy allows the write: only the hook makes it ask.
    env.config_file("hooks_file = \"hooks.json\"\n[approval.tools]\nwrite_file = \"allow\"\n");
    let mut server = Server::start(&env, &writing_script());
    let id = server.create(&env, "Write the notes").await;
    let mut events = server.events(&id, None).await;
    let asked = events
        .until(|e| e.event == "approvals" && !e.data["approvals"].as_array().unwrap().is_empty())
        .await;
    let approval = asked.data["approvals"][0]["id"]
        .as_str()
        .unwrap()
        .to_string();
    // The question reached the Notification hook (it runs beside the
    // session: wait for its line).
    let mut said = String::new();
    for _ in 0..600 {
        said = std::fs::read_to_string(&told).unwrap_or_default();
        if !said.is_empty() {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert!(
        said.starts_with("pod needs your permission to use write_file"),
        "{said}"
    );
    server.kill();
    assert_eq!(std::fs::read_to_string(&runs).unwrap(), "ran\n");

    let server = Server::start(&env, &writing_script());
    let (status, body) = server
        .post(
            &format!("/approvals/{approval}"),
            r#"{"decision": "allow_once"}"#,
        )
        .await;
    assert_eq!(status, 200, "{body}");
    let mut events = server.events(&id, None).await;
    events.until(|e| is_record_text(e, "Notes written.")).await;
    assert!(env.workspace().join("notes.md").exists());
    assert_eq!(
        std::fs::read_to_string(&runs).unwrap(),
        "ran\n",
        "the hook ran once"
    );
    let decided = records(&env, &id, "hook");
    assert_eq!(decided.len(), 1, "{decided:?}");
    assert_eq!(decided[0]["decision"], "ask");
    assert_eq!(decided[0]["reason"], "a person checks notes");
}

/// SessionStart adds context before the first request, SubagentStop runs
/// for a subagent (and Stop for the parent), SessionEnd when the process
/// lets the session go; each gets its event's fields.
#[test]
fn session_events_and_a_subagents_stop_run_their_hooks() {
    let env = TestEnv::new();
    let seen = env.pod_home().join("../events.jsonl");
    let record = hook_script(
        &env,
        "record.sh",
        &format!(
            "#!/bin/sh\ncat >> {}\necho >> {}\n",
            seen.display(),
            seen.display()
        ),
    );
    let start = hook_script(
        &env,
        "start.sh",
        &format!(
            "#!/bin/sh\ncat >> {}\necho >> {}\necho 'Branch: main. Tests: cargo test.'\n",
            seen.display(),
            seen.display()
        ),
    );
    let each =
        |script: &Path| json!([{"hooks": [{"type": "command", "command": command(script)}]}]);
    let hooks = settings_file(
        &env,
        &json!({"hooks": {
            "SessionStart": [{"matcher": "startup", "hooks": [{"type": "command", "command": command(&start)}]}],
            "SubagentStop": each(&record),
            "Stop": each(&record),
            "SessionEnd": each(&record),
        }}),
    );
    let script = env.script(
        "s.json",
        &json!({
            "model": "scripted-test",
            "steps": [
                {"tool_calls": [{"name": "task", "arguments": {"description": "count notes", "prompt": "Count the notes"}}]},
                {"text": "The subagent reported."}
            ],
            "agents": [{"task": "Count the notes", "steps": [{"text": "There are 0 notes."}]}]
        }),
    );
    let out = env
        .pod()
        .args(["run", "--json", "--yes", "--script"])
        .arg(&script)
        .arg("--hooks")
        .arg(&hooks)
        .arg("Count")
        .output()
        .unwrap();
    assert_success(&out);
    let id = session_id(&ndjson(&out.stdout));
    let events: Vec<Value> = std::fs::read_to_string(&seen)
        .unwrap()
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let names: Vec<&str> = events
        .iter()
        .map(|e| e["hook_event_name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        ["SessionStart", "SubagentStop", "Stop", "SessionEnd"]
    );
    assert_eq!(events[0]["source"], "startup");
    assert_eq!(events[0]["session_id"], id.as_str());
    assert_ne!(
        events[1]["session_id"],
        id.as_str(),
        "the child's own session"
    );
    assert_eq!(events[1]["stop_hook_active"], false);
    assert_eq!(events[3]["reason"], "other");
    // SessionStart's output reached the model before its first request.
    let history = env.show_json(&id)["history"].clone();
    assert_eq!(history[0]["text"], "Count");
    assert!(
        history[1]["text"]
            .as_str()
            .unwrap()
            .contains("Branch: main. Tests: cargo test."),
        "{history}"
    );
}

/// A Stop hook that never lets go (it ignores stop_hook_active) cannot
/// keep a run going for ever: after eight blocks in a row the run ends,
/// saying why.
#[test]
fn a_stop_hook_that_never_lets_go_is_cut_off() {
    let env = TestEnv::new();
    let hooks = settings_file(
        &env,
        &json!({"hooks": {"Stop": [{"matcher": "ignored-here", "hooks": [{"type": "command",
            "command": "echo '{\"decision\": \"block\", \"reason\": \"not yet\"}'"}]}]}}),
    );
    let steps = (0..20).map(|n| say(&format!("Answer {n}."))).collect();
    let (code, events, stderr) = run_with_hooks(&env, steps, &hooks, &[]);
    assert_eq!(code, Some(0), "{stderr}");
    assert_eq!(events.last().unwrap()["requests"], 9);
    let said: Vec<&Value> = events.iter().filter(|e| e["event"] == "hook").collect();
    assert_eq!(said.len(), 1, "{said:?}");
    assert!(
        said[0]["message"]
            .as_str()
            .unwrap()
            .contains("8 times in a row"),
        "{said:?}"
    );
}
