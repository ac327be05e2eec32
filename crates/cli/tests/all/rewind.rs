//! `pod diff` and `pod rewind` over the checkpoints a session takes of a
//! workspace that is not a git repository, through the real binary.

use crate::support::*;
use serde_json::{json, Value};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

fn read(dir: &Path, name: &str) -> Option<String> {
    std::fs::read_to_string(dir.join(name)).ok()
}

fn executable(dir: &Path, name: &str) -> bool {
    std::fs::metadata(dir.join(name))
        .unwrap()
        .permissions()
        .mode()
        & 0o111
        != 0
}

/// `git ARGS` in `dir`, which must succeed; its stdout.
fn git(dir: &Path, args: &[&str]) -> String {
    let out = std::process::Command::new("git")
        .args(["-c", "user.name=t", "-c", "user.email=t@example.com"])
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Makes `dir` a git repository with one commit (a README).
fn repository_with_a_commit(dir: &Path) {
    git(dir, &["init", "-q"]);
    std::fs::write(dir.join("README"), "repo\n").unwrap();
    git(dir, &["add", "README"]);
    git(dir, &["commit", "-q", "-m", "start"]);
}

fn json_of(out: &std::process::Output) -> Value {
    assert_success(out);
    serde_json::from_slice(&out.stdout).unwrap()
}

/// Items: 1 prompt; 2-3 the first plan; 4-5 write a.txt; 6-7 edit it;
/// 8-9 the plan moves on; 10-11 bash creates, deletes, renames and
/// chmods; 12 the answer.
fn working_session(env: &TestEnv) -> String {
    let ws = env.workspace();
    std::fs::write(ws.join("gone.txt"), "bye\n").unwrap();
    std::fs::write(ws.join("old.txt"), "old\n").unwrap();
    std::fs::write(ws.join("tool.sh"), "#!/bin/sh\necho tool\n").unwrap();
    let script = env.script(
        "s.json",
        &script(vec![
            write_todos(&plan(0)),
            call("write_file", json!({"path": "a.txt", "content": "one\n"})),
            call("edit_file", json!({"path": "a.txt", "old_string": "one", "new_string": "two"})),
            write_todos(&plan(1)),
            call(
                "bash",
                json!({"command": "echo new > b.txt; rm gone.txt; mv old.txt renamed.txt; chmod +x tool.sh"}),
            ),
            say("Done."),
        ]),
    );
    let out = env
        .pod()
        .args(["run", "--json", "--yes", "--script"])
        .arg(&script)
        .arg("Change the files")
        .output()
        .unwrap();
    assert_success(&out);
    session_id(&ndjson(&out.stdout))
}

#[test]
fn diff_shows_what_the_session_changed_and_rewind_restores_each_point() {
    let env = TestEnv::new();
    let ws = env.workspace();
    let id = working_session(&env);
    assert!(executable(&ws, "tool.sh"));

    // The whole session.
    let whole = json_of(&env.pod().args(["diff", &id, "--json"]).output().unwrap());
    let files: Vec<(String, String)> = whole["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            (
                f["path"].as_str().unwrap().into(),
                f["status"].as_str().unwrap().into(),
            )
        })
        .collect();
    let expect = |list: &[(&str, &str)]| -> Vec<(String, String)> {
        list.iter()
            .map(|(p, s)| (p.to_string(), s.to_string()))
            .collect()
    };
    assert_eq!(
        files,
        expect(&[
            ("a.txt", "added"),
            ("b.txt", "added"),
            ("gone.txt", "deleted"),
            ("old.txt", "deleted"),
            ("renamed.txt", "added"),
            ("tool.sh", "modified"),
        ])
    );
    let patch = whole["patch"].as_str().unwrap();
    assert!(patch.contains("+two"), "{patch}");
    assert!(
        patch.contains("old mode 100644\nnew mode 100755"),
        "{patch}"
    );
    // One step: the edit.
    let out = env
        .pod()
        .args(["diff", &id, "--from", "5", "--to", "7"])
        .output()
        .unwrap();
    assert_success(&out);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("-one\n+two\n"), "{text}");
    assert!(!text.contains("b.txt"), "{text}");

    // pod show says what each call changed, under its result.
    let out = env.pod().args(["show", &id]).output().unwrap();
    let shown = String::from_utf8_lossy(&out.stdout);
    assert!(shown.contains("files: A a.txt\n"), "{shown}");
    assert!(shown.contains("files: M a.txt\n"), "{shown}");
    assert!(
        shown.contains("files: A b.txt, D gone.txt, D old.txt, A renamed.txt, M tool.sh\n"),
        "{shown}"
    );

    // A fork with the files as they were after the write, in a new
    // directory; the workspace itself is left as it is.
    let copy = env.pod_home().join("../copy");
    let out = env
        .pod()
        .args(["fork", &id, "--at", "5", "--json", "--files"])
        .arg(&copy)
        .output()
        .unwrap();
    let forked = json_of(&out);
    assert_eq!(read(&copy, "a.txt").as_deref(), Some("one\n"));
    assert_eq!(read(&copy, "gone.txt").as_deref(), Some("bye\n"));
    assert_eq!(read(&copy, "b.txt"), None);
    assert_eq!(read(&ws, "b.txt").as_deref(), Some("new\n"));
    let in_copy = env.show_json(forked["id"].as_str().unwrap());
    assert_eq!(
        std::fs::canonicalize(in_copy["session"]["workspace"].as_str().unwrap()).unwrap(),
        std::fs::canonicalize(&copy).unwrap()
    );
    let out = env
        .pod()
        .args(["fork", &id, "--at", "5", "--files"])
        .arg(&copy)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("is not empty"));

    // Back to after the edit: the bash step is undone, byte for byte and
    // mode for mode, and the fork's plan is the plan then.
    let rewound = json_of(
        &env.pod()
            .args(["rewind", &id, "--to", "7", "--json"])
            .output()
            .unwrap(),
    );
    let fork = rewound["session_id"].as_str().unwrap().to_string();
    assert_eq!(rewound["forked_from"]["at"], 7);
    assert_eq!(read(&ws, "a.txt").as_deref(), Some("two\n"));
    assert_eq!(read(&ws, "gone.txt").as_deref(), Some("bye\n"));
    assert_eq!(read(&ws, "old.txt").as_deref(), Some("old\n"));
    assert_eq!(read(&ws, "b.txt"), None);
    assert_eq!(read(&ws, "renamed.txt"), None);
    assert!(!executable(&ws, "tool.sh"));
    let shown = env.show_json(&fork);
    assert_eq!(shown["history"].as_array().unwrap().len(), 7);
    assert_eq!(
        statuses(&shown["todos"]),
        ["in_progress", "pending", "pending"]
    );

    // From the fork, back to before the first write.
    let earlier = json_of(
        &env.pod()
            .args(["rewind", &fork, "--to", "3", "--json"])
            .output()
            .unwrap(),
    );
    assert_eq!(read(&ws, "a.txt"), None);
    assert_eq!(read(&ws, "gone.txt").as_deref(), Some("bye\n"));
    let second = earlier["session_id"].as_str().unwrap().to_string();

    // A file changed by someone else since then: refused, listed, and
    // done with --force.
    std::fs::write(ws.join("old.txt"), "edited by hand\n").unwrap();
    let out = env
        .pod()
        .args(["rewind", &second, "--to", "1"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("changed outside session"), "{stderr}");
    assert!(stderr.contains("M old.txt"), "{stderr}");
    assert_eq!(read(&ws, "old.txt").as_deref(), Some("edited by hand\n"));
    let out = env
        .pod()
        .args(["rewind", &second, "--to", "1", "--force"])
        .output()
        .unwrap();
    assert_success(&out);
    assert_eq!(read(&ws, "old.txt").as_deref(), Some("old\n"));
}

