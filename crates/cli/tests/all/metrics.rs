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
    // Spend is labelled with the model and the profile (none: `default`).
    let pair = r#"model="scripted",profile="default""#;
    assert_eq!(
        got[&format!("pod_model_responses_total{{{pair}}}")],
        3.0,
        "{text}"
    );
    // Each request timed, to its end and to its first event.
    for histogram in ["pod_model_request_seconds", "pod_model_first_event_seconds"] {
        let key = format!("{histogram}_count{{model=\"scripted\"}}");
        let count = *got
            .get(&key)
            .unwrap_or_else(|| panic!("no {key} in {text}"));
        assert_eq!(count, 3.0, "{histogram}: {text}");
        assert_eq!(
            got[&format!("{histogram}_bucket{{model=\"scripted\",le=\"+Inf\"}}")],
            count,
            "{text}"
        );
    }
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
        got[&format!("pod_tokens_total{{{pair},kind=\"output\"}}")],
        usage["completion_tokens"].as_f64().unwrap(),
        "{text}"
    );
    let prompt = usage["prompt_tokens"].as_f64().unwrap();
    let cached = usage["cache_read_tokens"].as_f64().unwrap_or(0.0)
        + usage["cache_write_tokens"].as_f64().unwrap_or(0.0);
    assert_eq!(
        got[&format!("pod_tokens_total{{{pair},kind=\"input\"}}")],
        prompt - cached,
        "{text}"
    );
    assert_eq!(got["pod_sessions{status=\"done\"}"], 1.0, "{text}");
    assert_eq!(got["pod_sessions_live"], 0.0, "{text}");
    assert_eq!(got["pod_approvals_waiting"], 0.0, "{text}");
    // The appends of the session, in the latency histogram.
    let appends = got["pod_log_append_seconds_count"];
    assert_eq!(appends, session["records"].as_f64().unwrap(), "{text}");
    assert_eq!(
        got["pod_log_append_seconds_bucket{le=\"+Inf\"}"], appends,
        "{text}"
    );
    assert_eq!(got["pod_lease_takeovers_total"], 0.0, "{text}");
    // No session id is a label.
    assert!(!text.contains(&id), "{text}");
}

