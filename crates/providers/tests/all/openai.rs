//! Chat Completions over loopback, in the wire formats of OpenAI, DeepSeek,
//! Ollama and llama.cpp.

use crate::support::{ask, complete, endpoint, events, read_file_tool, rich_history};
use pod_llm::{FinishReason, ProviderError, ProviderRequest, StreamEvent, Usage};
use pod_providers::{OpenAiProvider, Timeouts};
use pod_testkit::server::{LoopbackServer, Part, Reply};
use std::time::Duration;

async fn provider_for(replies: Vec<Reply>) -> (LoopbackServer, OpenAiProvider) {
    let server = LoopbackServer::start(replies).await;
    let provider = OpenAiProvider::new(endpoint(server.url("/v1"))).unwrap();
    (server, provider)
}

/// OpenAI's text stream with `include_usage`: a role chunk, content chunks,
/// the finish chunk, a usage chunk with empty `choices`, `[DONE]`.
const OPENAI_TEXT: &str = concat!(
    "data: {\"id\":\"chatcmpl-1\",\"object\":\"chat.completion.chunk\",\"created\":1694268190,\"model\":\"gpt-4o-mini\",\"system_fingerprint\":\"fp_44709d6fcb\",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"\",\"refusal\":null},\"logprobs\":null,\"finish_reason\":null}],\"usage\":null}\n\n",
    "data: {\"id\":\"chatcmpl-1\",\"object\":\"chat.completion.chunk\",\"created\":1694268190,\"model\":\"gpt-4o-mini\",\"system_fingerprint\":\"fp_44709d6fcb\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hello\"},\"logprobs\":null,\"finish_reason\":null}],\"usage\":null}\n\n",
    "data: {\"id\":\"chatcmpl-1\",\"object\":\"chat.completion.chunk\",\"created\":1694268190,\"model\":\"gpt-4o-mini\",\"system_fingerprint\":\"fp_44709d6fcb\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\" there\"},\"logprobs\":null,\"finish_reason\":null}],\"usage\":null}\n\n",
    "data: {\"id\":\"chatcmpl-1\",\"object\":\"chat.completion.chunk\",\"created\":1694268190,\"model\":\"gpt-4o-mini\",\"system_fingerprint\":\"fp_44709d6fcb\",\"choices\":[{\"index\":0,\"delta\":{},\"logprobs\":null,\"finish_reason\":\"stop\"}],\"usage\":null}\n\n",
    "data: {\"id\":\"chatcmpl-1\",\"object\":\"chat.completion.chunk\",\"created\":1694268190,\"model\":\"gpt-4o-mini\",\"system_fingerprint\":\"fp_44709d6fcb\",\"choices\":[],\"usage\":{\"prompt_tokens\":19,\"completion_tokens\":2,\"total_tokens\":21,\"prompt_tokens_details\":{\"cached_tokens\":0}}}\n\n",
    "data: [DONE]\n\n",
);

#[tokio::test]
async fn text_usage_and_request_headers() {
    let (server, provider) = provider_for(vec![Reply::sse([OPENAI_TEXT])]).await;
    let events = events(&provider, ask("hi")).await.unwrap();
    assert_eq!(
        events,
        vec![
            StreamEvent::TextDelta {
                text: "Hello".into()
            },
            StreamEvent::TextDelta {
                text: " there".into()
            },
            StreamEvent::Usage {
                usage: Usage {
                    prompt_tokens: 19,
                    completion_tokens: 2,
                    ..Default::default()
                }
            },
            StreamEvent::Finish {
                reason: FinishReason::Stop
            },
        ]
    );
    let request = &server.requests()[0];
    assert_eq!(request.request_line, "POST /v1/chat/completions HTTP/1.1");
    assert_eq!(
        request.header("authorization"),
        Some("Bearer sk-test-secret")
    );
    // Sent in pieces (the system prompt is shared), with its length.
    assert_eq!(request.header("transfer-encoding"), None);
    assert_eq!(
        request.header("content-length"),
        Some(request.body.len().to_string().as_str())
    );
    assert_eq!(
        request.json(),
        serde_json::json!({
            "model": "test-model",
            "messages": [
                {"role": "system", "content": "You are terse."},
                {"role": "user", "content": "hi"}
            ],
            "stream": true,
            "stream_options": {"include_usage": true}
        })
    );
}

