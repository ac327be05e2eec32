//! Running one request against a real provider on the loopback server.

use futures_util::StreamExt;
use pod_llm::{
    AssembledResponse, Item, Provider, ProviderError, ProviderRequest, ResponseAssembler,
    StreamEvent,
};
use pod_providers::{ApiKey, Endpoint, Timeouts};
use std::time::Duration;

/// Runs one request and folds its events; the first error is returned.
pub async fn complete(
    provider: &dyn Provider,
    request: ProviderRequest,
) -> Result<AssembledResponse, ProviderError> {
    let events = events(provider, request).await?;
    let mut assembler = ResponseAssembler::new();
    for event in events {
        assembler.push(event)?;
    }
    Ok(assembler.finish())
}

/// Runs one request and returns its events; the first error is returned.
pub async fn events(
    provider: &dyn Provider,
    request: ProviderRequest,
) -> Result<Vec<StreamEvent>, ProviderError> {
    let mut stream = provider.stream(&request).await?;
    let mut events = Vec::new();
    while let Some(event) = stream.next().await {
        events.push(event?);
    }
    Ok(events)
}

/// An endpoint on the loopback server with a test key and short timeouts.
pub fn endpoint(base_url: String) -> Endpoint {
    let mut endpoint = Endpoint::new(base_url, "test-model");
    endpoint.api_key = Some(ApiKey::new("sk-test-secret"));
    endpoint.timeouts = Timeouts {
        request: Duration::from_secs(5),
        idle: Duration::from_secs(5),
    };
    endpoint
}

/// A request with a user prompt and no tools.
pub fn ask(text: &str) -> ProviderRequest {
    ProviderRequest {
        system_prompt: "You are terse.".into(),
        history: vec![Item::user(text)].into(),
        tools: vec![].into(),
        cache_key: None,
        history_id: None,
    }
}
