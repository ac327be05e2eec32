//! `sessions --json` and `show --json` contain what they claim.

use crate::support::*;

#[test]
fn sessions_and_show_describe_a_finished_run() {
    let env = TestEnv::new();
    let script = env.script(
        "s.json",
        &script(vec![
            write_todos(&plan(0)),
            write_todos(&plan(3)),
            say("Done."),
        ]),
    );
    let out = env
        .pod()
        .args(["run", "--json", "--script"])
        .arg(&script)
        .arg("Do it all")
        .output()
        .unwrap();
    assert!(out.status.success());
    let id = session_id(&ndjson(&out.stdout));

    let sessions = env.sessions_json();
    assert_eq!(sessions.len(), 1);
    let s = &sessions[0];
    assert_eq!(s["id"], id.as_str());
    assert_eq!(s["status"], "done");
    assert_eq!(s["model"], "scripted-test");
    assert_eq!(s["todos"]["completed"], 3);
    assert_eq!(s["todos"]["total"], 3);
    assert_eq!(
        s["workspace"].as_str().unwrap(),
        env.workspace().canonicalize().unwrap().to_str().unwrap()
    );
    assert!(s["created_at"].as_str().is_some() && s["updated_at"].as_str().is_some());
    assert!(exists(std::path::Path::new(
        s["log_path"].as_str().unwrap()
    )));

    let shown = env.show_json(&id[..8]);
    assert_eq!(shown["session"]["id"], id.as_str());
    let kinds: Vec<&str> = shown["history"]
        .as_array()
        .unwrap()
        .iter()
        .map(|item| item["type"].as_str().unwrap())
        .collect();
    assert_eq!(
        kinds,
        [
            "user",
            "assistant",
            "tool_result",
            "assistant",
            "tool_result",
            "assistant"
        ]
    );
    assert_eq!(shown["history"][0]["text"], "Do it all");
    assert_eq!(statuses(&shown["todos"]), ["completed"; 3]);
}
