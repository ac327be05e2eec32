//! `pod acp` as an editor runs it: a child process spoken to over its real
//! stdio with newline-delimited JSON-RPC.

// The same client drives pod-acp's in-process tests, which use all of it.
#[path = "../../../acp/tests/all/client.rs"]
#[allow(dead_code)]
mod client;

use crate::support::TestEnv;
use client::{join_chunks, AcpClient};
use serde_json::{json, Value};
use std::process::Stdio;
use tokio::process::{Child, ChildStdin, ChildStdout};

/// A running `pod acp` and the client on its stdio.
struct Agent {
    child: Child,
    client: AcpClient<ChildStdout, ChildStdin>,
}

impl Agent {
    /// Starts `pod acp` on the scripted model playing `script`.
    fn start(env: &TestEnv, script: &Value) -> Self {
        Self::start_with(env, script, &[])
    }

    /// The same with more flags.
    fn start_with(env: &TestEnv, script: &Value, flags: &[&str]) -> Self {
        let path = env.script("acp-script.json", script);
        let mut command = tokio::process::Command::from(env.pod_process());
        command
            .arg("acp")
            .args(flags)
            .args(["--provider", "scripted", "--script"])
            .arg(path)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true);
        let mut child = command.spawn().expect("spawn pod acp");
        let stdin = child.stdin.take().expect("stdin");
        let stdout = child.stdout.take().expect("stdout");
        Self {
            child,
            client: AcpClient::new(stdout, stdin),
        }
    }

    /// Closes stdin and waits for a clean exit.
    async fn finish(self) {
        let Agent { mut child, client } = self;
        drop(client);
        let status = child.wait().await.expect("wait");
        assert!(status.success(), "pod acp exited with {status}");
    }
}

fn plan(status_read: &str, status_port: &str) -> Value {
    json!({"todos": [
        {"id": "read", "content": "Read the parser", "status": status_read},
        {"id": "port", "content": "Port it", "status": status_port},
    ]})
}

fn planning_script() -> Value {
    json!({"steps": [
        {"text": "Planning.", "tool_calls": [{"name": "todo_write", "arguments": plan("in_progress", "pending")}]},
        {"tool_calls": [{"name": "todo_write", "arguments": plan("in_progress", "in_progress")}]},
        {"tool_calls": [{"name": "todo_write", "arguments": plan("completed", "in_progress")}]},
        {"text": "All set."},
    ]})
}

#[tokio::test]
async fn an_editor_plans_a_turn_then_reloads_it_in_a_new_process() {
    let env = TestEnv::new();
    let workspace = env.workspace().canonicalize().unwrap();
    let mut agent = Agent::start(&env, &planning_script());
    let init = agent.client.initialize().await;
    assert_eq!(init["agentCapabilities"]["loadSession"], true);
    let session = agent.client.new_session(&workspace).await;
    let reply = agent.client.prompt(&session, "Port the parser").await;
    assert_eq!(reply.result(), &json!({"stopReason": "end_turn"}));
    assert_eq!(
        join_chunks(reply.summary()),
        [
            "message Planning.",
            "tool_call call_0_0 Update plan (2 items) think in_progress",
            "tool_call_update call_0_0 completed",
            "plan [in_progress:Read the parser, pending:Port it]",
            "tool_call call_1_0 Update plan (2 items) think in_progress",
            "tool_call_update call_1_0 failed",
            "tool_call call_2_0 Update plan (2 items) think in_progress",
            "tool_call_update call_2_0 completed",
            "plan [completed:Read the parser, in_progress:Port it]",
            "message All set.",
        ]
    );
    // Bad input on the way does not end the server.
    agent.client.send_line("not json at all").await;
    assert_eq!(agent.client.next().await.unwrap()["error"]["code"], -32700);
    let unknown = agent.client.call("session/fly", json!({})).await;
    assert_eq!(unknown.error()["code"], -32601);
    agent.finish().await;

    // The session is on disk, complete: `pod show` and a new `pod acp` see it.
    let shown = env.show_json(&session);
    assert_eq!(shown["todos"][0]["status"], "completed");
    // A resumed scripted model goes on after the steps already answered.
    let mut script = planning_script();
    script["steps"]
        .as_array_mut()
        .unwrap()
        .push(json!({"text": "Resumed."}));
    let mut agent = Agent::start(&env, &script);
    agent.client.initialize().await;
    let load = agent
        .client
        .call(
            "session/load",
            json!({"sessionId": session, "cwd": workspace, "mcpServers": []}),
        )
        .await;
    assert_eq!(load.result(), &json!({}));
    let replay = join_chunks(load.summary());
    assert_eq!(
        replay.first().map(String::as_str),
        Some("user Port the parser")
    );
    assert_eq!(
        replay.last().map(String::as_str),
        Some("plan [completed:Read the parser, in_progress:Port it]")
    );
    let next = agent.client.prompt(&session, "Go on").await;
    assert_eq!(join_chunks(next.summary()), ["message Resumed."]);
    agent.finish().await;
}

