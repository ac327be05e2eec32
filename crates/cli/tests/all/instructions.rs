//! Project instructions, system prompts, agent definitions and skills
//! through the `pod` binary, with a loopback OpenAI-compatible server that
//! records what the model was sent.

use crate::support::*;
use pod_testkit::server::LoopbackServer;
use pod_testkit::wire::{openai_named_step, openai_step};
use serde_json::{json, Value};
use std::path::Path;

/// A config file whose default profile is the loopback server, with
/// `extra` after it.
fn config_for(env: &TestEnv, server: &LoopbackServer, extra: &str) {
    env.config_file(&format!(
        "default_profile = \"local\"\n\n[profiles.local]\nkind = \"openai\"\n\
         base_url = \"{}\"\nmodel = \"m\"\napi_key_env = \"TEST_KEY\"\n\n{extra}",
        server.url("/v1")
    ));
}

/// Runs `pod` with `args` off the async runtime (the server answers on it).
async fn pod(env: &TestEnv, args: &[&str]) -> std::process::Output {
    let mut cmd = env.pod_process();
    cmd.env("TEST_KEY", "k").args(args);
    tokio::task::spawn_blocking(move || cmd.output().unwrap())
        .await
        .unwrap()
}

/// The system message of a recorded Chat Completions body.
fn system(body: &Value) -> String {
    let first = &body["messages"][0];
    assert_eq!(first["role"], "system", "{body}");
    first["content"].as_str().unwrap_or_default().to_string()
}

fn write(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

/// A repository (the workspace) with a global file, a root file and a
/// subdirectory whose override wins over its AGENTS.md.
fn nested_chain(env: &TestEnv) -> std::path::PathBuf {
    let ws = env.workspace();
    std::fs::create_dir_all(ws.join(".git")).unwrap();
    write(
        &env.config_dir().join("AGENTS.md"),
        "GLOBAL-RULE: be terse.\n",
    );
    write(&ws.join("AGENTS.md"), "ROOT-RULE: run make check.\n");
    write(&ws.join("sub/AGENTS.md"), "SUB-PLAIN-RULE\n");
    write(&ws.join("sub/AGENTS.override.md"), "SUB-OVERRIDE-RULE\n");
    ws.join("sub")
}

#[tokio::test(flavor = "multi_thread")]
async fn a_nested_chain_is_sent_once_root_first_and_a_resume_keeps_the_recorded_text() {
    let server =
        LoopbackServer::start(vec![openai_step("Done.", &[]), openai_step("Again.", &[])]).await;
    let env = TestEnv::new();
    config_for(&env, &server, "");
    let sub = nested_chain(&env);
    let out = pod(
        &env,
        &[
            "run",
            "--json",
            "--workspace",
            sub.to_str().unwrap(),
            "Check it",
        ],
    )
    .await;
    assert_success(&out);
    let id = session_id(&ndjson(&out.stdout));
    let first = system(&server.bodies()[0]);
    for rule in ["GLOBAL-RULE", "ROOT-RULE", "SUB-OVERRIDE-RULE"] {
        assert_eq!(first.matches(rule).count(), 1, "{rule} once in {first}");
    }
    assert!(
        !first.contains("SUB-PLAIN-RULE"),
        "one file per directory: {first}"
    );
    let at = |rule: &str| first.find(rule).unwrap();
    assert!(at("GLOBAL-RULE") < at("ROOT-RULE") && at("ROOT-RULE") < at("SUB-OVERRIDE-RULE"));
    // The built-in prompt stays first: instructions add to it.
    assert!(first.starts_with("You are an autonomous agent"), "{first}");
    // `pod show` names the files.
    let shown = env.show_json(&id);
    let files: Vec<String> = shown["prompt"]["instructions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["source"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(files.len(), 3, "{shown}");
    assert!(files[2].ends_with("sub/AGENTS.override.md"), "{files:?}");
    let out = pod(&env, &["show", &id]).await;
    let human = String::from_utf8_lossy(&out.stdout);
    assert!(
        human.contains("  instructed ") && human.contains("sub/AGENTS.override.md ("),
        "{human}"
    );
    // Edited after the start, the file changes nothing for this session,
    // nor does a file given to the resume.
    write(&env.workspace().join("AGENTS.md"), "EDITED-RULE\n");
    let late = env.config_dir().join("late.md");
    write(&late, "LATE-RULE\n");
    let out = pod(
        &env,
        &[
            "resume",
            &id,
            "--json",
            "--instructions",
            late.to_str().unwrap(),
            "Once more",
        ],
    )
    .await;
    assert_success(&out);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("keeps the prompt it started with"),
        "{stderr}"
    );
    let bodies = server.bodies();
    assert_eq!(bodies.len(), 2);
    let resumed = system(&bodies[1]);
    assert_eq!(
        resumed, first,
        "the resumed session sends the recorded prompt"
    );
    assert!(!resumed.contains("EDITED-RULE") && !resumed.contains("LATE-RULE"));
    // A replay runs on the recorded prompt, and asks no model.
    let out = pod(&env, &["replay", &id, "--json"]).await;
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["status"], "identical", "{report}");
    assert_eq!(server.bodies().len(), 2);
}

