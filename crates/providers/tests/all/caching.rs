//! Prompt caching on both wires: where Anthropic requests carry breakpoints
//! (never more than the API's four), the TTL and turning it off; OpenAI's
//! `prompt_cache_key`; the cached-token counts each wire reports.

use crate::support::{complete, endpoint, rich_history};
use pod_llm::{Item, ProviderRequest, ToolSpec, Usage};
use pod_providers::{AnthropicProvider, CacheTtl, OpenAiProvider, Prices, PromptCache};
use pod_testkit::server::{LoopbackServer, Reply};
use serde_json::{json, Value};

fn tools(n: usize) -> Vec<ToolSpec> {
    (0..n)
        .map(|i| ToolSpec {
            name: format!("tool_{i}"),
            description: "A tool.".into(),
            parameters: json!({"type": "object"}).into(),
        })
        .collect()
}

fn request(history: Vec<Item>) -> ProviderRequest {
    ProviderRequest {
        system_prompt: "You are pod.".into(),
        history: history.into(),
        tools: tools(3).into(),
        cache_key: Some("session-1".into()),
        history_id: None,
    }
}

/// Every `cache_control` in a body, as (where, value).
fn markers(body: &Value) -> Vec<(String, Value)> {
    fn walk(value: &Value, path: String, out: &mut Vec<(String, Value)>) {
        match value {
            Value::Object(map) => {
                for (key, inner) in map {
                    if key == "cache_control" {
                        out.push((path.clone(), inner.clone()));
                    } else {
                        walk(inner, format!("{path}/{key}"), out);
                    }
                }
            }
            Value::Array(items) => {
                for (i, inner) in items.iter().enumerate() {
                    walk(inner, format!("{path}/{i}"), out);
                }
            }
            _ => {}
        }
    }
    let mut out = Vec::new();
    walk(body, String::new(), &mut out);
    out
}

fn anthropic(cache: PromptCache) -> AnthropicProvider {
    let mut endpoint = endpoint("http://127.0.0.1:9".into());
    endpoint.cache = cache;
    AnthropicProvider::new(endpoint).unwrap()
}

#[test]
fn anthropic_marks_tools_system_and_two_rolling_points_and_never_more_than_four() {
    let provider = anthropic(PromptCache::default());
    let mut history = rich_history();
    for length in 1..history.len() {
        let body = provider.request_body(&request(history[..length].to_vec()));
        let found = markers(&body);
        assert!(found.len() <= 4, "{length} items: {found:?}");
        assert!(found.iter().any(|(at, _)| at == "/tools/2"), "{found:?}");
        assert!(found.iter().any(|(at, _)| at == "/system/0"), "{found:?}");
        // The last block of the last message is always marked.
        let messages = body["messages"].as_array().unwrap();
        let last = messages.len() - 1;
        let blocks = messages[last]["content"].as_array().unwrap().len();
        let end = format!("/messages/{last}/content/{}", blocks - 1);
        assert!(found.iter().any(|(at, _)| *at == end), "{end} in {found:?}");
    }
    // With the whole history, the previous user message is marked too.
    history.push(Item::user("More"));
    let body = provider.request_body(&request(history));
    assert_eq!(markers(&body).len(), 4);
    for (_, marker) in markers(&body) {
        assert_eq!(marker, json!({"type": "ephemeral"}));
    }
}

#[test]
fn anthropic_one_hour_ttl_and_caching_off() {
    let hour = anthropic(PromptCache {
        ttl: CacheTtl::OneHour,
        ..PromptCache::default()
    });
    let body = hour.request_body(&request(rich_history()));
    for (_, marker) in markers(&body) {
        assert_eq!(marker, json!({"type": "ephemeral", "ttl": "1h"}));
    }
    let off = anthropic(PromptCache {
        enabled: false,
        ..PromptCache::default()
    });
    let body = off.request_body(&request(rich_history()));
    assert!(markers(&body).is_empty());
    assert_eq!(body["system"], "You are pod.");
}

#[test]
fn the_prefix_of_consecutive_requests_is_byte_identical_but_for_markers() {
    // What a cache keys on: the bytes before the new items. Strip the
    // markers (they move) and the earlier request is a prefix of the later.
    let provider = anthropic(PromptCache::default());
    let history = rich_history();
    let strip = |mut body: Value| {
        fn clean(value: &mut Value) {
            match value {
                Value::Object(map) => {
                    map.remove("cache_control");
                    map.values_mut().for_each(clean);
                }
                Value::Array(items) => items.iter_mut().for_each(clean),
                _ => {}
            }
        }
        clean(&mut body);
        body
    };
    let first = strip(provider.request_body(&request(history[..3].to_vec())));
    let second = strip(provider.request_body(&request(history.clone())));
    assert_eq!(first["tools"], second["tools"]);
    assert_eq!(first["system"], second["system"]);
    let (a, b) = (
        first["messages"].as_array().unwrap(),
        second["messages"].as_array().unwrap(),
    );
    assert_eq!(a[..a.len() - 1], b[..a.len() - 1]);
}

