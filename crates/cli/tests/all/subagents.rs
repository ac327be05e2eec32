//! Subagents through the `pod` binary: child events nested under the
//! `task` call (human) and tagged (`--json`), the tree in `pod sessions`,
//! a session's children in `pod show`, and a run killed while its children
//! work resumed without starting them over.

use crate::support::*;
use serde_json::{json, Value};

/// A parent that starts two subagents, one planning and one read-only.
pub(crate) fn tree_script() -> Value {
    json!({
        "model": "scripted-test",
        "steps": [
            {"text": "Splitting the work.", "tool_calls": [
                {"name": "task", "arguments": {"description": "count notes", "prompt": "Count the notes"}},
                {"name": "task", "arguments": {"description": "list files", "prompt": "List the files", "read_only": true}}
            ]},
            {"text": "Both subagents reported."}
        ],
        "agents": [
            {"task": "Count the notes", "steps": [
                write_todos(&[todo("n", "in_progress")]),
                call("list_dir", json!({"path": "."})),
                write_todos(&[todo("n", "completed")]),
                {"text": "There are 0 notes."}
            ]},
            {"task": "List the files", "steps": [
                call("glob", json!({"pattern": "*"})),
                {"text": "The workspace is empty."}
            ]}
        ]
    })
}

#[test]
fn child_calls_and_plans_show_nested_under_the_task_call() {
    let env = TestEnv::new();
    let script = env.script("tree.json", &tree_script());
    let out = env
        .pod()
        .args(["run", "--script"])
        .arg(&script)
        .arg("Look at the workspace")
        .output()
        .unwrap();
    assert_success(&out);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("→ task: count notes\n"), "{stdout}");
    assert!(
        stdout.contains("→ task: list files (read-only)\n"),
        "{stdout}"
    );
    assert!(stdout.contains("    │ count notes → list_dir("), "{stdout}");
    assert!(
        stdout.contains("    │ count notes: plan 1/1 done"),
        "{stdout}"
    );
    assert!(stdout.contains("    │ list files → glob("), "{stdout}");
    assert!(stdout.contains("    │ list files: finished"), "{stdout}");
    // The children's answers are the task results, shown as the parent's.
    assert!(stdout.contains("✓ There are 0 notes."), "{stdout}");
    assert!(stdout.contains("Both subagents reported."), "{stdout}");
}

#[test]
fn json_tags_child_events_and_sessions_and_show_list_the_tree() {
    let env = TestEnv::new();
    let script = env.script("tree.json", &tree_script());
    let out = env
        .pod()
        .args(["run", "--json", "--script"])
        .arg(&script)
        .arg("Look at the workspace")
        .output()
        .unwrap();
    assert_success(&out);
    let lines = ndjson(&out.stdout);
    let parent = session_id(&lines);
    let tagged = events(&lines, "subagent");
    let children: std::collections::BTreeSet<&str> = tagged
        .iter()
        .map(|e| e["session_id"].as_str().unwrap())
        .collect();
    assert_eq!(children.len(), 2, "{tagged:?}");
    assert!(tagged
        .iter()
        .any(|e| e["description"] == "count notes" && e["inner"]["event"] == "todos_changed"));

    // `pod sessions`: the parent, then its children indented under it.
    let sessions = env.sessions_json();
    assert_eq!(sessions.len(), 3);
    assert_eq!(sessions[0]["id"], parent.as_str());
    for child in &sessions[1..] {
        assert_eq!(child["parent"]["session_id"], parent.as_str());
        assert_eq!(child["parent"]["depth"], 1);
        // Finished: "done", with its plan complete or without a plan.
        assert_eq!(child["status"], "done", "{child}");
    }
    let table = env.pod().arg("sessions").output().unwrap();
    let table = String::from_utf8_lossy(&table.stdout);
    let rows: Vec<&str> = table.lines().skip(1).collect();
    assert!(rows[0].starts_with(&parent[..8]), "{table}");
    assert!(
        rows[1].starts_with('└') && rows[2].starts_with('└'),
        "{table}"
    );
    // The task column: the parent's first prompt, a child's description.
    assert!(rows[0].contains("Look at the workspace"), "{table}");
    assert!(
        rows.iter()
            .any(|r| r.starts_with('└') && r.contains("count notes")),
        "{table}"
    );

    // `pod show`: the parent lists its children; a child names its parent.
    let shown = env.show_json(&parent);
    let listed: Vec<&str> = shown["children"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["id"].as_str().unwrap())
        .collect();
    assert_eq!(listed.len(), 2);
    assert!(listed.iter().all(|id| children.contains(id)));
    let human = env.pod().args(["show", &parent]).output().unwrap();
    let human = String::from_utf8_lossy(&human.stdout);
    assert!(human.contains("subagents:"), "{human}");
    let child = env.pod().args(["show", listed[0]]).output().unwrap();
    let child = String::from_utf8_lossy(&child.stdout);
    assert!(
        child.contains(&format!("subagent   of {parent}")),
        "{child}"
    );
}

