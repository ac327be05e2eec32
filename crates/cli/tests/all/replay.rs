//! `pod replay`: sessions recorded through the real binary on the scripted
//! model, replayed identically; then one thing changed (a file the model
//! read, a hook, an approval rule) and reported at the right item; a log a
//! crash cut short replayed up to its end; a directory of sessions (the
//! demo's, a subagent one) replayed one line each; a session's MCP calls
//! replayed on its stdio server started again.

use crate::support::*;
use serde_json::{json, Value};
use std::path::{Path, PathBuf};

/// Exit code of a replay that diverged.
const DIVERGED: i32 = 4;

/// Records `steps` on TASK with `extra` flags; returns the session id.
fn record(env: &TestEnv, steps: Value, extra: &[&str]) -> String {
    let script = env.script("s.json", &steps);
    let out = env
        .pod()
        .args(["run", "--json", "--script"])
        .arg(&script)
        .args(extra)
        .arg("Read a.txt and write b.txt")
        .output()
        .unwrap();
    assert_success(&out);
    session_id(&ndjson(&out.stdout))
}

/// `pod replay ARGS --json`: (exit code, the report).
fn replay(env: &TestEnv, args: &[&str]) -> (Option<i32>, Value) {
    let out = env
        .pod()
        .arg("replay")
        .args(args)
        .arg("--json")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let report = serde_json::from_str(stdout.lines().next().unwrap_or("null"))
        .unwrap_or_else(|err| panic!("{err}: {stdout}\n{}", String::from_utf8_lossy(&out.stderr)));
    (out.status.code(), report)
}

/// The `pod show` number of the first history item `matches` picks.
fn item_number(env: &TestEnv, id: &str, matches: impl Fn(&Value) -> bool) -> u64 {
    let history = env.show_json(id)["history"].clone();
    let index = history
        .as_array()
        .unwrap()
        .iter()
        .position(matches)
        .unwrap_or_else(|| panic!("no such item in {history}"));
    index as u64 + 1
}

/// A plan, a read of a.txt, a write of b.txt, the plan done, an answer.
fn read_and_write() -> Value {
    script(vec![
        write_todos(&[todo("a", "in_progress")]),
        call("read_file", json!({"path": "a.txt"})),
        call("write_file", json!({"path": "b.txt", "content": "new\n"})),
        write_todos(&[todo("a", "completed")]),
        say("Done."),
    ])
}

fn copy_of_workspace(env: &TestEnv, a: &str) -> PathBuf {
    let dir = env.pod_home().join("../what-if");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("a.txt"), a).unwrap();
    dir
}

#[test]
fn a_session_replays_identically_and_a_changed_file_diverges_at_its_read() {
    let env = TestEnv::new();
    std::fs::write(env.workspace().join("a.txt"), "alpha\n").unwrap();
    let id = record(&env, read_and_write(), &["--yes"]);

    // Human output: one line, exit 0.
    let out = env.pod().args(["replay", &id[..8]]).output().unwrap();
    assert_success(&out);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("replayed identically"), "{stdout}");
    let (code, report) = replay(&env, &[&id]);
    assert_eq!(code, Some(0), "{report}");
    assert_eq!(report["status"], "identical");
    assert_eq!(report["answers"], 5);
    // The workspace was the first checkpoint's, not today's (b.txt is
    // there now, and the write did not find it).
    assert!(env.workspace().join("b.txt").exists());

    // The same session on another version of the file it read.
    let other = copy_of_workspace(&env, "beta\n");
    let (code, report) = replay(&env, &[&id, "--workspace", other.to_str().unwrap()]);
    assert_eq!(code, Some(DIVERGED), "{report}");
    let divergence = &report["divergence"];
    let read = item_number(&env, &id, |item| {
        item["type"] == "tool_result" && item["content"].as_str().unwrap().contains("alpha")
    });
    assert_eq!(divergence["item"], read, "{report}");
    assert_eq!(divergence["expected"]["item"]["content"], "     1\talpha");
    assert_eq!(divergence["actual"]["item"]["content"], "     1\tbeta");
    let diff = divergence["diff"].as_str().unwrap();
    assert!(
        diff.contains("-     \"content\": \"     1\\talpha\""),
        "{diff}"
    );
    assert!(
        diff.contains("+     \"content\": \"     1\\tbeta\""),
        "{diff}"
    );

    // The human report names the item and shows the diff.
    let out = env
        .pod()
        .args(["replay", &id, "--workspace"])
        .arg(&other)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(DIVERGED));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains(&format!("diverged at item {read} ")),
        "{stdout}"
    );
}

/// Writes an executable hook that refuses every call it sees.
fn refusing_hook(env: &TestEnv) -> PathBuf {
    let dir = env.pod_home().join("../hooks");
    std::fs::create_dir_all(&dir).unwrap();
    let hook = dir.join("refuse.sh");
    std::fs::write(&hook, "#!/bin/sh\necho 'no writes today' >&2\nexit 2\n").unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&hook, std::fs::Permissions::from_mode(0o755)).unwrap();
    let settings = dir.join("settings.json");
    let hooks = json!({"hooks": {"PreToolUse": [
        {"matcher": "Write", "hooks": [{"type": "command", "command": hook.to_str().unwrap()}]}
    ]}});
    std::fs::write(&settings, hooks.to_string()).unwrap();
    settings
}