/// A redirect that keeps the method is followed with the same body, sent
/// in pieces, to the same server; one to another server is not.
#[tokio::test]
async fn a_redirect_to_the_same_server_is_followed_with_the_body() {
    let moved = Reply::status(307, "").header("location", "/v2/chat/completions");
    let (server, provider) = provider_for(vec![moved, Reply::sse([OPENAI_TEXT])]).await;
    let answer = events(&provider, ask("hi")).await.unwrap();
    assert!(answer.contains(&StreamEvent::TextDelta {
        text: "Hello".into()
    }));
    let requests = server.requests();
    assert_eq!(requests.len(), 2);
    assert_eq!(
        requests[1].request_line,
        "POST /v2/chat/completions HTTP/1.1"
    );
    assert_eq!(requests[1].body, requests[0].body);
    assert_eq!(
        requests[1].header("authorization"),
        Some("Bearer sk-test-secret")
    );
    let elsewhere =
        Reply::status(307, "").header("location", "http://127.0.0.2:9/v1/chat/completions");
    let (server, provider) = provider_for(vec![elsewhere]).await;
    let err = events(&provider, ask("hi")).await.unwrap_err();
    assert!(
        matches!(err, pod_llm::ProviderError::Http { status: 307, .. }),
        "{err:?}"
    );
    assert_eq!(server.requests().len(), 1);
}

