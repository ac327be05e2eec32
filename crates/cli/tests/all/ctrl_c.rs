//! Ctrl-C cancels the turn, keeps the log valid and exits 130.

use crate::support::*;
use serde_json::json;
use std::io::{BufRead, BufReader};
use std::process::Stdio;

#[test]
fn ctrl_c_cancels_the_turn_and_exits_130_with_a_resumable_session() {
    let env = TestEnv::new();
    let mut hanging = say("never seen");
    hanging["delay_ms"] = json!(600_000);
    let steps = vec![
        write_todos(&plan(0)),
        hanging,
        write_todos(&plan(3)),
        say("Done."),
    ];
    let run_script = env.script("run.json", &script(steps.clone()));
    let mut child = env
        .pod_process()
        .args(["run", "--json", "--script"])
        .arg(&run_script)
        .arg("Do it")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    // The handler is installed before the first event is printed.
    for line in lines.by_ref() {
        if line.unwrap().contains("\"todos_changed\"") {
            break;
        }
    }
    // While it runs, the session is listed as running (it holds the lock).
    let listed = env.sessions_json();
    assert_eq!(listed[0]["status"], "running");
    let killed = std::process::Command::new("kill")
        .args(["-s", "INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    let rest: Vec<serde_json::Value> = lines
        .map(|l| serde_json::from_str(&l.unwrap()).unwrap())
        .collect();
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(130));
    let finished = rest.last().unwrap();
    assert_eq!(finished["event"], "session_finished");
    assert_eq!(finished["interrupted"], true);
    assert_eq!(finished["reason"]["kind"], "cancelled");

    let id = finished["session_id"].as_str().unwrap();
    let shown = env.show_json(id);
    assert_eq!(shown["session"]["status"], "interrupted");
    assert_eq!(
        statuses(&shown["todos"]),
        ["in_progress", "pending", "pending"]
    );

    let mut resume_steps = steps;
    resume_steps[1] = say("Picking up again.");
    let resume_script = env.script("resume.json", &script(resume_steps));
    env.pod()
        .args(["resume", id, "--until-done", "--script"])
        .arg(&resume_script)
        .assert()
        .success();
    assert_eq!(env.show_json(id)["session"]["status"], "done");
}