fn is_write_call(item: &Value) -> bool {
    item["type"] == "assistant" && item["tool_calls"][0]["name"] == "write_file"
}

#[test]
fn a_hook_that_decides_otherwise_diverges_at_the_call() {
    let env = TestEnv::new();
    std::fs::write(env.workspace().join("a.txt"), "alpha\n").unwrap();
    let id = record(&env, read_and_write(), &["--yes"]);
    let hooks = refusing_hook(&env);
    let (code, report) = replay(&env, &[&id, "--hooks", hooks.to_str().unwrap()]);
    assert_eq!(code, Some(DIVERGED), "{report}");
    let divergence = &report["divergence"];
    // Right after the model's write call: where the recording checkpointed
    // and ran it, the replay has the hook's refusal.
    assert_eq!(divergence["item"], item_number(&env, &id, is_write_call));
    assert_eq!(divergence["actual"]["hook"]["decision"], "deny", "{report}");
    assert_eq!(divergence["expected"]["checkpoint"]["phase"], "before");
}

#[test]
fn an_approval_rule_changed_in_the_config_diverges_at_the_call() {
    let env = TestEnv::new();
    std::fs::write(env.workspace().join("a.txt"), "alpha\n").unwrap();
    env.config_file("[approval.tools]\nwrite_file = \"allow\"\n");
    let id = record(&env, read_and_write(), &[]);
    // The same config: identical.
    let (code, report) = replay(&env, &[&id]);
    assert_eq!(code, Some(0), "{report}");
    let denying = env.config_dir().join("denying.toml");
    std::fs::write(&denying, "[approval.tools]\nwrite_file = \"deny\"\n").unwrap();
    let (code, report) = replay(&env, &[&id, "--config", denying.to_str().unwrap()]);
    assert_eq!(code, Some(DIVERGED), "{report}");
    let divergence = &report["divergence"];
    assert_eq!(divergence["item"], item_number(&env, &id, is_write_call));
    let refused = divergence["actual"]["item"]["content"].as_str().unwrap();
    assert!(refused.contains("denied"), "{report}");
}

#[test]
fn a_log_a_crash_cut_short_replays_up_to_its_end() {
    let env = TestEnv::new();
    std::fs::write(env.workspace().join("a.txt"), "alpha\n").unwrap();
    let id = record(&env, read_and_write(), &["--yes"]);
    // Cut the log after the read's answer, mid-line, as a crash would.
    let log = env.pod_home().join("sessions").join(&id).join("log.jsonl");
    let text = std::fs::read_to_string(&log).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    let read_call = lines
        .iter()
        .position(|line| line.contains("\"name\":\"read_file\""))
        .unwrap();
    let mut cut = lines[..=read_call].join("\n");
    cut.push('\n');
    cut.push_str(&lines[read_call + 1][..20]);
    std::fs::write(&log, cut).unwrap();
    // The cut came before the first checkpoint: without one, the files
    // are given.
    let out = env.pod().args(["replay", &id]).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("took no checkpoint"), "{stderr}");
    assert!(stderr.contains("--workspace DIR"), "{stderr}");
    let files = copy_of_workspace(&env, "alpha\n");
    let (code, report) = replay(&env, &[&id, "--workspace", files.to_str().unwrap()]);
    assert_eq!(code, Some(0), "{report}");
    assert_eq!(report["cut"], true);
    assert_eq!(report["answers"], 2);
    // The replay ran the read and asked for a third answer past the end.
    assert!(report["beyond"].as_u64().unwrap() >= 1, "{report}");
}

/// `pod demo --keep`: where it kept its POD_HOME.
fn demo_home(env: &TestEnv) -> PathBuf {
    let out = env.pod().args(["demo", "--keep"]).output().unwrap();
    assert_success(&out);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let kept = stdout
        .lines()
        .find_map(|line| line.strip_prefix("kept in "))
        .unwrap_or_else(|| panic!("{stdout}"));
    Path::new(kept.trim()).join("home")
}

#[test]
fn a_directory_of_sessions_replays_one_line_each_subagents_under_their_parent() {
    let env = TestEnv::new();
    // The demo: a plan, a kill and a resume, a compaction.
    let demo = demo_home(&env);
    let (code, report) = replay(&env, &["--dir", demo.to_str().unwrap()]);
    let _ = std::fs::remove_dir_all(demo.parent().unwrap());
    assert_eq!(code, Some(0), "{report}");
    assert_eq!(report["status"], "identical");

    // A session with two subagents, one of them planning.
    let tree = crate::subagents::tree_script();
    let parent = record(&env, tree, &[]);
    let (code, report) = replay(&env, &[&parent]);
    assert_eq!(code, Some(0), "{report}");
    assert_eq!(report["subagents"], 2);
    assert_eq!(report["answers"], 8);

    // And the home with it and the first test's kind of session: one line
    // per top-level session.
    std::fs::write(env.workspace().join("a.txt"), "alpha\n").unwrap();
    record(&env, read_and_write(), &["--yes"]);
    let out = env
        .pod()
        .args(["replay", "--dir"])
        .arg(env.pod_home())
        .output()
        .unwrap();
    assert_success(&out);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines.len(), 3, "{stdout}");
    assert!(
        lines[..2].iter().all(|l| l.contains("  identical ")),
        "{stdout}"
    );
    assert_eq!(
        lines[2],
        "2 sessions: 2 identical, 0 diverged, 0 not replayed"
    );
}

