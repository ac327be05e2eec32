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

#[test]
fn fork_saves_the_items_before_a_damaged_line() {
    use pod_testkit::logs::{self, SessionLog};
    let env = TestEnv::new();
    // Header on line 1, then one item per line: items 1..=6 on lines 2..=7.
    let log = SessionLog::new("scripted", &env.workspace())
        .prompt("First")
        .answer("One.", 10, 5)
        .prompt("Second")
        .answer("Two.", 10, 5)
        .prompt("Third")
        .answer("Three.", 10, 5);
    let source = log.id().to_string();
    // Line 5 holds item 4: the three items before it are sound.
    logs::damage_line(&log.write(&env.pod_home()), 5);

    // Reading the whole log fails and says what can be saved.
    let out = env.pod().args(["show", &source]).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains(":5"), "{stderr}");
    assert!(stderr.contains("pod fork ID"), "{stderr}");
    // Forking it all is refused with the line and the number to use.
    let out = env.pod().args(["fork", &source]).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("damaged at line 5"), "{stderr}");
    assert!(
        stderr.contains(&format!("pod fork {source} --at 3")),
        "{stderr}"
    );
    // The hint names the range without sending to `pod show`, which
    // refuses the damaged log (above).
    assert!(stderr.contains("any N from 0 to 3"), "{stderr}");
    assert!(!stderr.contains("`pod show` numbers the items"), "{stderr}");
    assert!(
        stderr.contains("the 3 items before it are sound"),
        "{stderr}"
    );
    env.pod()
        .args(["fork", &source, "--at", "4"])
        .assert()
        .code(1)
        .stderr(predicate::str::contains("damaged at line 5"));

    // Every N before the damage works, and the fork holds those items.
    let texts = ["First", "One.", "Second"];
    for at in 0..=3usize {
        let out = env
            .pod()
            .args(["fork", &source, "--at", &at.to_string(), "--json"])
            .output()
            .unwrap();
        assert_success(&out);
        let fork: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(fork["forked_from"]["at"], at);
        let shown = env.show_json(fork["id"].as_str().unwrap());
        let history: Vec<&str> = shown["history"]
            .as_array()
            .unwrap()
            .iter()
            .map(|item| item["text"].as_str().unwrap_or(""))
            .collect();
        assert_eq!(history, texts[..at], "fork at {at}");
    }
}