/// Two calls whose argument fragments interleave, with SSE lines split
/// across TCP writes.
#[tokio::test]
async fn interleaved_parallel_tool_calls_in_fragments() {
    let stream = concat!(
        "data: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":null,\"tool_calls\":[{\"index\":0,\"id\":\"call_A\",\"type\":\"function\",\"function\":{\"name\":\"read_file\",\"arguments\":\"\"}}]},\"finish_reason\":null}]}\n\n",
        "data: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":1,\"id\":\"call_B\",\"type\":\"function\",\"function\":{\"name\":\"read_file\",\"arguments\":\"\"}}]},\"finish_reason\":null}]}\n\n",
        "data: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"function\":{\"arguments\":\"{\\\"pa\"}}]},\"finish_reason\":null}]}\n\n",
        "data: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":1,\"function\":{\"arguments\":\"{\\\"path\\\": \\\"b\"}}]},\"finish_reason\":null}]}\n\n",
        "data: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"function\":{\"arguments\":\"th\\\": \\\"a.txt\\\"}\"}}]},\"finish_reason\":null}]}\n\n",
        "data: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":1,\"function\":{\"arguments\":\".txt\\\"}\"}}]},\"finish_reason\":null}]}\n\n",
        "data: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"tool_calls\"}]}\n\n",
        "data: [DONE]\n\n",
    );
    // Split every 37 bytes: lines and even UTF-8 boundaries do not line up
    // with writes.
    let parts: Vec<String> = stream
        .as_bytes()
        .chunks(37)
        .map(|c| String::from_utf8(c.to_vec()).unwrap())
        .collect();
    let (_server, provider) = provider_for(vec![Reply::sse(parts)]).await;
    let response = complete(&provider, ask("read both")).await.unwrap();
    assert_eq!(response.finish, Some(FinishReason::ToolCalls));
    let calls: Vec<_> = response
        .tool_calls
        .iter()
        .map(|c| (c.id.as_str(), c.name.as_str(), c.arguments.as_str()))
        .collect();
    assert_eq!(
        calls,
        vec![
            ("call_A", "read_file", r#"{"path": "a.txt"}"#),
            ("call_B", "read_file", r#"{"path": "b.txt"}"#),
        ]
    );
}

/// Ollama: each call whole in one delta, `index: 0` reused with new ids;
/// older versions send no index and no usage unless asked.
#[tokio::test]
async fn ollama_whole_calls_with_reused_index() {
    let stream = concat!(
        "data: {\"id\":\"chatcmpl-94\",\"object\":\"chat.completion.chunk\",\"created\":1739000000,\"model\":\"qwen3\",\"system_fingerprint\":\"fp_ollama\",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"\",\"tool_calls\":[{\"id\":\"call_x1\",\"index\":0,\"type\":\"function\",\"function\":{\"name\":\"read_file\",\"arguments\":\"{\\\"path\\\":\\\"a.txt\\\"}\"}}]},\"finish_reason\":null}]}\n\n",
        "data: {\"id\":\"chatcmpl-94\",\"object\":\"chat.completion.chunk\",\"created\":1739000000,\"model\":\"qwen3\",\"system_fingerprint\":\"fp_ollama\",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"\",\"tool_calls\":[{\"id\":\"call_x2\",\"index\":0,\"type\":\"function\",\"function\":{\"name\":\"read_file\",\"arguments\":\"{\\\"path\\\":\\\"b.txt\\\"}\"}}]},\"finish_reason\":null}]}\n\n",
        "data: {\"id\":\"chatcmpl-94\",\"object\":\"chat.completion.chunk\",\"created\":1739000000,\"model\":\"qwen3\",\"system_fingerprint\":\"fp_ollama\",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"\"},\"finish_reason\":\"tool_calls\"}]}\n\n",
        "data: {\"id\":\"chatcmpl-94\",\"object\":\"chat.completion.chunk\",\"created\":1739000000,\"model\":\"qwen3\",\"system_fingerprint\":\"fp_ollama\",\"choices\":[],\"usage\":{\"prompt_tokens\":120,\"completion_tokens\":30,\"total_tokens\":150}}\n\n",
        "data: [DONE]\n\n",
    );
    let (_server, provider) = provider_for(vec![Reply::sse([stream])]).await;
    let response = complete(&provider, ask("read both")).await.unwrap();
    let ids: Vec<_> = response.tool_calls.iter().map(|c| c.id.as_str()).collect();
    assert_eq!(ids, ["call_x1", "call_x2"]);
    assert_eq!(response.tool_calls[1].arguments, r#"{"path":"b.txt"}"#);
    assert_eq!(response.usage.map(|u| u.prompt_tokens), Some(120));
}

/// A server that sends neither index nor id: ids are synthesized, stable
/// within the response and distinct across responses.
#[tokio::test]
async fn missing_index_and_ids_are_synthesized() {
    let stream = concat!(
        "data: {\"choices\":[{\"delta\":{\"tool_calls\":[{\"type\":\"function\",\"function\":{\"name\":\"read_file\",\"arguments\":\"{\\\"path\\\":\"}}]}}]}\n\n",
        "data: {\"choices\":[{\"delta\":{\"tool_calls\":[{\"function\":{\"arguments\":\"\\\"a\\\"}\"}}]}}]}\n\n",
        "data: {\"choices\":[{\"delta\":{\"tool_calls\":[{\"type\":\"function\",\"function\":{\"name\":\"list\",\"arguments\":\"{}\"}}]}}]}\n\n",
        "data: {\"choices\":[{\"delta\":{},\"finish_reason\":\"tool_calls\"}]}\n\n",
    );
    let (_server, provider) = provider_for(vec![Reply::sse([stream]), Reply::sse([stream])]).await;
    let first = complete(&provider, ask("go")).await.unwrap();
    let second = complete(&provider, ask("go")).await.unwrap();
    assert_eq!(first.tool_calls.len(), 2);
    assert_eq!(first.tool_calls[0].arguments, r#"{"path":"a"}"#);
    assert_eq!(first.tool_calls[1].name, "list");
    assert_ne!(first.tool_calls[0].id, first.tool_calls[1].id);
    assert_ne!(first.tool_calls[0].id, second.tool_calls[0].id);
    assert!(first.tool_calls.iter().all(|c| c.id.starts_with("call_")));
}

/// DeepSeek: `: keep-alive` comments while queued, `reasoning_content`
/// deltas, `usage: null` on every chunk and the real usage on the last.
const DEEPSEEK_REASONING_CALL: &str = concat!(
    ": keep-alive\n\n",
    ": keep-alive\n\n",
    "data: {\"id\":\"ds1\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"deepseek-reasoner\",\"system_fingerprint\":\"fp_ds\",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":null,\"reasoning_content\":\"\"},\"logprobs\":null,\"finish_reason\":null}],\"usage\":null}\n\n",
    "data: {\"id\":\"ds1\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"deepseek-reasoner\",\"system_fingerprint\":\"fp_ds\",\"choices\":[{\"index\":0,\"delta\":{\"content\":null,\"reasoning_content\":\"Need the \"},\"logprobs\":null,\"finish_reason\":null}],\"usage\":null}\n\n",
    "data: {\"id\":\"ds1\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"deepseek-reasoner\",\"system_fingerprint\":\"fp_ds\",\"choices\":[{\"index\":0,\"delta\":{\"content\":null,\"reasoning_content\":\"file.\"},\"logprobs\":null,\"finish_reason\":null}],\"usage\":null}\n\n",
    "data: {\"id\":\"ds1\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"deepseek-reasoner\",\"system_fingerprint\":\"fp_ds\",\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"id\":\"call_00_ds\",\"type\":\"function\",\"function\":{\"name\":\"read_file\",\"arguments\":\"\"}}]},\"logprobs\":null,\"finish_reason\":null}],\"usage\":null}\n\n",
    "data: {\"id\":\"ds1\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"deepseek-reasoner\",\"system_fingerprint\":\"fp_ds\",\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"function\":{\"arguments\":\"{\\\"path\\\":\\\"a.txt\\\"}\"}}]},\"logprobs\":null,\"finish_reason\":null}],\"usage\":null}\n\n",
    "data: {\"id\":\"ds1\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"deepseek-reasoner\",\"system_fingerprint\":\"fp_ds\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"\"},\"logprobs\":null,\"finish_reason\":\"tool_calls\"}],\"usage\":{\"prompt_tokens\":40,\"completion_tokens\":25,\"total_tokens\":65,\"prompt_tokens_details\":{\"cached_tokens\":0},\"completion_tokens_details\":{\"reasoning_tokens\":10},\"prompt_cache_hit_tokens\":0,\"prompt_cache_miss_tokens\":40}}\n\n",
    "data: [DONE]\n\n",
);

#[tokio::test]
async fn deepseek_reasoning_keepalives_and_usage() {
    let (_server, provider) = provider_for(vec![Reply::sse([DEEPSEEK_REASONING_CALL])]).await;
    let response = complete(&provider, ask("read a.txt")).await.unwrap();
    let reasoning = response.reasoning.unwrap();
    assert_eq!(reasoning.text, "Need the file.");
    assert_eq!(reasoning.signature, None);
    assert_eq!(response.tool_calls[0].id, "call_00_ds");
    assert_eq!(
        response.usage,
        Some(Usage {
            prompt_tokens: 40,
            completion_tokens: 25,
            reasoning_tokens: 10,
            ..Default::default()
        })
    );
}

/// DeepSeek's rule: reasoning of a tool-calling response goes back as
/// `reasoning_content`; reasoning of a plain answer does not.
#[test]
fn deepseek_reasoning_is_sent_back_only_for_tool_calling_turns() {
    use crate::support::assistant;
    use pod_llm::{Item, Reasoning};
    let provider = OpenAiProvider::new(endpoint("http://127.0.0.1:9/v1".into())).unwrap();
    let thought = |t: &str| {
        Some(Reasoning {
            text: t.into(),
            signature: None,
        })
    };
    let body = provider.request_body(&ProviderRequest {
        system_prompt: "".into(),
        history: vec![
            Item::user("q1"),
            assistant("a1", thought("plain answer thoughts"), &[]),
            Item::user("q2"),
            assistant("", thought("tool thoughts"), &[("c1", "read_file", "{}")]),
            Item::tool_result("c1", "ok", false),
        ]
        .into(),
        tools: vec![].into(),
        cache_key: None,
        history_id: None,
    });
    let messages = body["messages"].as_array().unwrap();
    assert_eq!(messages[1].get("reasoning_content"), None);
    assert_eq!(messages[3]["reasoning_content"], "tool thoughts");
    assert_eq!(messages[3]["content"], serde_json::Value::Null);
}

/// llama.cpp: `content: null` first, then finish, usage and timings in one
/// final chunk.
#[tokio::test]
async fn llama_cpp_final_chunk() {
    let stream = concat!(
        "data: {\"choices\":[{\"finish_reason\":null,\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":null}}],\"created\":1,\"id\":\"chatcmpl-l\",\"model\":\"gguf\",\"system_fingerprint\":\"b5000\",\"object\":\"chat.completion.chunk\"}\n\n",
        "data: {\"choices\":[{\"finish_reason\":null,\"index\":0,\"delta\":{\"content\":\"4\"}}],\"created\":1,\"id\":\"chatcmpl-l\",\"model\":\"gguf\",\"system_fingerprint\":\"b5000\",\"object\":\"chat.completion.chunk\"}\n\n",
        "data: {\"choices\":[{\"finish_reason\":\"stop\",\"index\":0,\"delta\":{}}],\"created\":1,\"id\":\"chatcmpl-l\",\"model\":\"gguf\",\"system_fingerprint\":\"b5000\",\"object\":\"chat.completion.chunk\",\"usage\":{\"completion_tokens\":1,\"prompt_tokens\":12,\"total_tokens\":13},\"timings\":{\"prompt_n\":12,\"prompt_ms\":30.1,\"predicted_n\":1,\"predicted_ms\":5.2}}\n\n",
        "data: [DONE]\n\n",
    );
    let (_server, provider) = provider_for(vec![Reply::sse([stream])]).await;
    let response = complete(&provider, ask("2+2")).await.unwrap();
    assert_eq!(response.text, "4");
    assert_eq!(response.usage.map(|u| u.prompt_tokens), Some(12));
    assert_eq!(response.finish, Some(FinishReason::Stop));
}

#[tokio::test]
async fn malformed_tool_arguments_are_passed_through() {
    let stream = concat!(
        "data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"id\":\"c1\",\"type\":\"function\",\"function\":{\"name\":\"read_file\",\"arguments\":\"{\\\"path\\\": a.txt\"}}]}}]}\n\n",
        "data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"tool_calls\"}]}\n\n",
        "data: [DONE]\n\n",
    );
    let (_server, provider) = provider_for(vec![Reply::sse([stream])]).await;
    let response = complete(&provider, ask("read")).await.unwrap();
    assert_eq!(response.tool_calls[0].arguments, r#"{"path": a.txt"#);
}

#[tokio::test]
async fn unauthorized_is_surfaced_with_the_providers_message() {
    let body = r#"{"error":{"message":"Incorrect API key provided: sk-test-secret. You can find your API key at https://platform.openai.com/account/api-keys.","type":"invalid_request_error","param":null,"code":"invalid_api_key"}}"#;
    let (_server, provider) = provider_for(vec![Reply::status(401, body)]).await;
    let err = complete(&provider, ask("hi")).await.unwrap_err();
    let ProviderError::Http {
        status, message, ..
    } = &err
    else {
        panic!("expected an HTTP error, got {err:?}");
    };
    assert_eq!(*status, 401);
    assert!(message.contains("Incorrect API key provided"), "{message}");
    assert!(!err.is_retryable());
    // The server echoed the key; it must not reach the user.
    assert!(!message.contains("sk-test-secret"), "{message}");
}

#[tokio::test]
async fn dropped_mid_stream_is_a_retryable_transport_error() {
    let half: String = OPENAI_TEXT
        .lines()
        .take(4)
        .map(|l| format!("{l}\n"))
        .collect();
    let reply = Reply::sse([half]).then(Part::Drop);
    let (_server, provider) = provider_for(vec![reply]).await;
    let err = events(&provider, ask("hi")).await.unwrap_err();
    assert!(matches!(err, ProviderError::Transport(_)), "{err:?}");
    assert!(err.is_retryable());
}

#[tokio::test]
async fn ending_after_the_finish_without_done_is_complete() {
    let without_done = OPENAI_TEXT.replace("data: [DONE]\n\n", "");
    let (_server, provider) = provider_for(vec![Reply::sse([without_done])]).await;
    let response = complete(&provider, ask("hi")).await.unwrap();
    assert_eq!(response.text, "Hello there");
}

#[tokio::test]
async fn silence_longer_than_the_idle_timeout_fails() {
    let reply = Reply::sse([": keep-alive\n\n"]).then(Part::Pause(Duration::from_millis(400)));
    let server = LoopbackServer::start(vec![reply]).await;
    let mut endpoint = endpoint(server.url("/v1"));
    endpoint.timeouts = Timeouts {
        request: Duration::from_secs(5),
        idle: Duration::from_millis(100),
    };
    let provider = OpenAiProvider::new(endpoint).unwrap();
    let err = events(&provider, ask("hi")).await.unwrap_err();
    assert_eq!(err, ProviderError::IdleTimeout(Duration::from_millis(100)));
}

/// The request body for a history with every item kind: tool schemas, tool
/// results and system items in place.
#[tokio::test]
async fn request_body_maps_history_one_to_one() {
    let (server, provider) = provider_for(vec![Reply::sse([OPENAI_TEXT])]).await;
    let request = ProviderRequest {
        system_prompt: "You are pod.".into(),
        history: rich_history().into(),
        tools: vec![read_file_tool()].into(),
        cache_key: None,
        history_id: None,
    };
    complete(&provider, request).await.unwrap();
    // Key order is not part of the contract, and serde_json's preserve_order
    // (unified in when pod-acp is built alongside) would change it.
    insta::with_settings!({sort_maps => true}, {
        insta::assert_json_snapshot!("openai_request_body", server.bodies()[0]);
    });
}

#[tokio::test]
async fn context_length_error_is_not_retried_and_keeps_its_message() {
    let body = r#"{"error":{"message":"This model's maximum context length is 128000 tokens. However, you requested 130000 tokens. Please reduce the length of the messages.","type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}}"#;
    let server =
        LoopbackServer::start(vec![Reply::status(400, body), Reply::sse([OPENAI_TEXT])]).await;
    let inner = OpenAiProvider::new(endpoint(server.url("/v1"))).unwrap();
    let provider =
        pod_providers::RetryingProvider::new(inner, pod_providers::RetryPolicy::default());
    let err = complete(&provider, ask("hi")).await.unwrap_err();
    assert_eq!(
        err.to_string(),
        "provider returned HTTP 400: invalid_request_error: This model's maximum context length is 128000 tokens. However, you requested 130000 tokens. Please reduce the length of the messages."
    );
    assert_eq!(server.requests().len(), 1);
}

#[tokio::test]
async fn a_server_nobody_listens_at_is_unreachable_by_its_base_url() {
    // A port nothing listens on: bound, then closed.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let base = format!("http://127.0.0.1:{port}/v1");
    let provider = OpenAiProvider::new(endpoint(base.clone())).unwrap();
    let err = events(&provider, ask("hi")).await.unwrap_err();
    assert_eq!(
        err.to_string(),
        format!("cannot reach the model server at {base} (connection refused)")
    );
    assert!(err.is_retryable());
    // Credentials in the URL are not repeated.
    let with_password = format!("http://pod:hunter2@127.0.0.1:{port}/v1");
    let provider = OpenAiProvider::new(endpoint(with_password)).unwrap();
    let err = events(&provider, ask("hi")).await.unwrap_err();
    assert_eq!(
        err.to_string(),
        format!("cannot reach the model server at {base} (connection refused)")
    );
}
