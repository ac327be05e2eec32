//! Budgets end runaway runs honestly (exit 3, the limit named, the session
//! `stopped`), never ordinary long plans, and `pod resume` picks a stopped
//! session up with a fresh budget and its recorded settings.

use crate::support::*;
use serde_json::{json, Value};

/// A plan of `n` items worked one at a time: `work` `list_dir` calls and a
/// `todo_write` per item; with `pause_every`, the model ends its turn after
/// that many items (until-done continues it).
fn long_plan(n: usize, pause_every: Option<usize>) -> Value {
    plan_with_work(n, 1, pause_every)
}

fn plan_with_work(n: usize, work: usize, pause_every: Option<usize>) -> Value {
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
        for _ in 0..work {
            steps.push(call("list_dir", json!({"path": "."})));
        }
        steps.push(write_todos(&list(i + 1)));
        if pause_every.is_some_and(|every| (i + 1) % every == 0 && i + 1 < n) {
            steps.push(say("Pausing."));
        }
    }
    steps.push(say("All done."));
    script(steps)
}

fn run_json(env: &TestEnv, args: &[&str]) -> (Option<i32>, Vec<Value>, String) {
    let out = env.pod().args(args).output().unwrap();
    (
        out.status.code(),
        ndjson(&out.stdout),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn a_300_step_plan_runs_to_the_end_under_until_done() {
    let env = TestEnv::new();
    // A full list (todo_write takes at most 100 items), two work calls and
    // a todo_write an item, no pause: 302 requests in one turn, three times
    // what the old per-turn cap allowed.
    let path = env.script("long.json", &plan_with_work(100, 2, None));
    let script = path.to_str().unwrap();
    let (code, lines, stderr) = run_json(
        &env,
        &[
            "run",
            "--json",
            "--until-done",
            "--script",
            script,
            "Work the plan",
        ],
    );
    assert_eq!(code, Some(0), "{stderr}");
    let finished = lines.last().unwrap();
    assert_eq!(finished["event"], "session_finished");
    assert_eq!(finished["todos"], json!({"completed": 100, "total": 100}));
    assert_eq!(finished["requests"], 302);
    assert!(finished.get("stopped").is_none(), "{finished}");
    assert_eq!(env.sessions_json()[0]["status"], "done");
}

#[test]
fn a_run_budget_stops_with_exit_3_and_resume_finishes_with_a_fresh_one() {
    let env = TestEnv::new();
    // Three items, a pause after each: 1 + 3 × 2 + 2 pauses + 1 = 10 requests.
    let path = env.script("plan.json", &long_plan(3, Some(1)));
    let script = path.to_str().unwrap();
    let (code, lines, stderr) = run_json(
        &env,
        &[
            "run",
            "--json",
            "--until-done",
            "--max-run-requests",
            "6",
            "--script",
            script,
            "Work the plan",
        ],
    );
    assert_eq!(code, Some(3), "{stderr}");
    let id = session_id(&lines);
    let finished = lines.last().unwrap();
    assert_eq!(finished["requests"], 6);
    assert_eq!(finished["stopped"]["limit"], json!({"run_requests": 6}));
    assert_eq!(
        finished["reason"],
        json!({"kind": "limit", "detail": {"run_requests": 6}})
    );
    assert_eq!(
        stderr,
        format!(
            "pod: stopped by the run budget of 6 model requests with 2 of 3 todos completed; \
             continue with: pod resume {id}\n"
        )
    );
    let sessions = env.sessions_json();
    assert_eq!(sessions[0]["status"], "stopped");
    assert_eq!(sessions[0]["stopped_by"], json!({"run_requests": 6}));

    // No flags: the scripted model, --until-done and the budget come from
    // the session's record; the run starts with nothing spent.
    let (code, lines, stderr) = run_json(&env, &["resume", "--json", &id]);
    assert_eq!(code, Some(0), "{stderr}");
    let finished = lines.last().unwrap();
    assert_eq!(finished["todos"], json!({"completed": 3, "total": 3}));
    assert_eq!(finished["requests"], 4);
    assert_eq!(env.sessions_json()[0]["status"], "done");
    let shown = env.show_json(&id);
    let history = shown["history"].as_array().unwrap();
    assert_eq!(history.last().unwrap()["text"], "All done.");
}

#[test]
fn a_budget_of_one_request_is_said_in_the_singular() {
    let env = TestEnv::new();
    let path = env.script("plan.json", &long_plan(2, None));
    let (code, _, stderr) = run_json(
        &env,
        &[
            "run",
            "--json",
            "--max-run-requests",
            "1",
            "--script",
            path.to_str().unwrap(),
            "Work the plan",
        ],
    );
    assert_eq!(code, Some(3), "{stderr}");
    assert!(
        stderr.contains("stopped by the run budget of 1 model request with"),
        "{stderr}"
    );
}

#[test]
fn the_per_turn_budget_is_a_flag_and_a_profile_setting() {
    let env = TestEnv::new();
    let path = env.script("plan.json", &long_plan(5, None));
    env.config_file(&format!(
        "[budget]\nmax_requests = 9\n\
         [profiles.capped]\nkind = \"scripted\"\nscript = {:?}\n\
         [profiles.capped.budget]\nmax_requests = 4\n",
        path.to_str().unwrap()
    ));
    let (code, lines, stderr) = run_json(
        &env,
        &["run", "--json", "--profile", "capped", "Work the plan"],
    );
    assert_eq!(code, Some(3), "{stderr}");
    assert_eq!(lines.last().unwrap()["requests"], 4);
    assert!(
        stderr.contains("per-turn budget of 4 model requests"),
        "{stderr}"
    );

    // The flag wins over the profile.
    let (code, lines, stderr) = run_json(
        &env,
        &[
            "run",
            "--json",
            "--profile",
            "capped",
            "--max-requests",
            "6",
            "Work",
        ],
    );
    assert_eq!(code, Some(3), "{stderr}");
    assert_eq!(lines.last().unwrap()["requests"], 6);
}

#[test]
fn a_token_budget_stops_the_run() {
    let env = TestEnv::new();
    let path = env.script("plan.json", &long_plan(3, None));
    let (code, lines, stderr) = run_json(
        &env,
        &[
            "run",
            "--json",
            "--max-run-tokens",
            "1",
            "--script",
            path.to_str().unwrap(),
            "Work",
        ],
    );
    assert_eq!(code, Some(3), "{stderr}");
    let finished = lines.last().unwrap();
    assert_eq!(
        finished["requests"], 1,
        "the first response spent the budget"
    );
    assert_eq!(finished["stopped"]["limit"], json!({"run_tokens": 1}));
}

#[test]
fn a_model_repeating_a_failing_call_is_stopped_by_the_loop_guard() {
    let env = TestEnv::new();
    let same = call("read_file", json!({"path": "missing.txt"}));
    let path = env.script("loop.json", &script(vec![same; 50]));
    let (code, lines, stderr) = run_json(
        &env,
        &[
            "run",
            "--json",
            "--until-done",
            "--script",
            path.to_str().unwrap(),
            "Read it",
        ],
    );
    assert_eq!(code, Some(3), "{stderr}");
    let finished = lines.last().unwrap();
    assert_eq!(finished["requests"], 5);
    assert_eq!(
        finished["stopped"]["limit"],
        json!({"repeated_failure": {"tool": "read_file", "times": 5}})
    );
    assert!(stderr.contains("loop guard"), "{stderr}");
    assert_eq!(env.sessions_json()[0]["status"], "stopped");
}

#[test]
fn human_output_names_the_limit_and_the_exact_resume_command() {
    let env = TestEnv::new();
    let path = env.script("plan.json", &long_plan(4, None));
    let out = env
        .pod()
        .args(["run", "--max-requests", "3", "--script"])
        .arg(&path)
        .arg("Work")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(3));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let id = env.sessions_json()[0]["id"].as_str().unwrap().to_string();
    assert!(
        stdout.contains("stopped by the per-turn budget of 3 model requests"),
        "{stdout}"
    );
    assert!(
        stdout.contains("(stopped after 3 model requests, "),
        "{stdout}"
    );
    // The end line also counts the tokens the requests used.
    assert!(
        stdout.contains(" tokens, 1 of 4 todos completed)"),
        "{stdout}"
    );
    assert!(
        stdout.contains(&format!("continue with: pod resume {id}")),
        "{stdout}"
    );
    // Stdout is not a terminal here, so stderr says it too.
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains(&format!("pod resume {id}")), "{stderr}");
}