/// A model server nobody listens at: each failed attempt is counted by
/// kind, the retry too, though no answer ever came.
#[tokio::test(flavor = "multi_thread")]
async fn failed_model_requests_are_counted_by_kind_with_their_retries() {
    let env = TestEnv::new();
    // A port nothing listens on (bound, then closed).
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    env.config_file(&format!(
        "[profiles.gone]\nkind = \"openai\"\nbase_url = \"http://127.0.0.1:{port}/v1\"\n\
         model = \"m\"\nmax_attempts = 2\n"
    ));
    let mut command = env.pod_process();
    command
        .env("OPENAI_API_KEY", "anything")
        .args(["--profile", "gone"]);
    let server = Server::start_with(command, &env);
    let id = server.create(&env, "Say hi").await;
    server.until_let_go(&id).await;
    let session = server.get(&format!("/sessions/{id}")).await;
    assert_eq!(session["session"]["status"], "failed", "{session}");
    let text = server.metrics().await;
    let got = samples(&text);
    assert_eq!(
        got["pod_model_request_failures_total{model=\"m\",kind=\"unreachable\"}"], 2.0,
        "{text}"
    );
    assert_eq!(got["pod_model_retries_total{model=\"m\"}"], 1.0, "{text}");
    // Nothing answered: no time to an answer's end is recorded.
    assert_eq!(
        got["pod_model_request_seconds_count{model=\"m\"}"], 0.0,
        "{text}"
    );
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

/// With traces exported, a JSON log line written during a run names the
/// run's trace and span.
#[tokio::test(flavor = "multi_thread")]
async fn json_logs_name_the_trace_when_traces_are_exported() {
    use pod_testkit::server::{LoopbackServer, Reply};
    let collector = LoopbackServer::start((0..20).map(|_| Reply::status(200, "")).collect()).await;
    let env = TestEnv::new();
    let script = env.script(
        "s.json",
        &script(vec![call("list_dir", json!({"path": "."})), say("ok")]),
    );
    let mut command = env.pod_process();
    command
        .env("OTEL_EXPORTER_OTLP_ENDPOINT", collector.url(""))
        .args(["--log-format", "json", "-vv", "run", "--script"])
        .arg(&script)
        .arg("hi");
    let out = tokio::task::spawn_blocking(move || command.output().unwrap())
        .await
        .unwrap();
    assert_success(&out);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let in_run: Vec<serde_json::Value> = stderr
        .lines()
        .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
        .filter(|line| line["fields"]["message"] == "tool result committed")
        .collect();
    assert!(!in_run.is_empty(), "{stderr}");
    let run = in_run[0]["spans"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == "invoke_agent")
        .unwrap_or_else(|| panic!("{}", in_run[0]))
        .clone();
    assert_eq!(run["trace_id"].as_str().unwrap().len(), 32, "{run}");
    assert_eq!(run["span_id"].as_str().unwrap().len(), 16, "{run}");
}

/// OTLP traces: a run is a trace with a span per model request and per
/// tool call, named and attributed as the GenAI conventions say; a
/// subagent's run is a child of the parent's `task` call. Received by a
/// loopback OTLP/HTTP endpoint and decoded with opentelemetry-proto.
#[tokio::test(flavor = "multi_thread")]
async fn a_run_exports_its_trace_over_otlp() {
    use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
    use opentelemetry_proto::tonic::common::v1::any_value::Value as Any;
    use opentelemetry_proto::tonic::trace::v1::Span;
    use pod_testkit::server::{LoopbackServer, Reply};
    use prost::Message;

    let collector = LoopbackServer::start((0..50).map(|_| Reply::status(200, "")).collect()).await;
    let env = TestEnv::new();
    let script = env.script(
        "s.json",
        &json!({
            "model": "scripted-test",
            "steps": [
                {"tool_calls": [{"name": "list_dir", "arguments": {"path": "."}}]},
                {"tool_calls": [{"name": "read_file", "arguments": {"path": "missing.txt"}}]},
                {"tool_calls": [{"name": "task", "arguments": {"description": "count", "prompt": "Count the notes"}}]},
                {"text": "Done."}
            ],
            "agents": [{"task": "Count the notes", "steps": [{"text": "There are none."}]}]
        }),
    );
    let mut command = env.pod_process();
    command
        .env("OTEL_EXPORTER_OTLP_ENDPOINT", collector.url(""))
        .env("OTEL_SERVICE_NAME", "pod-under-test")
        .args(["run", "--json", "--yes", "--script"])
        .arg(&script)
        .arg("Look and count");
    let out = tokio::task::spawn_blocking(move || command.output().unwrap())
        .await
        .unwrap();
    assert_success(&out);
    let id = session_id(&ndjson(&out.stdout));

    let mut spans: Vec<Span> = Vec::new();
    for request in collector.requests() {
        assert_eq!(request.path(), "/v1/traces");
        assert_eq!(
            request.header("content-type"),
            Some("application/x-protobuf")
        );
        let export = ExportTraceServiceRequest::decode(request.body.as_slice()).unwrap();
        for resource in export.resource_spans {
            let service = resource
                .resource
                .iter()
                .flat_map(|r| &r.attributes)
                .find(|kv| kv.key == "service.name")
                .and_then(|kv| kv.value.as_ref()?.value.clone());
            assert_eq!(service, Some(Any::StringValue("pod-under-test".into())));
            for scope in resource.scope_spans {
                spans.extend(scope.spans);
            }
        }
    }
    let attr = |span: &Span, key: &str| -> Option<Any> {
        span.attributes
            .iter()
            .find(|kv| kv.key == key)
            .and_then(|kv| kv.value.as_ref()?.value.clone())
    };
    let named = |name: &str| -> Vec<&Span> { spans.iter().filter(|s| s.name == name).collect() };
    let runs = named("invoke_agent pod");
    assert_eq!(
        runs.len(),
        2,
        "the run and the subagent's: {:?}",
        spans.iter().map(|s| &s.name).collect::<Vec<_>>()
    );
    let root = runs
        .iter()
        .find(|s| s.parent_span_id.is_empty())
        .expect("a root run span");
    assert_eq!(
        attr(root, "gen_ai.conversation.id"),
        Some(Any::StringValue(id.clone()))
    );
    assert_eq!(
        attr(root, "gen_ai.operation.name"),
        Some(Any::StringValue("invoke_agent".into()))
    );
    // Where the plan stood when the run ended (this one made none).
    assert_eq!(attr(root, "pod.plan.total"), Some(Any::IntValue(0)));
    // Everything is one trace.
    assert!(spans.iter().all(|s| s.trace_id == root.trace_id));
    // The requests and calls of the run are its children.
    let chats: Vec<&Span> = named("chat scripted-test")
        .into_iter()
        .filter(|s| s.parent_span_id == root.span_id)
        .collect();
    assert_eq!(chats.len(), 4);
    let list = named("execute_tool list_dir");
    assert_eq!(list.len(), 1);
    assert_eq!(list[0].parent_span_id, root.span_id);
    assert_eq!(
        attr(list[0], "gen_ai.tool.name"),
        Some(Any::StringValue("list_dir".into()))
    );
    // The subagent's run is a child of the task call.
    let task = named("execute_tool task");
    assert_eq!(task.len(), 1);
    let child = runs.iter().find(|s| !s.parent_span_id.is_empty()).unwrap();
    assert_eq!(child.parent_span_id, task[0].span_id);
    // The usage on the request spans is the session's.
    let output: i64 = chats
        .iter()
        .map(|s| match attr(s, "gen_ai.usage.output_tokens") {
            Some(Any::IntValue(n)) => n,
            other => panic!("output tokens: {other:?}"),
        })
        .sum();
    let usage = env.show_json(&id)["session"]["usage"].clone();
    assert_eq!(output, usage["completion_tokens"].as_i64().unwrap());
    assert_eq!(
        attr(chats[0], "gen_ai.request.model"),
        Some(Any::StringValue("scripted-test".into()))
    );
    assert_eq!(
        attr(chats[0], "gen_ai.response.finish_reasons"),
        Some(Any::StringValue("tool_calls".into()))
    );
    // A call that failed is an error on its span; one that worked is not.
    assert_ne!(list[0].status.as_ref().map(|s| s.code), Some(2));
    let failed = named("execute_tool read_file");
    assert_eq!(
        failed[0].status.as_ref().map(|s| s.code),
        Some(2),
        "{:?}",
        failed[0].status
    );
}

/// A session killed mid-run and resumed by another process stays one
/// trace: the resumed run's span is a child of the killed run's, whose
/// context the log kept.
#[tokio::test(flavor = "multi_thread")]
async fn a_resumed_session_carries_on_its_trace() {
    use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
    use pod_testkit::server::{LoopbackServer, Reply};
    use prost::Message;

    let collector = LoopbackServer::start((0..50).map(|_| Reply::status(200, "")).collect()).await;
    let env = TestEnv::new();
    let script = env.script(
        "s.json",
        &script(vec![
            call("bash", json!({"command": "touch started; sleep 60"})),
            say("Resumed and done."),
        ]),
    );
    let endpoint = collector.url("");
    let mut first = env.pod_process();
    first
        .env("OTEL_EXPORTER_OTLP_ENDPOINT", &endpoint)
        .args(["run", "--yes", "--script"])
        .arg(&script)
        .arg("Work")
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    let mut child = first.spawn().unwrap();
    let mut polls = 0;
    while !env.workspace().join("started").exists() {
        assert!(polls < 600, "the command never ran");
        polls += 1;
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    child.kill().unwrap();
    child.wait().unwrap();
    let id = env.sessions_json()[0]["id"].as_str().unwrap().to_string();

    let mut again = env.pod_process();
    again
        .env("OTEL_EXPORTER_OTLP_ENDPOINT", &endpoint)
        .args(["resume", "--yes", &id]);
    let out = tokio::task::spawn_blocking(move || again.output().unwrap())
        .await
        .unwrap();
    assert_success(&out);

    // The log kept both runs' contexts, in one trace.
    let log = env.pod_home().join("sessions").join(&id).join("log.jsonl");
    let traces: Vec<String> = std::fs::read_to_string(log)
        .unwrap()
        .lines()
        .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
        .filter_map(|line| {
            line.as_object()?.values().find_map(|r| {
                r.get("trace")?
                    .get("traceparent")?
                    .as_str()
                    .map(String::from)
            })
        })
        .collect();
    assert_eq!(traces.len(), 2, "{traces:?}");
    let field = |tp: &str, n: usize| tp.split('-').nth(n).unwrap().to_string();
    assert_eq!(field(&traces[0], 1), field(&traces[1], 1), "one trace");
    // What the resumed process exported: its run, a child of the first.
    let mut runs = Vec::new();
    for request in collector.requests() {
        let export = ExportTraceServiceRequest::decode(request.body.as_slice()).unwrap();
        for resource in export.resource_spans {
            for scope in resource.scope_spans {
                runs.extend(
                    scope
                        .spans
                        .into_iter()
                        .filter(|s| s.name == "invoke_agent pod"),
                );
            }
        }
    }
    assert_eq!(runs.len(), 1, "the killed process exported nothing");
    // The span carries its ids as attributes too (what a JSON log line of
    // the run names).
    let ids: Vec<_> = runs[0]
        .attributes
        .iter()
        .filter(|kv| kv.key == "trace_id" || kv.key == "span_id")
        .collect();
    assert_eq!(ids.len(), 2, "{:?}", runs[0].attributes);
    let hex = |bytes: &[u8]| bytes.iter().map(|b| format!("{b:02x}")).collect::<String>();
    assert_eq!(hex(&runs[0].trace_id), field(&traces[0], 1));
    assert_eq!(hex(&runs[0].parent_span_id), field(&traces[0], 2));
    assert_eq!(hex(&runs[0].span_id), field(&traces[1], 2));
}

/// The config file's [telemetry] table names the collector when the
/// environment does not: endpoint, headers and service name.
#[tokio::test(flavor = "multi_thread")]
async fn the_config_file_can_name_the_collector() {
    use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
    use opentelemetry_proto::tonic::common::v1::any_value::Value as Any;
    use pod_testkit::server::{LoopbackServer, Reply};
    use prost::Message;
    let collector = LoopbackServer::start((0..20).map(|_| Reply::status(200, "")).collect()).await;
    let env = TestEnv::new();
    env.config_file(&format!(
        "[telemetry]\notlp_endpoint = \"{}\"\nservice_name = \"from-config\"\n\
         otlp_headers = {{ x-team = \"agents\" }}\n",
        collector.url("")
    ));
    let script = env.script("s.json", &script(vec![say("ok")]));
    let mut command = env.pod_process();
    command.args(["run", "--script"]).arg(&script).arg("hi");
    let out = tokio::task::spawn_blocking(move || command.output().unwrap())
        .await
        .unwrap();
    assert_success(&out);
    let requests = collector.requests();
    assert!(!requests.is_empty(), "nothing exported");
    assert_eq!(requests[0].path(), "/v1/traces");
    assert_eq!(requests[0].header("x-team"), Some("agents"));
    let export = ExportTraceServiceRequest::decode(requests[0].body.as_slice()).unwrap();
    let service = export.resource_spans[0]
        .resource
        .iter()
        .flat_map(|r| &r.attributes)
        .find(|kv| kv.key == "service.name")
        .and_then(|kv| kv.value.as_ref()?.value.clone());
    assert_eq!(service, Some(Any::StringValue("from-config".into())));
}

/// With an OTLP endpoint, `pod serve` exports /metrics' counters over OTLP
/// too (decoded with opentelemetry-proto).
#[tokio::test(flavor = "multi_thread")]
async fn serve_exports_its_counters_over_otlp() {
    use opentelemetry_proto::tonic::collector::metrics::v1::ExportMetricsServiceRequest;
    use opentelemetry_proto::tonic::metrics::v1::metric::Data;
    use opentelemetry_proto::tonic::metrics::v1::number_data_point::Value;
    use pod_testkit::server::{LoopbackServer, Reply};
    use prost::Message;
    let collector = LoopbackServer::start((0..400).map(|_| Reply::status(200, "")).collect()).await;
    let env = TestEnv::new();
    let path = env.script(
        "serve-script.json",
        &json!({"steps": [
            {"tool_calls": [{"name": "list_dir", "arguments": {"path": "."}}]},
            {"text": "Done."}
        ]}),
    );
    let mut command = env.pod_process();
    command
        .env("OTEL_EXPORTER_OTLP_ENDPOINT", collector.url(""))
        .env("OTEL_METRIC_EXPORT_INTERVAL", "200")
        .arg("--script")
        .arg(path);
    let server = Server::start_with(command, &env);
    let id = server.create(&env, "Look").await;
    server.until_let_go(&id).await;
    // The exports come every 200 ms: read them until one counts both
    // responses (a minute at most).
    let responses = |request: &pod_testkit::server::Recorded| -> Option<f64> {
        let export = ExportMetricsServiceRequest::decode(request.body.as_slice()).ok()?;
        export
            .resource_metrics
            .iter()
            .flat_map(|r| &r.scope_metrics)
            .flat_map(|s| &s.metrics)
            .filter(|m| m.name == "pod_model_responses")
            .find_map(|m| match &m.data {
                Some(Data::Sum(sum)) => sum.data_points.first().and_then(|p| match p.value {
                    Some(Value::AsDouble(v)) => Some(v),
                    Some(Value::AsInt(v)) => Some(v as f64),
                    None => None,
                }),
                _ => None,
            })
    };
    let mut counted = None;
    for _ in 0..600 {
        counted = collector
            .requests()
            .iter()
            .filter(|r| r.path() == "/v1/metrics")
            .filter_map(responses)
            .next_back();
        if counted == Some(2.0) {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert_eq!(counted, Some(2.0));
}
