//! The governor in the trace: a run a money limit stops says so on its
//! `invoke_agent` span (how it ended, which limit, the stop line) with the
//! money the run and the session spent and the session's limit, exported
//! over OTLP/HTTP to a loopback collector and decoded with
//! opentelemetry-proto.

use crate::support::*;
use serde_json::json;

#[tokio::test(flavor = "multi_thread")]
async fn a_run_stopped_by_its_money_limit_says_so_on_its_span() {
    use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
    use opentelemetry_proto::tonic::common::v1::any_value::Value as Any;
    use pod_testkit::server::{LoopbackServer, Reply};
    use prost::Message;

    let collector = LoopbackServer::start((0..50).map(|_| Reply::status(200, "")).collect()).await;
    let env = TestEnv::new();
    env.config_file(
        "[profiles.priced]\nkind = \"scripted\"\nprices = { input = 1.0, output = 1.0 }\n",
    );
    // Each answer costs 1.00 at a price of 1 per million tokens.
    let usage = json!({"prompt_tokens": 1_000_000, "completion_tokens": 0});
    let script = env.script(
        "s.json",
        &json!({"steps": [
            {"tool_calls": [{"name": "list_dir", "arguments": {"path": "."}}], "usage": usage},
            {"tool_calls": [{"name": "list_dir", "arguments": {"path": "./"}}], "usage": usage},
            {"text": "Done.", "usage": usage},
        ]}),
    );
    let mut command = env.pod_process();
    command
        .env("OTEL_EXPORTER_OTLP_ENDPOINT", collector.url(""))
        .args([
            "run",
            "--json",
            "--yes",
            "--profile",
            "priced",
            "--max-cost",
            "1.5",
        ])
        .arg("--script")
        .arg(&script)
        .arg("Look around");
    let out = tokio::task::spawn_blocking(move || command.output().unwrap())
        .await
        .unwrap();
    assert_eq!(out.status.code(), Some(3), "a limit stop exits 3");

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
    assert_eq!(runs.len(), 1, "{runs:?}");
    let attr = |key: &str| -> Option<Any> {
        runs[0]
            .attributes
            .iter()
            .find(|kv| kv.key == key)
            .and_then(|kv| kv.value.as_ref()?.value.clone())
    };
    assert_eq!(attr("pod.run.end"), Some(Any::StringValue("limit".into())));
    assert_eq!(
        attr("pod.stop.reason"),
        Some(Any::StringValue("money".into()))
    );
    let Some(Any::StringValue(detail)) = attr("pod.stop.detail") else {
        panic!("no stop line: {:?}", runs[0].attributes);
    };
    assert!(detail.contains("money 2.00 of 1.50"), "{detail}");
    assert_eq!(attr("pod.cost.run"), Some(Any::DoubleValue(2.0)));
    assert_eq!(attr("pod.cost.session"), Some(Any::DoubleValue(2.0)));
    assert_eq!(attr("pod.cost.session_max"), Some(Any::DoubleValue(1.5)));
}