#[test]
fn a_session_killed_mid_call_rewinds_only_with_force() {
    let env = TestEnv::new();
    let ws = env.workspace();
    std::fs::write(ws.join("keep.txt"), "kept\n").unwrap();
    let script = env.script(
        "s.json",
        &script(vec![
            call("write_file", json!({"path": "a.txt", "content": "a\n"})),
            call("bash", json!({"command": "echo partial > p.txt; sleep 60"})),
            say("Never."),
        ]),
    );
    let mut child = env
        .pod_process()
        .args(["run", "--yes", "--script"])
        .arg(&script)
        .arg("Work")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    // Killed while the command runs (its file is there).
    let mut waited = 0;
    while read(&ws, "p.txt").is_none() {
        assert!(waited < 600, "the command never ran");
        std::thread::sleep(std::time::Duration::from_millis(50));
        waited += 1;
    }
    child.kill().unwrap();
    child.wait().unwrap();
    let id = env.sessions_json()[0]["id"].as_str().unwrap().to_string();

    let out = env
        .pod()
        .args(["rewind", &id, "--to", "3"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("stopped while a call ran"), "{stderr}");
    assert_eq!(read(&ws, "p.txt").as_deref(), Some("partial\n"));
    let out = env
        .pod()
        .args(["rewind", &id, "--to", "3", "--force"])
        .output()
        .unwrap();
    assert_success(&out);
    // After item 3 (the write's result): a.txt, not the killed call's file.
    assert_eq!(read(&ws, "a.txt").as_deref(), Some("a\n"));
    assert_eq!(read(&ws, "p.txt"), None);
    assert_eq!(read(&ws, "keep.txt").as_deref(), Some("kept\n"));
    // The session itself still resumes (the killed call is closed as
    // interrupted, and the model goes on).
    let out = env.pod().args(["resume", &id, "--yes"]).output().unwrap();
    assert_success(&out);
    assert!(String::from_utf8_lossy(&out.stdout).contains("Never."));
}

/// Two sessions with --worktree in one repository, run at once: each
/// writes the same file name in its own worktree and branch; the
/// repository's own checkout is untouched.
#[test]
fn two_worktree_sessions_in_one_repository_never_touch_each_other() {
    let env = TestEnv::new();
    let ws = env.workspace();
    repository_with_a_commit(&ws);
    let git = |args: &[&str]| git(&ws, args);
    let start = |who: &str| {
        let script = env.script(
            &format!("{who}.json"),
            &script(vec![
                call(
                    "write_file",
                    json!({"path": "notes.md", "content": format!("{who}\n")}),
                ),
                call("bash", json!({"command": "sleep 1; cat notes.md README"})),
                say("Done."),
            ]),
        );
        env.pod_process()
            .args(["run", "--json", "--yes", "--worktree", "--script"])
            .arg(&script)
            .arg(format!("Write {who}'s notes"))
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap()
    };
    let (first, second) = (start("ann"), start("bob"));
    let outs = [
        first.wait_with_output().unwrap(),
        second.wait_with_output().unwrap(),
    ];
    let mut seen = Vec::new();
    for (who, out) in ["ann", "bob"].iter().zip(&outs) {
        assert_success(out);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains("working in worktree"), "{stderr}");
        let id = session_id(&ndjson(&out.stdout));
        let shown = env.show_json(&id);
        let dir = std::path::PathBuf::from(shown["session"]["workspace"].as_str().unwrap());
        assert_ne!(dir, ws);
        assert_eq!(
            read(&dir, "notes.md").as_deref(),
            Some(format!("{who}\n").as_str())
        );
        assert_eq!(read(&dir, "README").as_deref(), Some("repo\n"));
        let human = env.pod().args(["show", &id]).output().unwrap();
        let human = String::from_utf8_lossy(&human.stdout);
        assert!(human.contains("worktree   branch pod/"), "{human}");
        seen.push(dir);
    }
    assert_ne!(seen[0], seen[1]);
    // The repository's checkout has neither agent's file; it has both
    // branches.
    assert_eq!(read(&ws, "notes.md"), None);
    assert_eq!(git(&["branch", "--list", "pod/*"]).lines().count(), 2);
}

