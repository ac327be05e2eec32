//! `fork --at N` starts a session from a prefix, with that prefix's plan.

use crate::support::*;
use predicates::prelude::*;

#[test]
fn fork_brings_back_the_plan_of_the_prefix_and_leaves_the_source_alone() {
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
    let source = session_id(&ndjson(&out.stdout));
    let before = env.show_json(&source);

    // Items: 1 user, 2 assistant, 3 result (first plan), 4 assistant, ...
    let out = env
        .pod()
        .args(["fork", &source, "--at", "3", "--json"])
        .output()
        .unwrap();
    assert_success(&out);
    let fork: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(fork["forked_from"]["id"], source.as_str());
    assert_eq!(fork["forked_from"]["at"], 3);
    assert_eq!(fork["items"], 3);
    let fork_id = fork["id"].as_str().unwrap();
    assert_ne!(fork_id, source);

    let shown = env.show_json(fork_id);
    assert_eq!(
        statuses(&shown["todos"]),
        ["in_progress", "pending", "pending"]
    );
    assert_eq!(shown["history"].as_array().unwrap().len(), 3);
    assert_eq!(env.show_json(&source), before, "the source is untouched");
    assert_eq!(env.sessions_json().len(), 2);

    env.pod()
        .args(["fork", &source, "--at", "99"])
        .assert()
        .code(1)
        .stderr(predicate::str::contains("--at 99 is past the end"));
}
