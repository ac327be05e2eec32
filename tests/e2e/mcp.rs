//! MCP servers as pod tools, against `mcp-test-server` (rmcp's server side,
//! a real child process): tools listed and named, results as text, errors,
//! images, long output, a server that fails to start, dies mid-call, hangs,
//! and is stopped with the session.

use pod::{Item, ItemKind, Pod, PodEvent, ScriptStep, TurnEndReason};
use pod_mcp::{McpServers, ServerConfig, Transport};
use pod_testkit::pod::{wait_for_event, TestPod};
use serde_json::json;
use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

fn server(name: &str, env: &[(&str, &str)]) -> ServerConfig {
    ServerConfig::new(
        name,
        Transport::Stdio {
            command: env!("CARGO_BIN_EXE_mcp-test-server").into(),
            args: Vec::new(),
            env: env
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect::<BTreeMap<_, _>>(),
            cwd: None,
        },
    )
}

/// The result of the (first) call of `tool` in `history`.
fn result_for(history: &[Item], tool: &str) -> (String, bool) {
    let id = history
        .iter()
        .find_map(|item| match &item.kind {
            ItemKind::Assistant { tool_calls, .. } => tool_calls
                .iter()
                .find(|c| c.name == tool)
                .map(|c| c.id.clone()),
            _ => None,
        })
        .unwrap_or_else(|| panic!("no call of {tool}"));
    pod_testkit::result_of(history, &id)
}

