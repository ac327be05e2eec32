//! Anthropic Messages over loopback.

use crate::support::{ask, assistant, complete, endpoint, events, read_file_tool, rich_history};
use pod_llm::{FinishReason, Item, ProviderError, ProviderRequest, Reasoning, StreamEvent, Usage};
use pod_providers::AnthropicProvider;
use pod_testkit::server::{anthropic_sse, LoopbackServer, Part, Reply};
use serde_json::json;

async fn provider_for(replies: Vec<Reply>) -> (LoopbackServer, AnthropicProvider) {
    let server = LoopbackServer::start(replies).await;
    let provider = AnthropicProvider::new(endpoint(server.url(""))).unwrap();
    (server, provider)
}

/// The text stream from the Messages streaming reference, `ping` included.
pub const TEXT_STREAM: &str = concat!(
    "event: message_start\n",
    "data: {\"type\": \"message_start\", \"message\": {\"id\": \"msg_1nZdL29xx5MUA1yADyHTEsnR8uuvGzszyY\", \"type\": \"message\", \"role\": \"assistant\", \"content\": [], \"model\": \"claude-sonnet-4-5\", \"stop_reason\": null, \"stop_sequence\": null, \"usage\": {\"input_tokens\": 25, \"output_tokens\": 1}}}\n\n",
    "event: content_block_start\n",
    "data: {\"type\": \"content_block_start\", \"index\": 0, \"content_block\": {\"type\": \"text\", \"text\": \"\"}}\n\n",
    "event: ping\n",
    "data: {\"type\": \"ping\"}\n\n",
    "event: content_block_delta\n",
    "data: {\"type\": \"content_block_delta\", \"index\": 0, \"delta\": {\"type\": \"text_delta\", \"text\": \"Hello\"}}\n\n",
    "event: content_block_delta\n",
    "data: {\"type\": \"content_block_delta\", \"index\": 0, \"delta\": {\"type\": \"text_delta\", \"text\": \"!\"}}\n\n",
    "event: content_block_stop\n",
    "data: {\"type\": \"content_block_stop\", \"index\": 0}\n\n",
    "event: message_delta\n",
    "data: {\"type\": \"message_delta\", \"delta\": {\"stop_reason\": \"end_turn\", \"stop_sequence\":null}, \"usage\": {\"output_tokens\": 15}}\n\n",
    "event: message_stop\n",
    "data: {\"type\": \"message_stop\"}\n\n",
);

#[tokio::test]
async fn text_ping_usage_and_headers() {
    let (server, provider) = provider_for(vec![Reply::sse([TEXT_STREAM])]).await;
    let events = events(&provider, ask("hi")).await.unwrap();
    assert_eq!(
        events,
        vec![
            StreamEvent::TextDelta {
                text: "Hello".into()
            },
            StreamEvent::TextDelta { text: "!".into() },
            StreamEvent::Usage {
                usage: Usage {
                    prompt_tokens: 25,
                    completion_tokens: 15,
                    ..Default::default()
                }
            },
            StreamEvent::Finish {
                reason: FinishReason::Stop
            },
        ]
    );
    let request = &server.requests()[0];
    assert_eq!(request.path(), "/v1/messages");
    assert_eq!(request.header("x-api-key"), Some("sk-test-secret"));
    assert_eq!(request.header("anthropic-version"), Some("2023-06-01"));
    assert_eq!(request.header("authorization"), None);
    assert_eq!(
        request.json(),
        json!({
            "model": "test-model",
            "max_tokens": 8192,
            "stream": true,
            // Caching is on by default: the system prompt and the last
            // message carry breakpoints.
            "system": [{"type": "text", "text": "You are terse.", "cache_control": {"type": "ephemeral"}}],
            "messages": [{"role": "user", "content": [
                {"type": "text", "text": "hi", "cache_control": {"type": "ephemeral"}}
            ]}]
        })
    );
}

/// Thinking with a signature, then text, then a tool call whose input
/// arrives as `input_json_delta` fragments, usage with cache reads.
pub const THINKING_TOOL_STREAM: &[&str] = &[
    r#"{"type":"message_start","message":{"id":"msg_01","type":"message","role":"assistant","content":[],"model":"claude-sonnet-4-5","stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":472,"cache_creation_input_tokens":0,"cache_read_input_tokens":100,"output_tokens":2}}}"#,
    r#"{"type":"content_block_start","index":0,"content_block":{"type":"thinking","thinking":"","signature":""}}"#,
    r#"{"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"I should read "}}"#,
    r#"{"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"the file."}}"#,
    r#"{"type":"content_block_delta","index":0,"delta":{"type":"signature_delta","signature":"EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxBdjrkzLoky3dl1pkiMOYds"}}"#,
    r#"{"type":"content_block_stop","index":0}"#,
    r#"{"type":"content_block_start","index":1,"content_block":{"type":"text","text":""}}"#,
    r#"{"type":"content_block_delta","index":1,"delta":{"type":"text_delta","text":"Reading it."}}"#,
    r#"{"type":"content_block_stop","index":1}"#,
    r#"{"type":"content_block_start","index":2,"content_block":{"type":"tool_use","id":"toolu_01T1x1fJ34qAmk2tNTrN7Up6","name":"read_file","input":{}}}"#,
    r#"{"type":"content_block_delta","index":2,"delta":{"type":"input_json_delta","partial_json":""}}"#,
    r#"{"type":"content_block_delta","index":2,"delta":{"type":"input_json_delta","partial_json":"{\"path\": \"a"}}"#,
    r#"{"type":"content_block_delta","index":2,"delta":{"type":"input_json_delta","partial_json":".txt\"}"}}"#,
    r#"{"type":"content_block_stop","index":2}"#,
    r#"{"type":"content_block_start","index":3,"content_block":{"type":"tool_use","id":"toolu_02","name":"list_todos","input":{}}}"#,
    r#"{"type":"content_block_stop","index":3}"#,
    r#"{"type":"message_delta","delta":{"stop_reason":"tool_use","stop_sequence":null},"usage":{"output_tokens":89}}"#,
    r#"{"type":"message_stop"}"#,
];