#[test]
fn a_session_with_mcp_calls_replays_on_its_stdio_server_started_again() {
    let env = TestEnv::new();
    let dir = env.pod_home().join("..");
    let servers = mcp_test_config(&dir.join("mcp.json"), "test", json!({}));
    let steps = script(vec![
        call(
            "write_file",
            json!({"path": "notes.txt", "content": "one\n"}),
        ),
        call("test__echo", json!({"text": "hello mcp"})),
        call("test__fail", json!({})),
        say("Done."),
    ]);
    let id = record(
        &env,
        steps,
        &["--yes", "--mcp-config", servers.to_str().unwrap()],
    );
    let history = env.show_json(&id)["history"].clone();
    let results: Vec<&str> = history
        .as_array()
        .unwrap()
        .iter()
        .filter(|item| item["type"] == "tool_result")
        .map(|item| item["content"].as_str().unwrap())
        .collect();
    assert_eq!(results[1..], ["hello mcp", "it failed, on purpose"]);

    // The recorded server runs again: its answers are the same.
    let (code, report) = replay(&env, &[&id]);
    assert_eq!(code, Some(0), "{report}");
    assert_eq!(report["answers"], 4);

    // A server given under the recorded name replaces it: here one that
    // does not start, which is the replay's setup, not a divergence.
    let broken = mcp_test_config(
        &dir.join("broken.json"),
        "test",
        json!({"MCP_TEST_FAIL_START": "1"}),
    );
    let out = env
        .pod()
        .args(["replay", &id, "--mcp-config"])
        .arg(&broken)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("MCP server test did not start"), "{stderr}");
    assert!(stderr.contains("--mcp-config FILE"), "{stderr}");
}

#[test]
fn a_call_refused_for_want_of_an_approver_replays_refused() {
    // `pod run` without a terminal has nobody to ask: the write was refused
    // without a question. The replay must not ask one either.
    let env = TestEnv::new();
    std::fs::write(env.workspace().join("a.txt"), "alpha\n").unwrap();
    let id = record(&env, read_and_write(), &[]);
    let history = env.show_json(&id)["history"].clone();
    let refused = history.as_array().unwrap().iter().any(|item| {
        item["content"]
            .as_str()
            .is_some_and(|c| c.contains("nobody can give it"))
    });
    assert!(refused, "{history}");
    let files = copy_of_workspace(&env, "alpha\n");
    let (code, report) = replay(&env, &[&id, "--workspace", files.to_str().unwrap()]);
    assert_eq!(code, Some(0), "{report}");
}

/// The kept corpus: session logs recorded by scripts/record-corpus.
fn corpus() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/corpus")
}

#[test]
fn the_kept_corpus_replays_identically() {
    // A failure here means today's pod does something else with answers
    // it once took: review the divergence (tickets/replay.md, "The kept
    // corpus"); record the corpus again only for a change meant to be.
    let env = TestEnv::new();
    // The MCP session's server, under its recorded name, where it is here.
    let servers = mcp_test_config(&env.pod_home().join("../mcp.json"), "test", json!({}));
    let out = env
        .pod()
        .args(["replay", "--json", "--dir"])
        .arg(corpus())
        .arg("--mcp-config")
        .arg(&servers)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let reports: Vec<Value> = ndjson(&out.stdout);
    let titles: Vec<&str> = reports
        .iter()
        .map(|report| {
            assert_eq!(report["status"], "identical", "{report}");
            report["title"].as_str().unwrap_or_default()
        })
        .collect();
    // The demo (a kill, a resume, compactions), a compaction-heavy
    // session, one with subagents, one with MCP calls, one cut by Ctrl-C
    // and resumed, one whose model server was unreachable, a session and
    // its rewind's fork, and a write approved over HTTP while it was
    // parked: all of them there.
    assert_eq!(
        titles,
        [
            "Add a --json flag to the `report` tool",
            "Write a.txt and b.txt, then check both",
            "Write a note, then count the notes and list the files",
            "Echo through the test server",
            "Write a.txt",
            "Say hello",
            "Write a.txt twice",
            "Write a.txt twice",
            "Write parked.txt",
        ],
        "{stdout}"
    );
    assert_eq!(reports[2]["subagents"], 2, "{stdout}");
    // The replay only read the corpus.
    let sessions = corpus().join("sessions");
    for entry in std::fs::read_dir(&sessions).unwrap() {
        let files: Vec<_> = std::fs::read_dir(entry.unwrap().path())
            .unwrap()
            .map(|f| f.unwrap().file_name())
            .collect();
        assert_eq!(files, ["log.jsonl"], "{}", sessions.display());
    }
}