/// Two subagents started with worktree: true at once each write the same
/// file name in their own worktree and branch; the parent's workspace has
/// neither file, and each result names the branch.
#[test]
fn subagents_in_worktrees_write_side_by_side() {
    let env = TestEnv::new();
    let ws = env.workspace();
    repository_with_a_commit(&ws);
    let git = |args: &[&str]| git(&ws, args);
    let child = |who: &str| {
        json!({"task": format!("Write {who}"), "steps": [
            call("write_file", json!({"path": "notes.md", "content": format!("{who}\n")})),
            {"text": format!("{who} wrote notes.md")}
        ]})
    };
    let script = env.script(
        "s.json",
        &json!({
            "model": "scripted-test",
            "steps": [
                {"tool_calls": [
                    {"name": "task", "arguments": {"description": "ann", "prompt": "Write ann", "worktree": true}},
                    {"name": "task", "arguments": {"description": "bob", "prompt": "Write bob", "worktree": true}}
                ]},
                {"text": "Both wrote."}
            ],
            "agents": [child("ann"), child("bob")]
        }),
    );
    let out = env
        .pod()
        .args(["run", "--json", "--yes", "--script"])
        .arg(&script)
        .arg("Split it")
        .output()
        .unwrap();
    assert_success(&out);
    let id = session_id(&ndjson(&out.stdout));
    assert_eq!(read(&ws, "notes.md"), None);
    let results: Vec<String> = env.show_json(&id)["history"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|item| item["type"] == "tool_result")
        .map(|item| item["content"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(results.len(), 2);
    for (who, result) in ["ann", "bob"].iter().zip(&results) {
        assert!(
            result.contains(&format!("{who} wrote notes.md")),
            "{result}"
        );
        let dir = result
            .split("own git worktree ")
            .nth(1)
            .and_then(|rest| rest.split(" on branch ").next())
            .unwrap_or_else(|| panic!("no worktree named: {result}"));
        assert_eq!(
            read(Path::new(dir), "notes.md").as_deref(),
            Some(format!("{who}\n").as_str())
        );
    }
    assert_eq!(git(&["branch", "--list", "pod/*"]).lines().count(), 2);
}

/// A file over the size limit is left out of the snapshots, and `pod
/// diff` says so instead of storing it.
#[test]
fn a_file_too_large_to_store_is_named_not_captured() {
    let env = TestEnv::new();
    let script = env.script(
        "s.json",
        &script(vec![
            call(
                "bash",
                json!({"command": "truncate -s 60M data.bin; echo small > a.txt"}),
            ),
            say("Done."),
        ]),
    );
    let out = env
        .pod()
        .args(["run", "--json", "--yes", "--script"])
        .arg(&script)
        .arg("Make data")
        .output()
        .unwrap();
    assert_success(&out);
    let id = session_id(&ndjson(&out.stdout));
    let diff = json_of(&env.pod().args(["diff", &id, "--json"]).output().unwrap());
    assert_eq!(diff["not_captured"], json!(["data.bin"]));
    let paths: Vec<&str> = diff["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["path"].as_str().unwrap())
        .collect();
    assert_eq!(paths, ["a.txt"]);
    let out = env.pod().args(["diff", &id]).output().unwrap();
    assert_success(&out);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("not captured (over 50 MB, not in any snapshot): data.bin"),
        "{stderr}"
    );
}