#[test]
fn a_run_killed_while_its_children_work_resumes_them_from_their_logs() {
    let env = TestEnv::new();
    let mut script = tree_script();
    // The second child waits (ten minutes) before its answer, so the kill
    // lands while it works; the first has answered by then.
    script["agents"][1]["steps"][1]["delay_ms"] = json!(600_000);
    let path = env.script("tree.json", &script);
    let mut child = env
        .pod_process()
        .args(["run", "--json", "--script"])
        .arg(&path)
        .arg("Look at the workspace")
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let mut parent = None;
    let mut waiting = false;
    let mut first_done = false;
    for line in std::io::BufRead::lines(std::io::BufReader::new(stdout)) {
        let event: Value = serde_json::from_str(&line.unwrap()).unwrap();
        if event["event"] == "session_started" {
            parent = event["session_id"].as_str().map(String::from);
        }
        if event["event"] == "subagent" {
            let inner = &event["inner"];
            first_done |= event["description"] == "count notes" && inner["event"] == "turn_ended";
            waiting |= event["description"] == "list files"
                && inner["event"] == "tool_call_finished"
                && inner["name"] == "glob";
        }
        if first_done && waiting {
            break;
        }
    }
    child.kill().unwrap();
    child.wait().unwrap();
    let parent = parent.expect("the session was announced");

    // Without the wait, the resumed tree finishes.
    script["agents"][1]["steps"][1]
        .as_object_mut()
        .unwrap()
        .remove("delay_ms");
    let path = env.script("tree.json", &script);
    let out = env
        .pod()
        .args(["resume", &parent, "--json", "--script"])
        .arg(&path)
        .output()
        .unwrap();
    assert_success(&out);
    let lines = ndjson(&out.stdout);
    // Only the unfinished child ran again; the finished one's answer came
    // from its log.
    let ran: std::collections::BTreeSet<&str> = events(&lines, "subagent")
        .iter()
        .map(|e| e["description"].as_str().unwrap())
        .collect();
    assert_eq!(ran.into_iter().collect::<Vec<_>>(), vec!["list files"]);
    let shown = env.show_json(&parent);
    let results: Vec<&str> = shown["history"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|i| i["type"] == "tool_result")
        .map(|i| i["content"].as_str().unwrap())
        .collect();
    assert!(
        results.iter().any(|r| r.starts_with("There are 0 notes.")),
        "{results:?}"
    );
    assert!(
        results
            .iter()
            .any(|r| r.starts_with("The workspace is empty.")),
        "{results:?}"
    );
    for child in shown["children"].as_array().unwrap() {
        let id = child["id"].as_str().unwrap();
        let history = env.show_json(id)["history"].clone();
        let prompts = history
            .as_array()
            .unwrap()
            .iter()
            .filter(|i| i["type"] == "user")
            .count();
        assert_eq!(prompts, 1, "child {id} was started over");
    }
}
