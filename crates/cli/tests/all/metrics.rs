//! `GET /metrics`: Prometheus' text format, linted by `promtool` (Debian's
//! `prometheus` package), its counters checked against what the sessions
//! did.

use crate::http::Server;
use crate::support::*;
use serde_json::json;
use std::collections::HashMap;
use std::io::Write;
use std::process::{Command, Stdio};

/// The samples of an exposition, by name with labels as written.
fn samples(text: &str) -> HashMap<String, f64> {
    text.lines()
        .filter(|line| !line.starts_with('#') && !line.trim().is_empty())
        .filter_map(|line| {
            let (name, value) = line.rsplit_once(' ')?;
            Some((name.to_string(), value.parse().ok()?))
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn metrics_are_valid_prometheus_text_and_count_what_sessions_did() {
    let env = TestEnv::new();
    let server = Server::start(
        &env,
        &json!({"steps": [
            {"tool_calls": [{"name": "list_dir", "arguments": {"path": "."}}]},
            {"tool_calls": [{"name": "read_file", "arguments": {"path": "missing.txt"}}]},
            {"text": "Done."}
        ]}),
    );
    let id = server.create(&env, "Look around").await;
    server.until_let_go(&id).await;
    let session = server.get(&format!("/sessions/{id}")).await;
    assert_eq!(session["session"]["status"], "done", "{session}");
    let usage = session["session"]["usage"].clone();

    // The token is needed, as for the API.
    let url = format!("{}/metrics", server.base);
    let anonymous = reqwest::get(&url).await.unwrap();
    assert_eq!(anonymous.status(), 401);
    // The counters follow the session's events a moment after it is let
    // go: scraped until its turn is counted (a minute at most).
    let mut text = String::new();
    for _ in 0..600 {
        let response = reqwest::Client::new()
            .get(&url)
            .bearer_auth(&server.token)
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 200);
        assert!(response.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/plain; version=0.0.4"));
        text = response.text().await.unwrap();
        if text.contains("pod_turns_total{reason=\"end_turn\"}") {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }

    // promtool, the Prometheus project's own checker.
    let mut promtool = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|err| {
            panic!("promtool not found ({err}): install Debian's `prometheus` package (scripts/test does)")
        });
    promtool
        .stdin
        .take()
        .unwrap()
        .write_all(text.as_bytes())
        .unwrap();
    let checked = promtool.wait_with_output().unwrap();
    assert!(
        checked.status.success(),
        "promtool: {}{}\n{text}",
        String::from_utf8_lossy(&checked.stdout),
        String::from_utf8_lossy(&checked.stderr)
    );

    let got = samples(&text);
    assert_eq!(got["pod_model_responses_total"], 3.0, "{text}");
    assert_eq!(
        got["pod_tool_calls_total{tool=\"list_dir\",outcome=\"ok\"}"], 1.0,
        "{text}"
    );
    assert_eq!(
        got["pod_tool_calls_total{tool=\"read_file\",outcome=\"error\"}"], 1.0,
        "{text}"
    );
    assert_eq!(got["pod_turns_total{reason=\"end_turn\"}"], 1.0, "{text}");
    assert_eq!(
        got["pod_tokens_total{kind=\"output\"}"],
        usage["completion_tokens"].as_f64().unwrap(),
        "{text}"
    );
    let prompt = usage["prompt_tokens"].as_f64().unwrap();
    let cached = usage["cache_read_tokens"].as_f64().unwrap_or(0.0)
        + usage["cache_write_tokens"].as_f64().unwrap_or(0.0);
    assert_eq!(
        got["pod_tokens_total{kind=\"input\"}"],
        prompt - cached,
        "{text}"
    );
    assert_eq!(got["pod_sessions{status=\"done\"}"], 1.0, "{text}");
    assert_eq!(got["pod_sessions_live"], 0.0, "{text}");
    assert_eq!(got["pod_approvals_waiting"], 0.0, "{text}");
    // No session id is a label.
    assert!(!text.contains(&id), "{text}");
}

/// `--log-format json`: every diagnostic line is one JSON object a log
/// collector can read, with the spans it happened in.
#[test]
fn json_logs_are_one_object_per_line() {
    let env = TestEnv::new();
    let script = env.script(
        "s.json",
        &script(vec![call("list_dir", json!({"path": "."})), say("ok")]),
    );
    let out = env
        .pod()
        .args(["--log-format", "json", "-v", "run", "--script"])
        .arg(&script)
        .arg("hi")
        .output()
        .unwrap();
    assert_success(&out);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let lines: Vec<serde_json::Value> = stderr
        .lines()
        .map(|line| serde_json::from_str(line).unwrap_or_else(|err| panic!("{err}: {line}")))
        .collect();
    assert!(lines.len() >= 2, "{stderr}");
    for line in &lines {
        assert!(
            line["timestamp"].is_string() && line["level"].is_string(),
            "{line}"
        );
        assert!(line["fields"].is_object(), "{line}");
    }
    assert!(
        lines.iter().any(|l| l["fields"]["message"] == "turn ended"),
        "{stderr}"
    );
}