#[tokio::test]
async fn initialize_and_session_new_written_at_once_are_both_answered() {
    // An editor may pipeline the handshake: both requests in one write,
    // before the first answer (JSON-RPC allows it).
    let env = TestEnv::new();
    let workspace = env.workspace().canonicalize().unwrap();
    let mut agent = Agent::start(&env, &json!({"steps": [{"text": "Hello."}]}));
    let initialize = json!({"jsonrpc": "2.0", "id": 100, "method": "initialize",
                            "params": {"protocolVersion": 1, "clientCapabilities": {}}});
    let new_session = json!({"jsonrpc": "2.0", "id": 101, "method": "session/new",
                             "params": {"cwd": workspace, "mcpServers": []}});
    agent
        .client
        .send_line(&format!("{initialize}\n{new_session}"))
        .await;
    let first = agent.client.next().await.unwrap();
    assert_eq!(first["id"], 100, "{first}");
    assert_eq!(first["result"]["agentInfo"]["name"], "pod", "{first}");
    let second = agent.client.reply_to(101).await;
    let session = second.result()["sessionId"]
        .as_str()
        .unwrap_or_else(|| panic!("{}", second.response))
        .to_string();
    // The session is a real one: it answers a prompt.
    let reply = agent.client.prompt(&session, "Hi").await;
    assert_eq!(join_chunks(reply.summary()), ["message Hello."]);
    agent.finish().await;
}

#[tokio::test]
async fn cancel_ends_a_waiting_turn_with_cancelled() {
    let env = TestEnv::new();
    let workspace = env.workspace().canonicalize().unwrap();
    let script = json!({"steps": [
        {"tool_calls": [{"name": "todo_write", "arguments": plan("in_progress", "pending")}]},
        // Far longer than any test: only the cancel ends it.
        {"text": "never", "delay_ms": 3_600_000},
    ]});
    let mut agent = Agent::start(&env, &script);
    agent.client.initialize().await;
    let session = agent.client.new_session(&workspace).await;
    let id = agent.client.send_prompt(&session, "Slowly").await;
    loop {
        let message = agent.client.next().await.unwrap();
        if message.pointer("/params/update/sessionUpdate") == Some(&json!("plan")) {
            break;
        }
    }
    agent
        .client
        .notify("session/cancel", json!({"sessionId": session}))
        .await;
    let reply = agent.client.reply_to(id).await;
    assert_eq!(reply.result(), &json!({"stopReason": "cancelled"}));
    agent.finish().await;
    let shown = env.show_json(&session);
    assert_eq!(shown["todos"][0]["status"], "in_progress");
}

#[tokio::test]
async fn the_editor_is_asked_before_a_write_and_allowing_it_runs_it() {
    let env = TestEnv::new();
    let workspace = env.workspace().canonicalize().unwrap();
    let script = json!({"steps": [
        {"tool_calls": [{"name": "write_file",
                         "arguments": {"path": "notes.txt", "content": "hi\n"}}]},
        {"text": "Written."},
    ]});
    // Its sessions notify too: the question, asked in the editor, and the end.
    let seen = env.workspace().join("..").join("events.jsonl");
    env.config_file(&format!(
        "[notify]\ncommand = [\"sh\", \"-c\", \"cat >> '{}'; echo >> '{}'\"]\n",
        seen.display(),
        seen.display()
    ));
    let mut agent = Agent::start(&env, &script);
    agent.client.initialize().await;
    let session = agent.client.new_session(&workspace).await;
    let id = agent.client.send_prompt(&session, "Take notes").await;
    let (_, request) = agent
        .client
        .request_from_agent("session/request_permission")
        .await;
    assert_eq!(
        request["params"]["toolCall"]["title"],
        "write_file notes.txt"
    );
    assert!(!workspace.join("notes.txt").exists(), "asked before it ran");
    agent
        .client
        .respond(
            &request,
            json!({"outcome": {"outcome": "selected", "optionId": "allow_once"}}),
        )
        .await;
    let reply = agent.client.reply_to(id).await;
    assert_eq!(reply.result(), &json!({"stopReason": "end_turn"}));
    assert_eq!(
        std::fs::read_to_string(workspace.join("notes.txt")).unwrap(),
        "hi\n"
    );
    agent.finish().await;
    // `pod acp` waited for its notifications before it exited.
    let told: Vec<Value> = std::fs::read_to_string(&seen)
        .unwrap()
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let types: Vec<&str> = told.iter().map(|e| e["type"].as_str().unwrap()).collect();
    assert_eq!(types, ["session.question", "session.finished"], "{told:?}");
    assert_eq!(
        told[0]["data"]["answer_with"],
        "in the editor that runs this session (pod acp)"
    );
    assert_eq!(told[0]["data"]["title"], "Take notes");
}