#[test]
fn a_session_budget_from_the_config_file_spans_resumes() {
    let env = TestEnv::new();
    let path = env.script("plan.json", &long_plan(3, Some(1)));
    env.config_file("[budget]\nmax_session_requests = 4\n");
    let (code, lines, stderr) = run_json(
        &env,
        &[
            "run",
            "--json",
            "--until-done",
            "--script",
            path.to_str().unwrap(),
            "Work",
        ],
    );
    assert_eq!(code, Some(3), "{stderr}");
    let id = session_id(&lines);
    assert_eq!(lines.last().unwrap()["requests"], 4);
    assert!(
        stderr.contains("the session budget of 4 model requests"),
        "{stderr}"
    );
    // A resume starts a fresh run budget, but the session's is spent.
    let (code, lines, _) = run_json(&env, &["resume", "--json", &id]);
    assert_eq!(code, Some(3));
    assert_eq!(lines.last().unwrap()["requests"], 0);
    // The cap is recorded: raising it in the config file changes nothing
    // for this session; `pod budget` raises it, and it goes on to the end.
    env.config_file("[budget]\nmax_session_requests = 100\n");
    let (code, _, _) = run_json(&env, &["resume", "--json", &id]);
    assert_eq!(code, Some(3));
    let out = env
        .pod()
        .args(["budget", &id, "--max-session-requests", "100"])
        .output()
        .unwrap();
    assert_success(&out);
    let (code, lines, stderr) = run_json(&env, &["resume", "--json", &id]);
    assert_eq!(code, Some(0), "{stderr}");
    assert_eq!(lines.last().unwrap()["todos"]["completed"], 3);
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
            {"text": "Never asked: the run is over budget.", "usage": usage(1)}
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
fn a_money_budget_stops_a_run_whose_subagents_spend_it() {
    let env = TestEnv::new();
    env.config_file(
        "[profiles.priced]\nkind = \"scripted\"\nprices = { input = 1.0, output = 1.0 }\n",
    );
    let path = env.script("delegate.json", &delegating_script());
    let (code, lines, stderr) = run_json(
        &env,
        &[
            "run",
            "--json",
            "--profile",
            "priced",
            "--max-run-cost",
            "3",
            "--script",
            path.to_str().unwrap(),
            "Survey",
        ],
    );
    // 0.1 (the session) + 2 + 2 (its subagent) passes 3 only in the
    // subagent, which may finish its answer; the session then stops before
    // it asks its model again.
    assert_eq!(code, Some(3), "{stderr}");
    assert!(stderr.contains("the run's cost limit of 3.00"), "{stderr}");
    let ended = lines.last().unwrap();
    assert_eq!(ended["requests"], 1, "{ended}");
    let id = session_id(&lines);
    let shown = env.show_json(&id);
    let texts: Vec<&str> = shown["history"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|item| item["text"].as_str())
        .collect();
    assert!(
        !texts.iter().any(|t| t.starts_with("Never asked")),
        "{texts:?}"
    );
    assert_eq!(shown["session"]["status"], "stopped", "{shown}");
    assert_eq!(shown["session"]["stopped_by"]["run_cost"], 3.0, "{shown}");
    let children = shown["children"].as_array().unwrap();
    assert_eq!(children.len(), 1, "{shown}");
    assert_eq!(children[0]["cost"], 4.0, "{shown}");

    // With 2.05 the subagent's second request is refused too.
    let env = TestEnv::new();
    env.config_file("[profiles.priced]\nkind = \"scripted\"\nprices = { input = 1.0, output = 1.0 }\n[budget]\nmax_cost = 2.05\n");
    let path = env.script("delegate.json", &delegating_script());
    let (code, lines, stderr) = run_json(
        &env,
        &[
            "run",
            "--json",
            "--profile",
            "priced",
            "--script",
            path.to_str().unwrap(),
            "Survey",
        ],
    );
    assert_eq!(code, Some(3), "{stderr}");
    let shown = env.show_json(&session_id(&lines));
    assert_eq!(shown["children"][0]["status"], "stopped", "{shown}");
}

#[test]
fn a_money_budget_without_prices_is_refused_before_anything_runs() {
    let env = TestEnv::new();
    let path = env.script("delegate.json", &delegating_script());
    let out = env
        .pod()
        .args(["run", "--max-cost", "3", "--script"])
        .arg(&path)
        .arg("Survey")
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("needs the model's prices"), "{stderr}");
    assert!(env.sessions_json().is_empty());
    let out = env
        .pod()
        .args(["run", "--max-cost", "0", "x"])
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&out.stderr).contains("must be more than 0"));
}
