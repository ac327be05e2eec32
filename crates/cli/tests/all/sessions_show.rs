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

#[test]
fn sessions_help_explains_every_state_status_takes() {
    let env = TestEnv::new();
    // The states `--status` takes, as its refusal of another lists them.
    let out = env
        .pod()
        .args(["sessions", "--status", "sleeping"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    let states: Vec<&str> = stderr
        .lines()
        .find_map(|line| line.strip_prefix("hint: use one of "))
        .unwrap_or_else(|| panic!("{stderr}"))
        .split(", ")
        .collect();
    assert!(states.contains(&"awaiting_approval"), "{states:?}");
    let out = env.pod().args(["sessions", "--help"]).output().unwrap();
    assert_success(&out);
    let help = String::from_utf8_lossy(&out.stdout);
    // Each on a line of its own, with what it means.
    for state in &states {
        assert!(
            help.lines().any(|line| {
                let mut words = line.split_whitespace();
                words.next() == Some(*state) && words.next().is_some()
            }),
            "{state} is not explained:\n{help}"
        );
    }
    // A run that fails is `failed` now, not `interrupted`.
    assert!(!help.contains("or an error"), "{help}");
}

#[test]
fn a_damaged_row_keeps_its_line_in_the_task_column() {
    use pod_testkit::logs::{self, SessionLog};
    let env = TestEnv::new();
    let log = SessionLog::new("scripted", &env.workspace())
        .prompt("Read it")
        .answer("Read.", 10, 5)
        .prompt("And the rest")
        .answer("Done.", 10, 5);
    logs::damage_line(&log.write(&env.pod_home()), 3);
    let id = log.id().to_string();

    let out = env.pod().arg("sessions").output().unwrap();
    assert_success(&out);
    let table = String::from_utf8_lossy(&out.stdout);
    let row = table
        .lines()
        .find(|line| line.starts_with(&id[..8]))
        .unwrap_or_else(|| panic!("{table}"));
    assert!(row.contains("  damaged at line 3: "), "{row}");
    // The JSON keeps the whole reason, and no more fields than before.
    let listed = &env.sessions_json()[0];
    let reason = listed["reason"].as_str().unwrap();
    assert!(reason.starts_with(&format!("cannot read session {id}: ")));
    assert!(
        reason.contains("log.jsonl:3: corrupt session log"),
        "{reason}"
    );
    assert!(listed.get("damage").is_none(), "{listed}");
}

#[test]
fn a_status_filter_that_matches_nothing_says_the_store_has_sessions() {
    let env = TestEnv::new();
    let home = env.pod_home();
    let out = env
        .pod()
        .args(["sessions", "--status", "failed"])
        .output()
        .unwrap();
    assert_success(&out);
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        format!("no sessions in {} (try `pod demo`)\n", home.display())
    );

    let hi = env.script("hi.json", &script(vec![say("Hi.")]));
    let out = env
        .pod()
        .args(["run", "--script"])
        .arg(&hi)
        .arg("Say hi")
        .output()
        .unwrap();
    assert_success(&out);
    let out = env
        .pod()
        .args(["sessions", "--status", "failed"])
        .output()
        .unwrap();
    assert_success(&out);
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        format!(
            "no failed sessions (1 session in {}; `pod sessions` lists all)\n",
            home.display()
        )
    );
    let out = env
        .pod()
        .args(["sessions", "--status", "failed,cancelled"])
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&out.stdout).starts_with("no failed or cancelled sessions ("));
    // JSON stays a plain empty array.
    let out = env
        .pod()
        .args(["sessions", "--json", "--status", "failed"])
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "[]");
}