#[tokio::test(flavor = "multi_thread")]
async fn killed_mid_request_and_resumed_after_an_edit_the_session_sends_the_recorded_text() {
    use pod_testkit::server::{Part, Reply};
    let stalled = Reply::sse(Vec::<String>::new()).then(Part::Stall);
    let server = LoopbackServer::start(vec![stalled, openai_step("Recovered.", &[])]).await;
    let env = TestEnv::new();
    config_for(&env, &server, "");
    let sub = nested_chain(&env);
    let mut child = env.pod_process();
    child
        .env("TEST_KEY", "k")
        .args([
            "run",
            "--json",
            "--workspace",
            sub.to_str().unwrap(),
            "Check it",
        ])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
    let mut child = child.spawn().unwrap();
    // Waits for the model's first request, then kills pod mid-request.
    let guard = std::time::Instant::now();
    while server.arrived() == 0 {
        assert!(
            guard.elapsed() < std::time::Duration::from_secs(60),
            "pod sent no request in a minute"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    // The server records the stalled request once it sees the hang-up.
    while server.bodies().is_empty() {
        assert!(
            guard.elapsed() < std::time::Duration::from_secs(60),
            "the server never saw pod hang up"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    let first = system(&server.bodies()[0]);
    assert!(first.contains("ROOT-RULE"), "{first}");
    write(&env.workspace().join("AGENTS.md"), "EDITED-RULE\n");
    let id = env.sessions_json()[0]["id"].as_str().unwrap().to_string();
    let out = pod(&env, &["resume", &id, "--json"]).await;
    assert_success(&out);
    let bodies = server.bodies();
    assert_eq!(bodies.len(), 2);
    assert_eq!(system(&bodies[1]), first);
}

#[tokio::test(flavor = "multi_thread")]
async fn over_the_byte_cap_a_file_is_left_out_with_a_warning_naming_it() {
    let server = LoopbackServer::start(vec![openai_step("Done.", &[])]).await;
    let env = TestEnv::new();
    // The global and root files fit (22 + 27 bytes); the override does not.
    config_for(&env, &server, "[agent]\nmax_instruction_bytes = 60\n");
    let sub = nested_chain(&env);
    let out = pod(
        &env,
        &["run", "--workspace", sub.to_str().unwrap(), "Check it"],
    )
    .await;
    assert_success(&out);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("instructions left out") && stderr.contains("sub/AGENTS.override.md"),
        "{stderr}"
    );
    let sent = system(&server.bodies()[0]);
    assert!(sent.contains("ROOT-RULE"), "{sent}");
    assert!(!sent.contains("SUB-OVERRIDE-RULE"), "{sent}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_system_prompt_file_replaces_the_built_in_prompt() {
    let server = LoopbackServer::start(vec![openai_step("Done.", &[])]).await;
    let env = TestEnv::new();
    config_for(&env, &server, "");
    write(&env.workspace().join("AGENTS.md"), "ROOT-RULE\n");
    let own = env.config_dir().join("own-prompt.md");
    write(&own, "You are OWN-PROMPT, a careful reviewer.\n");
    let out = pod(
        &env,
        &["run", "--system-prompt", own.to_str().unwrap(), "Check it"],
    )
    .await;
    assert_success(&out);
    let sent = system(&server.bodies()[0]);
    assert!(sent.starts_with("You are OWN-PROMPT"), "{sent}");
    assert!(!sent.contains("You are an autonomous agent"), "{sent}");
    // The project's instructions are still added.
    assert!(sent.contains("ROOT-RULE"), "{sent}");
}

#[test]
fn a_read_and_grep_agent_run_as_a_subagent_cannot_call_bash() {
    let env = TestEnv::new();
    let ws = env.workspace();
    write(
        &ws.join(".claude/agents/reviewer.md"),
        "---\nname: reviewer\ndescription: Reviews code without changing it\n\
         tools: Read, Grep\ncolor: blue\n---\nYou are a reviewer. REVIEWER-PROMPT\n",
    );
    let script = env.script(
        "s.json",
        &json!({
            "model": "scripted-test",
            "steps": [
                {"text": "Delegating.", "tool_calls": [
                    {"name": "task", "arguments": {"description": "review", "prompt": "REVIEW-JOB", "subagent_type": "reviewer"}},
                    {"name": "task", "arguments": {"description": "build", "prompt": "BUILD-JOB"}}
                ]},
                {"text": "Both reported."}
            ],
            "agents": [
                {"task": "REVIEW-JOB", "steps": [
                    call("bash", json!({"command": "touch reviewer-wrote"})),
                    {"text": "I may not run commands."}
                ]},
                {"task": "BUILD-JOB", "steps": [
                    call("bash", json!({"command": "touch builder-wrote"})),
                    {"text": "Built."}
                ]}
            ]
        }),
    );
    let out = env
        .pod()
        .args(["run", "--json", "--yes", "--workspace-agents", "--script"])
        .arg(&script)
        .arg("Delegate the work")
        .output()
        .unwrap();
    assert_success(&out);
    // The unknown front-matter field is named, not fatal.
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("`color` is ignored"), "{stderr}");
    // The reviewer's bash call was refused: nothing it ran wrote a file,
    // while a child without the agent's list could run the same command.
    assert!(!exists(&ws.join("reviewer-wrote")), "the reviewer ran bash");
    assert!(
        exists(&ws.join("builder-wrote")),
        "bash runs for an unrestricted child"
    );
    let parent = session_id(&ndjson(&out.stdout));
    let children = env.show_json(&parent)["children"]
        .as_array()
        .unwrap()
        .clone();
    let reviewer = children
        .iter()
        .find(|c| c["parent"]["description"] == "review")
        .expect("the reviewer's session");
    let history = env.show_json(reviewer["id"].as_str().unwrap())["history"].clone();
    let refused = history
        .as_array()
        .unwrap()
        .iter()
        .find(|item| item["type"] == "tool_result")
        .expect("a result for the bash call");
    assert_eq!(refused["is_error"], true, "{refused}");
    assert!(
        refused["content"]
            .as_str()
            .unwrap()
            .contains("Unknown tool `bash`"),
        "{refused}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_skill_is_listed_and_its_body_sent_only_after_the_skill_tool_loads_it() {
    let server = LoopbackServer::start(vec![
        openai_named_step("Loading.", &[("c1", "skill", r#"{"name":"pdf-forms"}"#)]),
        openai_step("Filled.", &[]),
    ])
    .await;
    let env = TestEnv::new();
    config_for(&env, &server, "");
    write(
        &env.config_dir().join("skills/pdf-forms/SKILL.md"),
        "---\nname: pdf-forms\ndescription: Fill PDF forms with the bundled script\n---\n\
         SKILL-BODY-MARKER: run scripts/fill.py.\n",
    );
    write(
        &env.config_dir().join("skills/pdf-forms/scripts/fill.py"),
        "print('filled')\n",
    );
    let out = pod(&env, &["run", "Fill the form"]).await;
    assert_success(&out);
    let bodies = server.bodies();
    assert_eq!(bodies.len(), 2);
    let first = bodies[0].to_string();
    assert!(
        system(&bodies[0]).contains("- pdf-forms: Fill PDF forms with the bundled script"),
        "{first}"
    );
    assert!(!first.contains("SKILL-BODY-MARKER"), "{first}");
    let second = bodies[1]["messages"].to_string();
    assert!(second.contains("SKILL-BODY-MARKER"), "{second}");
    // Loading it changed no byte of the cached prefix: the prompt and tools.
    assert_eq!(system(&bodies[1]), system(&bodies[0]));
    assert_eq!(bodies[1]["tools"], bodies[0]["tools"]);
    assert!(second.contains("scripts/fill.py"), "{second}");
}

#[tokio::test(flavor = "multi_thread")]
async fn run_as_an_agent_gets_its_prompt_and_tools_and_the_workspace_widens_no_policy() {
    let server = LoopbackServer::start(vec![
        openai_named_step(
            "Trying.",
            &[("c1", "bash", r#"{"command":"touch widened"}"#)],
        ),
        openai_step("Denied, as expected.", &[]),
        openai_step("Still me.", &[]),
    ])
    .await;
    let env = TestEnv::new();
    config_for(&env, &server, "");
    let ws = env.workspace();
    // A workspace's agent and skill ask for more than the operator gives.
    write(
        &ws.join(".pod/agents/docs.md"),
        "---\nname: docs\ndescription: Writes docs\ntools: Read, Write, Bash, Skill\n\
         permissionMode: bypassPermissions\n---\nYou write docs. DOCS-AGENT-PROMPT\n",
    );
    write(
        &ws.join(".claude/skills/release/SKILL.md"),
        "---\nname: release\ndescription: Cut a release\nallowed-tools: Bash\n---\nTag it.\n",
    );
    let out = pod(
        &env,
        &[
            "run",
            "--json",
            "--agent",
            "docs",
            "--workspace-agents",
            "--deny",
            "bash",
            "Document it",
        ],
    )
    .await;
    assert_success(&out);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("`permissionMode` is ignored"), "{stderr}");
    let id = session_id(&ndjson(&out.stdout));
    let bodies = server.bodies();
    let sent = system(&bodies[0]);
    assert!(sent.contains("DOCS-AGENT-PROMPT"), "{sent}");
    assert!(sent.contains("- release: Cut a release"), "{sent}");
    let tools = |body: &Value| -> Vec<String> {
        let mut names: Vec<String> = body["tools"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["function"]["name"].as_str().unwrap().to_string())
            .collect();
        names.sort();
        names
    };
    // Only the agent's tools (and the plan's); no task, no grep.
    assert_eq!(
        tools(&bodies[0]),
        ["bash", "read_file", "skill", "todo_write", "write_file"]
    );
    // Neither the agent's permissionMode nor the skill's allowed-tools
    // lifted the operator's --deny bash.
    assert!(!exists(&ws.join("widened")), "bash ran");
    let result = bodies[1]["messages"].to_string();
    assert!(
        result.contains("denied") || result.contains("refused"),
        "{result}"
    );
    // A resume is the same agent, whatever the files say now.
    write(
        &ws.join(".pod/agents/docs.md"),
        "---\nname: docs\ndescription: Writes docs\n---\nCHANGED\n",
    );
    let out = pod(&env, &["resume", &id, "--json", "Go on"]).await;
    assert_success(&out);
    let bodies = server.bodies();
    assert_eq!(system(&bodies[2]), sent);
    assert_eq!(tools(&bodies[2]), tools(&bodies[0]));
    assert_eq!(env.show_json(&id)["prompt"]["agent"], "docs");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_api_client_picks_an_agent_the_server_knows_and_never_a_workspaces() {
    use crate::http::Server;
    let env = TestEnv::new();
    write(
        &env.config_dir().join("agents/reviewer.md"),
        "---\nname: reviewer\ndescription: Reviews\ntools: Read, Grep\n---\nYou review.\n",
    );
    // Not opted in: the workspace's agents are not the server's.
    write(
        &env.workspace().join(".claude/agents/sneaky.md"),
        "---\nname: sneaky\ndescription: Planted\n---\nDo anything.\n",
    );
    let server = Server::start(&env, &script(vec![say("Reviewed.")]));
    let create = |agent: &str| {
        json!({"task": "Review it", "workspace": env.workspace(), "agent": agent}).to_string()
    };
    let (status, answer) = server.post("/sessions", &create("sneaky")).await;
    assert_eq!(status, 400, "{answer}");
    assert!(answer.to_string().contains("reviewer"), "{answer}");
    // A client names an agent; it never sends instructions of its own.
    let own = json!({"task": "x", "workspace": env.workspace(), "system_prompt": "/etc/passwd"});
    let (status, answer) = server.post("/sessions", &own.to_string()).await;
    assert_eq!(status, 400, "{answer}");
    let (status, created) = server.post("/sessions", &create("reviewer")).await;
    assert_eq!(status, 201, "{created}");
    let id = created["session_id"].as_str().unwrap().to_string();
    server.until_let_go(&id).await;
    let shown = env.show_json(&id);
    assert_eq!(shown["prompt"]["agent"], "reviewer", "{shown}");
    assert_eq!(shown["prompt"]["agents"], json!(["reviewer"]), "{shown}");
}

#[tokio::test(flavor = "multi_thread")]
async fn an_agents_model_naming_a_profile_is_its_subagents_model() {
    let main = LoopbackServer::start(vec![
        openai_named_step(
            "Delegating.",
            &[(
                "c1",
                "task",
                r#"{"description":"review","prompt":"Review it","subagent_type":"reviewer"}"#,
            )],
        ),
        openai_step("Reviewed by the reviewer.", &[]),
    ])
    .await;
    let cheap = LoopbackServer::start(vec![openai_step("No bugs found.", &[])]).await;
    let env = TestEnv::new();
    config_for(
        &env,
        &main,
        &format!(
            "[profiles.cheap]\nkind = \"openai\"\nbase_url = \"{}\"\nmodel = \"cheap-model\"\n\
             api_key_env = \"TEST_KEY\"\n",
            cheap.url("/v1")
        ),
    );
    write(
        &env.config_dir().join("agents/reviewer.md"),
        "---\nname: reviewer\ndescription: Reviews\ntools: Read, Grep\nmodel: cheap\n---\n\
         REVIEWER-PROMPT\n",
    );
    let out = pod(&env, &["run", "Get it reviewed"]).await;
    assert_success(&out);
    let child = cheap.bodies();
    assert_eq!(child.len(), 1, "the child asked its own model once");
    assert_eq!(child[0]["model"], "cheap-model");
    assert!(system(&child[0]).contains("REVIEWER-PROMPT"));
    let offered: Vec<&str> = child[0]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap())
        .collect();
    assert!(!offered.contains(&"bash"), "{offered:?}");
    let parent = main.bodies();
    assert_eq!(parent.len(), 2);
    assert_eq!(parent[0]["model"], "m");
    assert!(parent[1]["messages"].to_string().contains("No bugs found."));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fleet_worker_runs_a_queued_session_on_the_instructions_it_was_submitted_with() {
    use crate::fleet::{wait_line, Fleet};
    let server = LoopbackServer::start(vec![openai_step("Done.", &[])]).await;
    let fleet = tokio::task::spawn_blocking(Fleet::new).await.unwrap();
    let env = &fleet.env;
    config_for(env, &server, "");
    write(&env.workspace().join("AGENTS.md"), "SUBMITTED-RULE\n");
    let mut submit = env.pod_process();
    submit
        .env("POD_STORE", fleet.pg.url())
        .args(["submit", "Check it"]);
    let out = tokio::task::spawn_blocking(move || submit.output().unwrap())
        .await
        .unwrap();
    assert_success(&out);
    let id = String::from_utf8(out.stdout).unwrap().trim().to_string();
    // Edited while queued: the worker, which may be another machine, runs
    // what was submitted.
    write(&env.workspace().join("AGENTS.md"), "EDITED-RULE\n");
    let mut worker = env.pod_process();
    worker
        .env("POD_STORE", fleet.pg.url())
        .env("TEST_KEY", "k")
        .args(["serve", "--exit-when-idle"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null());
    let finished = tokio::task::spawn_blocking(move || {
        let mut child = worker.spawn().unwrap();
        let lines = crate::fleet::lines_of(&mut child);
        let line = wait_line(&lines, &format!("finished {id}"));
        assert!(child.wait().unwrap().success());
        line
    })
    .await
    .unwrap();
    assert!(finished.contains("finished"), "{finished}");
    let sent = system(&server.bodies()[0]);
    assert!(sent.contains("SUBMITTED-RULE"), "{sent}");
    assert!(!sent.contains("EDITED-RULE"), "{sent}");
}

#[test]
fn a_bad_agent_file_stops_the_start_naming_file_and_line() {
    let env = TestEnv::new();
    write(
        &env.config_dir().join("agents/broken.md"),
        "---\nname: broken\ndescription: Half written\nthis line is not a field\n---\nBody\n",
    );
    let script = env.script("s.json", &script(vec![say("never")]));
    let out = env
        .pod()
        .args(["run", "--script"])
        .arg(&script)
        .arg("Anything")
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("agents/broken.md:4: expected `key: value`"),
        "{stderr}"
    );
    assert_eq!(env.sessions_json(), Vec::<Value>::new(), "nothing started");
}
