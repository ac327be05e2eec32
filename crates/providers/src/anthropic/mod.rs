//! Anthropic Messages (`POST {base_url}/v1/messages`).

mod request;
mod stream;

use crate::drive::drive;
use crate::endpoint::{Endpoint, Headers};
use crate::http::SsePost;
use crate::BuildError;
use http::header::{HeaderMap, HeaderValue};
use pod_llm::{EventStream, Provider, ProviderError, ProviderRequest};
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
    url: url::Url,
    client: crate::transport::Transport,
    /// Its request headers, made once.
    headers: Headers,
    kept: Arc<crate::kept::Kept>,
}

impl AnthropicProvider {
    /// A provider for `endpoint`.
    pub fn new(endpoint: Endpoint) -> Result<Self, BuildError> {
        let client = crate::transport::Transport::for_endpoint(&endpoint)
            .map_err(|err| BuildError::Http(err.to_string()))?;
        Ok(Self {
            url: endpoint.url("v1/messages")?,
            headers: Headers::with_key(
                HeaderMap::from_iter([(
                    http::header::HeaderName::from_static("anthropic-version"),
                    HeaderValue::from_static(API_VERSION),
                )]),
                http::header::HeaderName::from_static("x-api-key"),
                "",
                endpoint.api_key.as_ref(),
            ),
            endpoint,
            client,
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
        let headers = self.headers.get()?;
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
