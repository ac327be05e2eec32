//! `run` and `resume` on the scripted model, a kill -9 in between.

use crate::support::*;
use serde_json::json;
use std::io::{BufRead, BufReader};
use std::process::Stdio;

#[test]
fn run_json_streams_pod_events_framed_by_the_session() {
    let env = TestEnv::new();
    let script = env.script(
        "s.json",
        &script(vec![write_todos(&plan(0)), say("Planned.")]),
    );
    let out = env
        .pod()
        .args(["run", "--json", "--script"])
        .arg(&script)
        .arg("Plan it")
        .output()
        .unwrap();
    assert_success(&out);
    let lines = ndjson(&out.stdout);
    let id = session_id(&lines);
    assert_eq!(events(&lines, "todos_changed").len(), 1);
    assert_eq!(
        events(&lines, "turn_ended")[0]["reason"]["kind"],
        "end_turn"
    );
    let last = lines.last().unwrap();
    assert_eq!(last["event"], "session_finished");
    assert_eq!(last["session_id"], id.as_str());
    assert_eq!(last["todos"], json!({"completed": 0, "total": 3}));
}

#[test]
fn kill_9_then_resume_keeps_the_todos() {
    let env = TestEnv::new();
    // The third request hangs, so the kill lands at a known point.
    let mut hanging = say("never seen");
    hanging["delay_ms"] = json!(600_000);
    let steps = vec![
        write_todos(&plan(0)),
        write_todos(&plan(1)),
        hanging,
        write_todos(&plan(3)),
        say("All done."),
    ];
    let run_script = env.script("run.json", &script(steps.clone()));
    let mut resume_steps = steps;
    resume_steps[2] = write_todos(&plan(2));
    let resume_script = env.script("resume.json", &script(resume_steps));

    let mut child = env
        .pod_process()
        .args(["run", "--json", "--script"])
        .arg(&run_script)
        .arg("Do a, b and c")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let mut id = None;
    let mut updates = 0;
    for line in BufReader::new(stdout).lines() {
        let event: serde_json::Value = serde_json::from_str(&line.unwrap()).unwrap();
        if event["event"] == "session_started" {
            id = event["session_id"].as_str().map(String::from);
        }
        if event["event"] == "todos_changed" {
            updates += 1;
            if updates == 2 {
                break;
            }
        }
    }
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    let id = id.expect("session id");

    let shown = env.show_json(&id);
    assert_eq!(shown["session"]["status"], "interrupted");
    assert_eq!(
        statuses(&shown["todos"]),
        ["completed", "in_progress", "pending"]
    );

    let out = env
        .pod()
        .args(["resume", &id, "--json", "--script"])
        .arg(&resume_script)
        .output()
        .unwrap();
    assert_success(&out);
    let lines = ndjson(&out.stdout);
    assert_eq!(lines[0]["resumed"], true);
    // The resumed turn starts from the replayed plan: its reminder counts
    // the items and names the one in progress.
    let reminders = events(&lines, "reminder_injected");
    let text = reminders[0]["text"].as_str().unwrap();
    assert!(
        text.contains("Plan: 1 of 3 done, 1 pending. Now: b \"Step b\"."),
        "{text}"
    );
    assert!(!text.contains("a: Step a"), "{text}");
    let shown = env.show_json(&id);
    assert_eq!(shown["session"]["status"], "done");
    assert_eq!(statuses(&shown["todos"]), ["completed"; 3]);
}

/// `--provider openai-responses` end to end: `run` follows the stored
/// response within the process, and `resume` (a new process) remembers the
/// provider kind and sends its first request whole.
#[tokio::test(flavor = "multi_thread")]
async fn a_responses_session_resumes_on_the_same_wire_and_starts_whole() {
    use pod_testkit::server::LoopbackServer;
    use pod_testkit::wire::{response_id, responses_step};
    let server = LoopbackServer::start(vec![
        // A call to a tool the CLI does not have: answered with an error.
        responses_step("", &[("c1", r#"{"key":"a"}"#)]),
        responses_step("Hello.", &[]),
        responses_step("More.", &[]),
    ])
    .await;
    let env = TestEnv::new();
    let pod = |args: Vec<String>| {
        let mut cmd = env.pod_process();
        cmd.args(args);
        tokio::task::spawn_blocking(move || cmd.output().unwrap())
    };
    let url = server.url("/v1");
    let run = pod([
        "run",
        "--json",
        "--provider",
        "openai-responses",
        "--base-url",
        &url,
        "--model",
        "loop-model",
        "Hi",
    ]
    .map(String::from)
    .to_vec())
    .await
    .unwrap();
    assert_success(&run);
    let id = session_id(&ndjson(&run.stdout));
    let resume = pod(["resume", "--json", &id, "And more?"]
        .map(String::from)
        .to_vec())
    .await
    .unwrap();
    assert_success(&resume);
    let requests = server.requests();
    assert!(requests.iter().all(|r| r.path() == "/v1/responses"));
    let bodies = server.bodies();
    assert_eq!(bodies.len(), 3);
    assert!(bodies[0].get("previous_response_id").is_none());
    assert_eq!(
        bodies[1]["previous_response_id"],
        response_id("", &[("c1", "")])
    );
    assert_eq!(bodies[1]["input"].as_array().unwrap().len(), 1);
    // The resumed process knows no stored response: the whole history.
    assert!(bodies[2].get("previous_response_id").is_none());
    let input = bodies[2]["input"].as_array().unwrap();
    assert_eq!(input[0], json!({"role": "user", "content": "Hi"}));
    assert_eq!(input[1]["type"], "function_call");
    assert_eq!(input[3], json!({"role": "assistant", "content": "Hello."}));
    assert_eq!(input[4], json!({"role": "user", "content": "And more?"}));
    assert_eq!(bodies[2]["model"], "loop-model");
}
