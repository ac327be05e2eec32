//! The retry policy over loopback, and its timing under paused time.

use crate::anthropic::TEXT_STREAM;
use crate::support::{ask, complete, endpoint, events};
use futures_util::stream;
use parking_lot::Mutex;
use pod_llm::{EventStream, FinishReason, Provider, ProviderError, ProviderRequest, StreamEvent};
use pod_providers::{AnthropicProvider, OpenAiProvider, RetryPolicy, RetryingProvider};
use pod_testkit::server::{LoopbackServer, Part, Reply};
use std::time::Duration;

/// Tiny delays so loopback tests take milliseconds.
fn fast_policy(max_attempts: u32) -> RetryPolicy {
    RetryPolicy {
        max_attempts,
        base_delay: Duration::from_millis(1),
        max_delay: Duration::from_millis(5),
        max_retry_after: Duration::from_secs(1),
    }
}

const OPENAI_OK: &str = concat!(
    "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"ok\"},\"finish_reason\":null}]}\n\n",
    "data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n",
    "data: [DONE]\n\n",
);

async fn openai(
    replies: Vec<Reply>,
    attempts: u32,
) -> (LoopbackServer, RetryingProvider<OpenAiProvider>) {
    let server = LoopbackServer::start(replies).await;
    let inner = OpenAiProvider::new(endpoint(server.url("/v1"))).unwrap();
    (server, RetryingProvider::new(inner, fast_policy(attempts)))
}

async fn anthropic(
    replies: Vec<Reply>,
    attempts: u32,
) -> (LoopbackServer, RetryingProvider<AnthropicProvider>) {
    let server = LoopbackServer::start(replies).await;
    let inner = AnthropicProvider::new(endpoint(server.url(""))).unwrap();
    (server, RetryingProvider::new(inner, fast_policy(attempts)))
}

#[tokio::test]
async fn rate_limited_with_retry_after_then_success() {
    let limited = Reply::status(
        429,
        r#"{"error":{"message":"Rate limit reached","type":"requests"}}"#,
    )
    .header("retry-after-ms", "30");
    let (server, provider) = openai(vec![limited, Reply::sse([OPENAI_OK])], 3).await;
    let started = std::time::Instant::now();
    let response = complete(&provider, ask("hi")).await.unwrap();
    assert_eq!(response.text, "ok");
    assert!(started.elapsed() >= Duration::from_millis(30));
    let bodies = server.bodies();
    assert_eq!(bodies.len(), 2);
    assert_eq!(bodies[0], bodies[1], "the retry re-sends the same request");
}

#[tokio::test]
async fn overloaded_status_then_success() {
    let overloaded = Reply::status(
        529,
        r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#,
    );
    let (server, provider) = anthropic(vec![overloaded, Reply::sse([TEXT_STREAM])], 3).await;
    let response = complete(&provider, ask("hi")).await.unwrap();
    assert_eq!(response.text, "Hello!");
    assert_eq!(server.requests().len(), 2);
}

#[tokio::test]
async fn overloaded_error_event_before_content_then_success() {
    let stream = concat!(
        "event: message_start\n",
        "data: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"usage\":{\"input_tokens\":5,\"output_tokens\":1}}}\n\n",
        "event: error\n",
        "data: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}\n\n",
    );
    let (server, provider) =
        anthropic(vec![Reply::sse([stream]), Reply::sse([TEXT_STREAM])], 3).await;
    let events = events(&provider, ask("hi")).await.unwrap();
    assert_eq!(
        events.first(),
        Some(&StreamEvent::TextDelta {
            text: "Hello".into()
        })
    );
    assert_eq!(server.requests().len(), 2);
}

#[tokio::test]
async fn connection_dropped_before_any_event_then_success() {
    let dropped = Reply::sse([": keep-alive\n\n"]).then(Part::Drop);
    let (server, provider) = openai(vec![dropped, Reply::sse([OPENAI_OK])], 3).await;
    let response = complete(&provider, ask("hi")).await.unwrap();
    assert_eq!(response.text, "ok");
    assert_eq!(server.requests().len(), 2);
}

/// Once events reached the caller, a drop is not retried behind its back:
/// the stream fails with a retryable error, and the caller's re-run of the
/// request succeeds from scratch.
#[tokio::test]
async fn connection_dropped_mid_stream_surfaces_then_a_rerun_succeeds() {
    let half = "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"partial\"}}]}\n\n";
    let (server, provider) = openai(
        vec![Reply::sse([half]).then(Part::Drop), Reply::sse([OPENAI_OK])],
        3,
    )
    .await;
    let err = events(&provider, ask("hi")).await.unwrap_err();
    assert!(err.is_retryable(), "{err:?}");
    assert_eq!(server.requests().len(), 1);
    let rerun = complete(&provider, ask("hi")).await.unwrap();
    assert_eq!(rerun.text, "ok");
}

#[tokio::test]
async fn unauthorized_is_not_retried() {
    let denied = Reply::status(401, r#"{"error":{"message":"bad key","type":"auth"}}"#);
    let (server, provider) = openai(vec![denied, Reply::sse([OPENAI_OK])], 5).await;
    let err = complete(&provider, ask("hi")).await.unwrap_err();
    assert!(matches!(err, ProviderError::Http { status: 401, .. }));
    assert_eq!(server.requests().len(), 1);
}

#[tokio::test]
async fn attempts_are_bounded() {
    let unavailable = || Reply::status(503, r#"{"error":{"message":"down"}}"#);
    let (server, provider) = openai(
        vec![
            unavailable(),
            unavailable(),
            unavailable(),
            Reply::sse([OPENAI_OK]),
        ],
        3,
    )
    .await;
    let err = complete(&provider, ask("hi")).await.unwrap_err();
    assert!(matches!(err, ProviderError::Http { status: 503, .. }));
    assert_eq!(server.requests().len(), 3);
}

/// A provider failing with the given errors before it answers "done".
struct Flaky {
    failures: Mutex<Vec<ProviderError>>,
}

#[async_trait::async_trait]
impl Provider for Flaky {
    async fn stream(&self, _request: &ProviderRequest) -> Result<EventStream, ProviderError> {
        let next = {
            let mut failures = self.failures.lock();
            (!failures.is_empty()).then(|| failures.remove(0))
        };
        match next {
            Some(err) => Err(err),
            None => Ok(Box::pin(stream::iter([Ok(StreamEvent::Finish {
                reason: FinishReason::Stop,
            })]))),
        }
    }

    fn model_name(&self) -> String {
        "flaky".into()
    }
}

#[tokio::test(start_paused = true)]
async fn waits_follow_retry_after_and_backoff() {
    let limited = ProviderError::Http {
        status: 429,
        message: "slow down".into(),
        retry_after: Some(Duration::from_secs(20)),
    };
    let flaky = Flaky {
        failures: Mutex::new(vec![limited, ProviderError::Transport("reset".into())]),
    };
    let policy = RetryPolicy {
        base_delay: Duration::from_secs(2),
        ..RetryPolicy::default()
    };
    let provider = RetryingProvider::new(flaky, policy);
    let started = tokio::time::Instant::now();
    let events = events(&provider, ask("hi")).await.unwrap();
    assert_eq!(events.len(), 1);
    // 20 s asked for by the server, then the second backoff step: 4 s with
    // equal jitter, so between 2 and 4 s.
    let waited = started.elapsed();
    assert!(
        waited >= Duration::from_secs(22) && waited < Duration::from_secs(24),
        "{waited:?}"
    );
    assert_eq!(provider.model_name(), "flaky");
}