#[test]
fn openai_sends_the_session_as_prompt_cache_key_only_where_asked() {
    let mut endpoint = endpoint("http://127.0.0.1:9/v1".into());
    let plain = OpenAiProvider::new(endpoint.clone()).unwrap();
    let body = plain.request_body(&request(vec![Item::user("hi")]));
    assert_eq!(body.get("prompt_cache_key"), None);
    endpoint.cache.send_key = true;
    let keyed = OpenAiProvider::new(endpoint).unwrap();
    let body = keyed.request_body(&request(vec![Item::user("hi")]));
    assert_eq!(body["prompt_cache_key"], "session-1");
    let body = keyed.request_body(&ProviderRequest {
        cache_key: None,
        ..request(vec![Item::user("hi")])
    });
    assert_eq!(body.get("prompt_cache_key"), None);
}

/// OpenAI's usage chunk with cached and reasoning tokens, as its API sends it.
const OPENAI_CACHED_USAGE: &str = concat!(
    "data: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"gpt-4.1\",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"ok\"},\"finish_reason\":null}],\"usage\":null}\n\n",
    "data: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"gpt-4.1\",\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}],\"usage\":null}\n\n",
    "data: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"gpt-4.1\",\"choices\":[],\"usage\":{\"prompt_tokens\":2006,\"completion_tokens\":300,\"total_tokens\":2306,\"prompt_tokens_details\":{\"cached_tokens\":1920,\"audio_tokens\":0},\"completion_tokens_details\":{\"reasoning_tokens\":0,\"audio_tokens\":0}}}\n\n",
    "data: [DONE]\n\n",
);

/// DeepSeek's own fields for its disk cache.
const DEEPSEEK_CACHED_USAGE: &str = concat!(
    "data: {\"id\":\"d\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"deepseek-chat\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"ok\"},\"finish_reason\":\"stop\"}],\"usage\":{\"prompt_tokens\":1000,\"completion_tokens\":5,\"total_tokens\":1005,\"prompt_cache_hit_tokens\":896,\"prompt_cache_miss_tokens\":104}}\n\n",
    "data: [DONE]\n\n",
);

#[tokio::test]
async fn cached_tokens_of_each_wire_are_parsed_into_the_usage() {
    for (stream, expected) in [
        (
            OPENAI_CACHED_USAGE,
            Usage {
                prompt_tokens: 2006,
                completion_tokens: 300,
                cache_read_tokens: 1920,
                ..Default::default()
            },
        ),
        (
            DEEPSEEK_CACHED_USAGE,
            Usage {
                prompt_tokens: 1000,
                completion_tokens: 5,
                cache_read_tokens: 896,
                ..Default::default()
            },
        ),
    ] {
        let server = LoopbackServer::start(vec![Reply::sse([stream])]).await;
        let provider = OpenAiProvider::new(endpoint(server.url("/v1"))).unwrap();
        let response = complete(&provider, crate::support::ask("hi"))
            .await
            .unwrap();
        assert_eq!(response.usage, Some(expected));
        assert_eq!(
            expected.fresh_input(),
            expected.prompt_tokens - expected.cache_read_tokens
        );
    }
}

/// A whole Anthropic response with a cache write and a read.
const ANTHROPIC_CACHE_WRITE: &str = concat!(
    "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"m\",\"type\":\"message\",\"role\":\"assistant\",\"content\":[],\"model\":\"claude\",\"usage\":{\"input_tokens\":12,\"cache_creation_input_tokens\":1500,\"cache_read_input_tokens\":20000,\"output_tokens\":1}}}\n\n",
    "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n",
    "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"ok\"}}\n\n",
    "event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n",
    "event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"},\"usage\":{\"output_tokens\":40}}\n\n",
    "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n",
);

#[tokio::test]
async fn anthropic_cache_writes_and_reads_are_kept_apart_and_priced() {
    let server = LoopbackServer::start(vec![Reply::sse([ANTHROPIC_CACHE_WRITE])]).await;
    let provider = AnthropicProvider::new(endpoint(server.url(""))).unwrap();
    let usage = complete(&provider, crate::support::ask("hi"))
        .await
        .unwrap()
        .usage
        .unwrap();
    assert_eq!(
        usage,
        Usage {
            prompt_tokens: 21_512,
            completion_tokens: 40,
            cache_read_tokens: 20_000,
            cache_write_tokens: 1_500,
            reasoning_tokens: 0,
        }
    );
    assert_eq!(usage.fresh_input(), 12);
    // $3 / $3.75 / $0.30 / $15 per million tokens.
    let prices = Prices {
        input: 3.0,
        cache_write: 3.75,
        cache_read: 0.30,
        output: 15.0,
    };
    let expected = (12.0 * 3.0 + 1_500.0 * 3.75 + 20_000.0 * 0.30 + 40.0 * 15.0) / 1e6;
    assert!((prices.cost(&usage) - expected).abs() < 1e-12);
}
