//! Anthropic Messages (`POST {base_url}/v1/messages`).

mod request;
mod stream;

use crate::drive::drive;
use crate::endpoint::{http_client, Endpoint};
use crate::http::SsePost;
use crate::BuildError;
use pod_llm::{EventStream, Provider, ProviderError, ProviderRequest};
use reqwest::header::{HeaderMap, HeaderValue};
use std::sync::Arc;

/// The API version this mapping is written against.
const API_VERSION: &str = "2023-06-01";

/// A provider speaking the Messages API with `stream: true`.
///
/// It never retries; wrap it in [`crate::RetryingProvider`] for that.
#[derive(Debug, Clone)]
pub struct AnthropicProvider {
    endpoint: Endpoint,
    /// The request URL, parsed once.
    url: reqwest::Url,
    client: reqwest::Client,
    kept: Arc<crate::kept::Kept>,
}

impl AnthropicProvider {
    /// A provider for `endpoint`.
    pub fn new(endpoint: Endpoint) -> Result<Self, BuildError> {
        Ok(Self {
            url: endpoint.url("v1/messages")?,
            endpoint,
            client: http_client().map_err(|e| BuildError::Http(e.to_string()))?,
            kept: Arc::default(),
        })
    }

    /// The request body this provider would send for `request`.
    pub fn request_body(&self, request: &ProviderRequest) -> serde_json::Value {
        serde_json::from_slice(&self.request_bytes(request)).unwrap_or(serde_json::Value::Null)
    }

    /// The bytes of the request body this provider would send for
    /// `request`. Each history item's blocks are encoded once and kept with
    /// the item (see [`pod_llm::Item::wire`]).
    pub fn request_bytes(&self, request: &ProviderRequest) -> Vec<u8> {
        request::request_bytes(request, &self.endpoint, &self.kept)
    }
}

#[async_trait::async_trait]
impl Provider for AnthropicProvider {
    async fn stream(&self, request: &ProviderRequest) -> Result<EventStream, ProviderError> {
        let body = self.request_bytes(request);
        let mut headers = HeaderMap::new();
        headers.insert("anthropic-version", HeaderValue::from_static(API_VERSION));
        if let Some(key) = &self.endpoint.api_key {
            let mut value = HeaderValue::from_str(key.expose())
                .map_err(|_| ProviderError::Transport("API key is not a valid header".into()))?;
            value.set_sensitive(true);
            headers.insert("x-api-key", value);
        }
        let sse = SsePost::to(&self.client, &self.url, &self.endpoint, headers, body)
            .send()
            .await?;
        Ok(drive(sse, stream::MessageDecoder::default()))
    }

    fn context_window(&self) -> Option<u64> {
        self.endpoint.context_window
    }

    fn model_name(&self) -> String {
        self.endpoint.model.clone()
    }
}

// Fuzzing entry point (see `crate::stream_parser_for_fuzzing`).
pub(crate) fn decode_for_fuzzing(sse: crate::http::SseStream) -> EventStream {
    drive(sse, stream::MessageDecoder::default())
}