/// Calls logged by the server (one JSON line per call, before it runs).
fn logged(path: &Path) -> Vec<serde_json::Value> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_tools_are_named_called_and_their_results_read() {
    let dir = tempfile::tempdir().unwrap();
    let (servers, failures) = McpServers::start(
        vec![
            server("t", &[]),
            server("broken", &[("MCP_TEST_FAIL_START", "1")]),
        ],
        dir.path(),
        &["todo_write".to_string()],
    )
    .await;
    // The broken one is reported, the other goes on.
    assert_eq!(failures.len(), 1);
    assert!(
        failures[0].to_string().contains("broken"),
        "{}",
        failures[0]
    );
    let tools = servers.tools();
    let names: Vec<&str> = tools.iter().map(|t| t.name()).collect();
    for expected in ["t__echo", "t__fail", "t__image", "t__big", "t__loose"] {
        assert!(names.contains(&expected), "{names:?}");
    }
    let long = names
        .iter()
        .find(|n| n.starts_with("t__a_tool_with"))
        .expect("the long-named tool")
        .to_string();
    assert!(long.len() <= 64, "{long}");
    let loose = tools.iter().find(|t| t.name() == "t__loose").unwrap();
    assert_eq!(
        *pod_worker::Tool::parameters(loose),
        json!({"type": "object", "properties": {}})
    );

    let test = TestPod::new(vec![
        ScriptStep::tool_call("t__echo", json!({"text": "hi there"})),
        ScriptStep::tool_call("t__fail", json!({})),
        ScriptStep::tool_call("t__image", json!({})),
        ScriptStep::tool_call("t__big", json!({"bytes": 100_000})),
        ScriptStep::tool_call(long.as_str(), json!({})),
        ScriptStep::text("done"),
    ]);
    let mut config = test.config();
    servers.register(&mut config.tools);
    let pod = Pod::spawn(config).await.unwrap();
    let outcome = pod.prompt("use the server").await.unwrap();
    assert_eq!(outcome.reason, TurnEndReason::EndTurn);
    let history = pod.get_history().await.unwrap();
    assert_eq!(result_for(&history, "t__echo"), ("hi there".into(), false));
    let (failed, is_error) = result_for(&history, "t__fail");
    assert!(is_error && failed.contains("it failed"), "{failed}");
    let (image, _) = result_for(&history, "t__image");
    assert!(image.contains("[image: image/png, "), "{image}");
    assert!(!image.contains("iVBOR"), "no base64 for the model: {image}");
    let (big, _) = result_for(&history, "t__big");
    assert!(
        big.len() < 40_000 && big.contains("output cut"),
        "{}",
        big.len()
    );
    assert_eq!(result_for(&history, &long).0, "long name reached");
    pod.shutdown().await.unwrap();
    servers.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_dies_mid_call_fails_that_call_and_is_restarted() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("calls.jsonl");
    let log_text = log.display().to_string();
    let (servers, failures) = McpServers::start(
        vec![server("t", &[("MCP_TEST_LOG", &log_text)])],
        dir.path(),
        &[],
    )
    .await;
    assert!(failures.is_empty());
    let test = TestPod::new(vec![
        ScriptStep::tool_call("t__crash", json!({})),
        ScriptStep::tool_call("t__echo", json!({"text": "back"})),
        ScriptStep::text("done"),
    ]);
    let mut config = test.config();
    servers.register(&mut config.tools);
    let pod = Pod::spawn(config).await.unwrap();
    pod.prompt("go").await.unwrap();
    let history = pod.get_history().await.unwrap();
    let (crashed, is_error) = result_for(&history, "t__crash");
    assert!(
        is_error && crashed.contains("stopped during the call"),
        "{crashed}"
    );
    assert_eq!(result_for(&history, "t__echo"), ("back".into(), false));
    let calls = logged(&log);
    assert_eq!(calls.len(), 2, "each call ran once: {calls:?}");
    assert_ne!(
        calls[0]["pid"], calls[1]["pid"],
        "the second ran on a restarted server"
    );
    pod_llm::validate_history(&history).unwrap();
    pod.shutdown().await.unwrap();
    servers.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hung_call_times_out_and_cancelling_the_turn_cancels_it() {
    let dir = tempfile::tempdir().unwrap();
    let mut quick = server("q", &[]);
    quick.call_timeout = Duration::from_secs(1);
    let (servers, _) = McpServers::start(vec![quick, server("slow", &[])], dir.path(), &[]).await;
    let test = TestPod::new(vec![
        ScriptStep::tool_call("q__hang", json!({})),
        ScriptStep::text("gave up"),
        ScriptStep::tool_call("slow__hang", json!({})),
        ScriptStep::text("never"),
    ]);
    let mut config = test.config();
    servers.register(&mut config.tools);
    let pod = Pod::spawn(config).await.unwrap();
    pod.prompt("hang once").await.unwrap();
    let history = pod.get_history().await.unwrap();
    let (timed_out, is_error) = result_for(&history, "q__hang");
    assert!(is_error && timed_out.contains("timed out"), "{timed_out}");

    // No timeout to speak of: the user cancels the turn.
    let mut events = pod.subscribe();
    let turn = {
        let pod = pod.clone();
        tokio::spawn(async move { pod.prompt("hang again").await })
    };
    wait_for_event(
        &mut events,
        |e| matches!(e, PodEvent::ToolCallStarted { name, .. } if name == "slow__hang"),
    )
    .await;
    pod.cancel().await.unwrap();
    let outcome = turn.await.unwrap().unwrap();
    assert_eq!(outcome.reason, TurnEndReason::Cancelled);
    let history = pod.get_history().await.unwrap();
    pod_llm::validate_history(&history).unwrap();
    pod.shutdown().await.unwrap();
    servers.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn servers_are_stopped_with_the_session() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("calls.jsonl");
    let log_text = log.display().to_string();
    let (servers, _) = McpServers::start(
        vec![server("t", &[("MCP_TEST_LOG", &log_text)])],
        dir.path(),
        &[],
    )
    .await;
    let test = TestPod::new(vec![
        ScriptStep::tool_call("t__echo", json!({"text": "x"})),
        ScriptStep::text("done"),
    ]);
    let mut config = test.config();
    servers.register(&mut config.tools);
    let pod = Pod::spawn(config).await.unwrap();
    pod.prompt("go").await.unwrap();
    pod.shutdown().await.unwrap();
    let pid = logged(&log)[0]["pid"].as_u64().unwrap();
    let proc = format!("/proc/{pid}");
    assert!(Path::new(&proc).exists());
    servers.shutdown().await;
    // Gone (a zombie is reaped by the transport's cleanup task).
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while Path::new(&proc).exists() && !is_zombie(&proc) {
        assert!(
            std::time::Instant::now() < deadline,
            "the server outlived its session"
        );
        tokio::task::yield_now().await;
    }
}

fn is_zombie(proc: &str) -> bool {
    std::fs::read_to_string(format!("{proc}/stat"))
        .map(|stat| stat.split_whitespace().nth(2) == Some("Z"))
        .unwrap_or(true)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tool_list_change_reaches_the_next_request() {
    let dir = tempfile::tempdir().unwrap();
    let (servers, _) = McpServers::start(vec![server("t", &[])], dir.path(), &[]).await;
    assert!(!servers.tools().iter().any(|t| t.name() == "t__grown"));
    let test = TestPod::new(vec![
        ScriptStep::tool_call("t__grow", json!({})),
        ScriptStep::text("grown"),
        ScriptStep::tool_call("t__grown", json!({})),
        ScriptStep::text("done"),
    ]);
    let model = test.model.clone();
    let mut config = test.config();
    servers.register(&mut config.tools);
    let pod = Pod::spawn(config).await.unwrap();
    pod.prompt("grow").await.unwrap();
    // The client re-lists the tools when the notification arrives, which
    // may be just after the call's result: wait for it.
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while !servers.tools().iter().any(|t| t.name() == "t__grown") {
        assert!(
            std::time::Instant::now() < deadline,
            "the tool list never changed"
        );
        tokio::task::yield_now().await;
    }
    pod.prompt("use the new tool").await.unwrap();
    let history = pod.get_history().await.unwrap();
    assert_eq!(
        result_for(&history, "t__grow"),
        ("grew a tool".into(), false)
    );
    assert_eq!(
        result_for(&history, "t__grown"),
        ("the new tool ran".into(), false),
        "the tool the server added is callable"
    );
    // The requests of the second turn offered it to the model; the first
    // request of the session did not.
    let offered: Vec<Vec<String>> = model
        .requests()
        .iter()
        .map(|r| r.tools.iter().map(|t| t.name.clone()).collect())
        .collect();
    assert!(!offered[0].contains(&"t__grown".to_string()));
    assert!(offered[2].contains(&"t__grown".to_string()), "{offered:?}");
    pod.shutdown().await.unwrap();
    servers.shutdown().await;
}
