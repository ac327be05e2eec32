//! The governor: session limits recorded in the log that hold across a
//! SIGKILL and a resume, raised with `pod budget`, subagents' spend in the
//! parent's meter, and the loop guard that reminds and then stops a model
//! repeating itself (and leaves a long plan alone).

use crate::support::*;
use serde_json::{json, Value};
use std::io::{BufRead, BufReader};
use std::process::Stdio;

const PRICED: &str =
    "[profiles.priced]\nkind = \"scripted\"\nprices = { input = 1.0, output = 1.0 }\n";

fn run_json(env: &TestEnv, args: &[&str]) -> (Option<i32>, Vec<Value>, String) {
    let out = env.pod().args(args).output().unwrap();
    (
        out.status.code(),
        ndjson(&out.stdout),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// `step` costing 1.00 at a price of 1 per million tokens.
fn costing_one(mut step: Value) -> Value {
    step["usage"] = json!({"prompt_tokens": 1_000_000, "completion_tokens": 0});
    step
}

#[test]
fn eighty_identical_successful_calls_are_reminded_then_stopped_with_exit_3() {
    let env = TestEnv::new();
    let steps = (0..80)
        .map(|_| call("bash", json!({"command": "echo pending"})))
        .chain([say("Done.")])
        .collect();
    let path = env.script("poll.json", &script(steps));
    let (code, lines, stderr) = run_json(
        &env,
        &[
            "run",
            "--json",
            "--yes",
            "--script",
            path.to_str().unwrap(),
            "Wait for the job",
        ],
    );
    assert_eq!(code, Some(3), "{stderr}");
    let reminders = events(&lines, "reminder_injected");
    assert_eq!(reminders.len(), 1, "{reminders:?}");
    let text = reminders[0]["text"].as_str().unwrap();
    assert!(
        text.contains(r#"repeating yourself: bash "echo pending" 5 times"#),
        "{text}"
    );
    let finished = lines.last().unwrap();
    assert_eq!(finished["requests"], 7, "{finished}");
    assert_eq!(
        finished["stopped"]["limit"],
        json!({"loop": {"what": "bash \"echo pending\"", "times": 7}})
    );
    assert!(
        stderr.contains(r#"stopped: loop (bash "echo pending" ×7)"#),
        "{stderr}"
    );
    let sessions = env.sessions_json();
    assert_eq!(sessions[0]["status"], "stopped");
    // The reminder and the stop are the runtime's behaviour: a replay of
    // the recorded answers goes the same way.
    assert_replays_identically(&env, &session_id(&lines));
}

/// `pod replay ID --json` says the session replays identically.
pub(crate) fn assert_replays_identically(env: &TestEnv, id: &str) {
    let out = env.pod().args(["replay", id, "--json"]).output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let report: Value = serde_json::from_str(stdout.lines().next().unwrap_or("null"))
        .unwrap_or_else(|err| panic!("{err}: {stdout}\n{}", String::from_utf8_lossy(&out.stderr)));
    assert_eq!(report["status"], "identical", "{report}");
    assert_eq!(out.status.code(), Some(0), "{report}");
}

#[test]
fn a_long_plan_with_repeated_work_calls_is_not_stopped() {
    let env = TestEnv::new();
    let n = 90;
    let list = |done: usize| -> Vec<Value> {
        (0..n)
            .map(|i| {
                let status = match i {
                    i if i < done => "completed",
                    i if i == done => "in_progress",
                    _ => "pending",
                };
                json!({"id": format!("t{i}"), "content": format!("Item {i}"), "status": status})
            })
            .collect()
    };
    let mut steps = vec![write_todos(&list(0))];
    for i in 0..n {
        // The same two calls for every item, and the same words after
        // every ten: a plan's rhythm, not a loop.
        steps.push(call("list_dir", json!({"path": "."})));
        steps.push(call("list_dir", json!({"path": "."})));
        steps.push(write_todos(&list(i + 1)));
        if (i + 1) % 10 == 0 && i + 1 < n {
            steps.push(say("Pausing."));
        }
    }
    steps.push(say("All done."));
    let path = env.script("plan.json", &script(steps));
    let (code, lines, stderr) = run_json(
        &env,
        &[
            "run",
            "--json",
            "--until-done",
            "--script",
            path.to_str().unwrap(),
            "Work the plan",
        ],
    );
    assert_eq!(code, Some(0), "{stderr}");
    let finished = lines.last().unwrap();
    assert_eq!(finished["todos"], json!({"completed": n, "total": n}));
    let loop_reminders = events(&lines, "reminder_injected")
        .into_iter()
        .filter(|event| event["text"].as_str().unwrap().contains("repeating"))
        .count();
    assert_eq!(loop_reminders, 0);
}

/// Runs `pod run` on `script` until `todos_changed` was printed `after`
/// times, then SIGKILLs it; the session id.
fn run_and_kill(env: &TestEnv, script: &std::path::Path, extra: &[&str], after: usize) -> String {
    let mut child = env
        .pod_process()
        .args(["run", "--json", "--profile", "priced"])
        .args(extra)
        .arg("--script")
        .arg(script)
        .arg("Work the plan")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let (mut id, mut seen) = (None, 0);
    for line in BufReader::new(stdout).lines() {
        let event: Value = serde_json::from_str(&line.unwrap()).unwrap();
        if event["event"] == "session_started" {
            id = event["session_id"].as_str().map(String::from);
        }
        if event["event"] == "todos_changed" {
            seen += 1;
            if seen == after {
                break;
            }
        }
    }
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    id.expect("session id")
}

/// Spent on a session and its subagents, from `pod show --json`.
fn spent(env: &TestEnv, id: &str) -> f64 {
    let shown = env.show_json(id);
    let own = shown["session"]["cost"].as_f64().unwrap_or(0.0);
    let children: f64 = shown["children"]
        .as_array()
        .map(|children| {
            children
                .iter()
                .filter_map(|child| child["cost"].as_f64())
                .sum()
        })
        .unwrap_or(0.0);
    own + children
}

#[test]
fn max_cost_survives_sigkill_and_resume_and_pod_budget_raises_it() {
    let env = TestEnv::new();
    env.config_file(PRICED);
    let mut hanging = say("never seen");
    hanging["delay_ms"] = json!(600_000);
    let plan_steps = |third: Value| -> Vec<Value> {
        let mut steps = vec![
            costing_one(write_todos(&plan(0))),
            costing_one(write_todos(&plan(1))),
            third,
        ];
        steps.extend((2..=3).map(|done| costing_one(write_todos(&plan(done)))));
        steps.push(costing_one(say("All done.")));
        steps
    };
    let run_script = env.script("run.json", &script(plan_steps(hanging)));
    // Two answers (2.00) are spent, the third hangs: killed there.
    let id = run_and_kill(&env, &run_script, &["--max-cost", "2.5"], 2);

    // The resume names no limit: the recorded one holds, and the meter
    // goes on from the 2.00 the log holds, so one request (3.00) is all.
    let resume_script = env.script(
        "resume.json",
        &script(plan_steps(costing_one(write_todos(&plan(2))))),
    );
    let resume = |env: &TestEnv| {
        run_json(
            env,
            &[
                "resume",
                "--json",
                &id,
                "--profile",
                "priced",
                "--script",
                resume_script.to_str().unwrap(),
            ],
        )
    };
    let (code, lines, stderr) = resume(&env);
    assert_eq!(code, Some(3), "{stderr}");
    assert_eq!(lines.last().unwrap()["requests"], 1, "{lines:?}");
    assert!(
        stderr.contains("stopped: budget (money 3.00 of 2.50)"),
        "{stderr}"
    );
    let total = spent(&env, &id);
    assert!(total <= 2.5 + 1.0, "spent {total}");
    let sessions = env.sessions_json();
    assert_eq!(sessions[0]["status"], "stopped");
    assert_eq!(
        sessions[0]["stopped_by"],
        json!({"session_cost": {"max": 2.5, "spent": 3.0}})
    );
    assert_eq!(sessions[0]["limits"], json!({"cost": 2.5}));

    // `pod budget` raises it (recorded), and a resume goes on to the end.
    let out = env
        .pod()
        .args(["budget", &id, "--max-cost", "10"])
        .output()
        .unwrap();
    assert_success(&out);
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(said.contains("limits: money 10.00"), "{said}");
    assert!(said.contains(&format!("pod resume {id}")), "{said}");
    let out = env.pod().args(["budget", &id, "--json"]).output().unwrap();
    let shown: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(shown["limits"], json!({"cost": 10.0}));
    assert_eq!(shown["stopped_by"]["session_cost"]["max"], 2.5, "{shown}");
    // Raised, it is still the stopped session it was until it goes on.
    assert_eq!(env.sessions_json()[0]["status"], "stopped");
    let (code, lines, stderr) = resume(&env);
    assert_eq!(code, Some(0), "{stderr}");
    assert_eq!(lines.last().unwrap()["todos"]["completed"], 3);
    // `pod show` tells the limits as they were set and raised.
    let out = env.pod().args(["show", &id]).output().unwrap();
    let shown = String::from_utf8_lossy(&out.stdout);
    assert!(
        shown.contains("── limits: money 2.50 (start) ──"),
        "{shown}"
    );
    assert!(shown.contains("── limits: money 10.00 (cli) ──"), "{shown}");
}

/// A session that delegates to a subagent. At a price of 1 per million
/// tokens, the session's answer costs 0.1 and each of the subagent's two
/// answers 2.
fn delegating_script() -> Value {
    let usage = |tokens: u64| json!({"prompt_tokens": tokens, "completion_tokens": 0});
    json!({
        "steps": [
            {"tool_calls": [{"name": "task", "arguments": {"description": "survey", "prompt": "Survey the workspace"}}],
             "usage": usage(100_000)},
            {"text": "Never asked: the session is over budget.", "usage": usage(1)}
        ],
        "agents": [
            {"task": "Survey the workspace", "steps": [
                {"tool_calls": [{"name": "list_dir", "arguments": {"path": "."}}], "usage": usage(2_000_000)},
                {"text": "The workspace is empty.", "usage": usage(2_000_000)}
            ]}
        ]
    })
}

#[test]
fn a_subagents_spend_counts_toward_its_parents_session_limit_across_resumes() {
    let env = TestEnv::new();
    env.config_file(PRICED);
    let path = env.script("delegate.json", &delegating_script());
    let args = |first: &str, id: Option<&str>| -> Vec<String> {
        let mut args: Vec<String> = vec![first.into(), "--json".into()];
        args.extend(id.map(String::from));
        args.extend(["--profile", "priced", "--script"].map(String::from));
        args.push(path.to_str().unwrap().into());
        args
    };
    let mut first = args("run", None);
    first.extend(["--max-cost".into(), "3".into(), "Survey".into()]);
    let first: Vec<&str> = first.iter().map(String::as_str).collect();
    let (code, lines, stderr) = run_json(&env, &first);
    assert_eq!(code, Some(3), "{stderr}");
    assert!(
        stderr.contains("stopped: budget (money 4.10 of 3.00)"),
        "{stderr}"
    );
    let id = session_id(&lines);
    // A resume reads the subagent's spend from its log: nothing is asked.
    let again = args("resume", Some(&id));
    let again: Vec<&str> = again.iter().map(String::as_str).collect();
    let (code, lines, stderr) = run_json(&env, &again);
    assert_eq!(code, Some(3), "{stderr}");
    assert_eq!(lines.last().unwrap()["requests"], 0);
    assert!(
        stderr.contains("stopped: budget (money 4.10 of 3.00)"),
        "{stderr}"
    );
    // A limit given to a resume is recorded too, and the session goes on.
    let mut raised = again.clone();
    raised.extend(["--max-cost", "10"]);
    let (code, lines, stderr) = run_json(&env, &raised);
    assert_eq!(code, Some(0), "{stderr}");
    assert_eq!(lines.last().unwrap()["requests"], 1);
    let out = env.pod().args(["budget", &id, "--json"]).output().unwrap();
    let shown: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(shown["limits"], json!({"cost": 10.0}), "{shown}");
}

#[test]
fn a_run_money_limit_is_recorded_and_each_resumed_run_gets_it_afresh() {
    let env = TestEnv::new();
    env.config_file(PRICED);
    let steps: Vec<Value> = (0..6)
        .map(|i| {
            costing_one(call(
                "list_dir",
                json!({"path": format!("./{}", "./".repeat(i))}),
            ))
        })
        .chain([costing_one(say("Looked."))])
        .collect();
    let path = env.script("look.json", &script(steps));
    let path = path.to_str().unwrap();
    let (code, lines, stderr) = run_json(
        &env,
        &[
            "run",
            "--json",
            "--profile",
            "priced",
            "--max-run-cost",
            "1.5",
            "--script",
            path,
            "Look",
        ],
    );
    assert_eq!(code, Some(3), "{stderr}");
    assert_eq!(lines.last().unwrap()["requests"], 2);
    let id = session_id(&lines);
    // No flag on resume: the recorded limit, for this run alone.
    let (code, lines, stderr) = run_json(&env, &["resume", "--json", &id]);
    assert_eq!(code, Some(3), "{stderr}");
    assert_eq!(lines.last().unwrap()["requests"], 2, "{stderr}");
    assert!(stderr.contains("the run's cost limit of 1.50"), "{stderr}");
}