#[tokio::test]
async fn a_prompt_stopped_by_its_budget_ends_with_max_turn_requests() {
    let env = TestEnv::new();
    let workspace = env.workspace().canonicalize().unwrap();
    let list = || json!({"tool_calls": [{"name": "list_dir", "arguments": {"path": "."}}]});
    let script = json!({"steps": [list(), list(), list(), {"text": "Done."}]});
    let mut agent = Agent::start_with(&env, &script, &["--max-requests", "2"]);
    agent.client.initialize().await;
    let session = agent.client.new_session(&workspace).await;
    let reply = agent.client.prompt(&session, "List thrice").await;
    assert_eq!(reply.result(), &json!({"stopReason": "max_turn_requests"}));
    // The next prompt starts with a fresh budget.
    let reply = agent.client.prompt(&session, "Go on").await;
    assert_eq!(reply.result(), &json!({"stopReason": "end_turn"}));
    agent.finish().await;
}

/// The editor's MCP servers: `session/new` carries them, their tools join
/// the session, and the editor sees the call as `server › tool`.
#[tokio::test]
async fn an_editors_mcp_servers_join_the_session() {
    let env = TestEnv::new();
    let workspace = env.workspace().canonicalize().unwrap();
    let script = json!({"steps": [
        {"tool_calls": [{"name": "everything__echo", "arguments": {"message": "from the editor's server"}}]},
        {"text": "Echoed."},
    ]});
    let mut agent = Agent::start_with(&env, &script, &["--allow", "everything__echo"]);
    agent.client.initialize().await;
    let everything = crate::mcp::reference_server("mcp-server-everything");
    let reply = agent
        .client
        .call(
            "session/new",
            json!({"cwd": workspace, "mcpServers": [
                {"name": "everything", "command": everything, "args": ["stdio"], "env": []},
                {"name": "missing", "command": "/nonexistent/server", "args": [], "env": []}
            ]}),
        )
        .await;
    let session = reply.result()["sessionId"].as_str().unwrap().to_string();
    // The server that did not start is said once, in the session.
    let mut told = reply.notifications.clone();
    let reply = agent.client.prompt(&session, "echo something").await;
    told.extend(reply.notifications.iter().cloned());
    let notices: Vec<String> = told
        .iter()
        .map(|n| n.to_string())
        .filter(|n| n.contains("MCP server missing did not start"))
        .collect();
    assert_eq!(notices.len(), 1, "{told:?}");
    assert_eq!(reply.result(), &json!({"stopReason": "end_turn"}));
    let summary = join_chunks(reply.summary());
    assert!(
        summary
            .iter()
            .any(|line| line.contains("tool_call") && line.contains("everything › echo")),
        "{summary:?}"
    );
    let result = reply
        .notifications
        .iter()
        .map(|n| &n["params"]["update"])
        .find(|u| u["sessionUpdate"] == "tool_call_update" && u["status"] == "completed")
        .expect("the call completed");
    assert!(
        result.to_string().contains("from the editor's server"),
        "{result}"
    );
    agent.finish().await;
}

/// `pod acp --mcp-config FILE`: its servers join every session, beside the
/// editor's.
#[tokio::test]
async fn mcp_config_servers_join_every_acp_session() {
    let env = TestEnv::new();
    let workspace = env.workspace().canonicalize().unwrap();
    let everything = crate::mcp::reference_server("mcp-server-everything");
    let config = env.script(
        "mcp.json",
        &json!({"mcpServers": {"mine": {"command": everything, "args": ["stdio"]}}}),
    );
    let script = json!({"steps": [
        {"tool_calls": [{"name": "mine__echo", "arguments": {"message": "configured"}}]},
        {"text": "Echoed."},
    ]});
    let config = config.to_str().unwrap().to_string();
    let mut agent = Agent::start_with(
        &env,
        &script,
        &["--mcp-config", &config, "--allow", "mine__*"],
    );
    agent.client.initialize().await;
    let session = agent.client.new_session(&workspace).await;
    let reply = agent.client.prompt(&session, "echo").await;
    let summary = join_chunks(reply.summary());
    assert!(
        summary
            .iter()
            .any(|l| l.contains("mine › echo") && l.contains("tool_call")),
        "{summary:?}"
    );
    assert!(
        reply
            .notifications
            .iter()
            .any(|n| n.to_string().contains("Echo: configured")),
        "{summary:?}"
    );
    agent.finish().await;
}