fn stream_of(events: &[&str]) -> Vec<String> {
    let values: Vec<serde_json::Value> = events
        .iter()
        .map(|e| serde_json::from_str(e).unwrap())
        .collect();
    anthropic_sse(&values)
}

#[tokio::test]
async fn thinking_with_signature_and_fragmented_tool_input() {
    let (_server, provider) = provider_for(vec![Reply::sse(stream_of(THINKING_TOOL_STREAM))]).await;
    let response = complete(&provider, ask("read a.txt")).await.unwrap();
    assert_eq!(
        response.reasoning,
        Some(Reasoning {
            text: "I should read the file.".into(),
            signature: Some("EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxBdjrkzLoky3dl1pkiMOYds".into()),
        })
    );
    assert_eq!(response.text, "Reading it.");
    assert_eq!(response.tool_calls.len(), 2);
    assert_eq!(response.tool_calls[0].id, "toolu_01T1x1fJ34qAmk2tNTrN7Up6");
    assert_eq!(response.tool_calls[0].arguments, r#"{"path": "a.txt"}"#);
    // A parameterless call sends no input deltas at all.
    assert_eq!(response.tool_calls[1].arguments, "{}");
    assert_eq!(response.finish, Some(FinishReason::ToolCalls));
    assert_eq!(
        response.usage,
        Some(Usage {
            // 472 fresh + 100 read from the cache: the whole request.
            prompt_tokens: 572,
            completion_tokens: 89,
            cache_read_tokens: 100,
            ..Default::default()
        })
    );
}

#[tokio::test]
async fn error_event_inside_a_200_stream() {
    let stream = concat!(
        "event: message_start\n",
        "data: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"type\":\"message\",\"role\":\"assistant\",\"content\":[],\"model\":\"claude\",\"usage\":{\"input_tokens\":5,\"output_tokens\":1}}}\n\n",
        "event: ping\n",
        "data: {\"type\": \"ping\"}\n\n",
        "event: error\n",
        "data: {\"type\": \"error\", \"error\": {\"type\": \"overloaded_error\", \"message\": \"Overloaded\"}}\n\n",
    );
    let (_server, provider) = provider_for(vec![Reply::sse([stream])]).await;
    let err = events(&provider, ask("hi")).await.unwrap_err();
    assert_eq!(
        err,
        ProviderError::Api {
            kind: "overloaded_error".into(),
            message: "Overloaded".into(),
            retryable: true
        }
    );
}

#[tokio::test]
async fn unauthorized_is_surfaced_with_the_providers_message() {
    let body =
        r#"{"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key"}}"#;
    let (_server, provider) = provider_for(vec![Reply::status(401, body)]).await;
    let err = complete(&provider, ask("hi")).await.unwrap_err();
    assert_eq!(
        err,
        ProviderError::Http {
            status: 401,
            message: "authentication_error: invalid x-api-key".into(),
            retry_after: None
        }
    );
    assert!(err.to_string().contains("401"));
}

#[tokio::test]
async fn dropped_before_message_delta_is_a_transport_error() {
    let cut: String = TEXT_STREAM
        .split("event: content_block_stop")
        .next()
        .unwrap()
        .into();
    let (_server, provider) = provider_for(vec![Reply::sse([cut]).then(Part::Drop)]).await;
    let err = events(&provider, ask("hi")).await.unwrap_err();
    assert!(matches!(err, ProviderError::Transport(_)), "{err:?}");
}

#[tokio::test]
async fn ending_after_message_delta_without_message_stop_is_complete() {
    let cut: String = TEXT_STREAM
        .split("event: message_stop")
        .next()
        .unwrap()
        .into();
    let (_server, provider) = provider_for(vec![Reply::sse([cut])]).await;
    let response = complete(&provider, ask("hi")).await.unwrap();
    assert_eq!(response.text, "Hello!");
    assert_eq!(response.finish, Some(FinishReason::Stop));
}

/// System items become `<system-reminder>` user text, merged so roles
/// alternate; tool results are `tool_result` blocks first in their user
/// message; thinking goes back with its signature; malformed arguments go
/// back as an empty input next to their error result.
#[tokio::test]
async fn request_body_maps_history() {
    let (server, provider) = provider_for(vec![Reply::sse([TEXT_STREAM])]).await;
    let mut history = vec![
        Item::user("Plan first"),
        assistant(
            "",
            Some(Reasoning {
                text: "Check the plan.".into(),
                signature: Some("sig-1".into()),
            }),
            &[("toolu_0", "read_file", r#"{"path":"plan.md"}"#)],
        ),
        Item::tool_result("toolu_0", "1. do it", false),
    ];
    history.extend(rich_history());
    let request = ProviderRequest {
        system_prompt: "You are pod.".into(),
        history: history.into(),
        tools: vec![read_file_tool()].into(),
        cache_key: None,
        history_id: None,
    };
    complete(&provider, request).await.unwrap();
    // Key order is not part of the contract, and serde_json's preserve_order
    // (unified in when pod-acp is built alongside) would change it.
    insta::with_settings!({sort_maps => true}, {
        insta::assert_json_snapshot!("anthropic_request_body", server.bodies()[0]);
    });
}