/// The end of `pod acp` (the editor closes its stdin) stops the sessions'
/// MCP servers.
#[tokio::test]
async fn the_end_of_pod_acp_stops_the_editors_servers() {
    let env = TestEnv::new();
    let workspace = env.workspace().canonicalize().unwrap();
    let mark = format!("pod-acp-end-{}", std::process::id());
    let mut agent = Agent::start_with(&env, &json!({"steps": [{"text": "Hi."}]}), &[]);
    agent.client.initialize().await;
    let everything = crate::mcp::reference_server("mcp-server-everything");
    let reply = agent
        .client
        .call(
            "session/new",
            json!({"cwd": workspace, "mcpServers": [
                {"name": "marked", "command": everything, "args": ["stdio"],
                 "env": [{"name": "POD_TEST_MARK", "value": mark}]}
            ]}),
        )
        .await;
    assert!(reply.result()["sessionId"].is_string());
    assert!(
        !crate::mcp::marked_processes(&mark).is_empty(),
        "the server runs"
    );
    agent.finish().await;
    assert!(
        crate::mcp::marked_processes(&mark).is_empty(),
        "{:?}",
        crate::mcp::marked_processes(&mark)
    );
}

/// A subagent is one tool call in the editor: titled with its task, its
/// content updated with the child's plan and actions while it works, and
/// its answer as the result; the child's plan never replaces the session's.
#[tokio::test]
async fn a_subagent_is_one_tool_call_whose_content_follows_its_plan() {
    let env = TestEnv::new();
    let child_plan = |status: &str| json!({"todos": [{"id": "p", "content": "Read the parser", "status": status}]});
    let script = json!({
        "steps": [
            {"tool_calls": [{"name": "task", "arguments": {"description": "study the parser", "prompt": "Study the parser"}}]},
            {"text": "The parser is small."}
        ],
        "agents": [{"task": "Study the parser", "steps": [
            {"tool_calls": [{"name": "todo_write", "arguments": child_plan("in_progress")}]},
            {"tool_calls": [{"name": "list_dir", "arguments": {"path": "."}}]},
            {"tool_calls": [{"name": "todo_write", "arguments": child_plan("completed")}]},
            {"text": "It has one file."}
        ]}]
    });
    let workspace = env.workspace().canonicalize().unwrap();
    let mut agent = Agent::start(&env, &script);
    agent.client.initialize().await;
    let session = agent.client.new_session(&workspace).await;
    let reply = agent.client.prompt(&session, "Look at the parser").await;
    assert_eq!(reply.result(), &json!({"stopReason": "end_turn"}));
    let summary = join_chunks(reply.summary());
    assert_eq!(
        summary.first().map(String::as_str),
        Some("tool_call call_0_0 Subagent: study the parser other in_progress"),
        "{summary:?}"
    );
    // Only the parent's call is shown, and no plan: the session has none.
    assert!(
        summary
            .iter()
            .all(|s| s.contains("call_0_0") || s.starts_with("message")),
        "{summary:?}"
    );
    let contents: Vec<String> = reply
        .notifications
        .iter()
        .map(|n| &n["params"]["update"])
        .filter(|u| u["sessionUpdate"] == "tool_call_update")
        .filter_map(|u| {
            u["content"][0]["content"]["text"]
                .as_str()
                .map(String::from)
        })
        .collect();
    assert!(
        contents
            .iter()
            .any(|c| c.contains("[>] p: Read the parser")),
        "{contents:?}"
    );
    assert!(
        contents.iter().any(|c| c.contains("→ list_dir")),
        "{contents:?}"
    );
    assert!(
        contents.last().unwrap().starts_with("It has one file."),
        "{contents:?}"
    );
    assert_eq!(
        summary.last().map(String::as_str),
        Some("message The parser is small.")
    );
    agent.finish().await;
}

#[tokio::test]
async fn an_editors_session_gets_the_projects_instructions_recorded() {
    let env = TestEnv::new();
    let workspace = env.workspace().canonicalize().unwrap();
    std::fs::write(workspace.join("AGENTS.md"), "Run make check.\n").unwrap();
    let mut agent = Agent::start(&env, &json!({"steps": [{"text": "Checked."}]}));
    agent.client.initialize().await;
    let session = agent.client.new_session(&workspace).await;
    let reply = agent.client.prompt(&session, "Check it").await;
    assert_eq!(reply.result(), &json!({"stopReason": "end_turn"}));
    agent.finish().await;
    let shown = env.show_json(&session);
    let files = &shown["prompt"]["instructions"];
    assert_eq!(files.as_array().map(Vec::len), Some(1), "{shown}");
    assert_eq!(
        files[0]["source"],
        json!(workspace.join("AGENTS.md")),
        "{shown}"
    );
    assert_eq!(files[0]["bytes"], 16);
}
