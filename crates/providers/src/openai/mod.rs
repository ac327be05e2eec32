//! OpenAI-compatible Chat Completions (OpenAI, DeepSeek, OpenRouter, Ollama,
//! llama.cpp server, vLLM, LM Studio).

pub(crate) mod request;
pub(crate) mod stream;

use crate::drive::drive;
use crate::endpoint::{Endpoint, Headers};
use crate::http::SsePost;
use crate::BuildError;
use pod_llm::{EventStream, Provider, ProviderError, ProviderRequest};
use std::sync::Arc;

/// A provider speaking `POST {base_url}/chat/completions` with `stream: true`.
///
/// It never retries; wrap it in [`crate::RetryingProvider`] for that.
#[derive(Debug, Clone)]
pub struct OpenAiProvider {
    endpoint: Endpoint,
    /// The request URL, parsed once.
    url: url::Url,
    client: crate::transport::Transport,
    /// Its request headers, made once.
    headers: Headers,
    kept: Arc<crate::kept::Kept>,
}

impl OpenAiProvider {
    /// A provider for `endpoint`.
    pub fn new(endpoint: Endpoint) -> Result<Self, BuildError> {
        let client = crate::transport::Transport::for_endpoint(&endpoint)
            .map_err(|err| BuildError::Http(err.to_string()))?;
        Ok(Self {
            url: endpoint.url("chat/completions")?,
            headers: Headers::bearer(endpoint.api_key.as_ref()),
            endpoint,
            client,
            kept: Arc::default(),
        })
    }

    /// The request body this provider would send for `request` (for
    /// inspection and tests).
    pub fn request_body(&self, request: &ProviderRequest) -> serde_json::Value {
        serde_json::from_slice(&self.request_bytes(request)).unwrap_or(serde_json::Value::Null)
    }

    /// The bytes of the request body this provider would send for
    /// `request`. A committed history's messages are encoded once: the
    /// next request of the same history sends the last body's settled
    /// messages again as they are, and an item sent again before it is
    /// settled keeps its encoding (see [`pod_llm::Item::wire`]).
    pub fn request_bytes(&self, request: &ProviderRequest) -> Vec<u8> {
        request::request_bytes(request, &self.endpoint, &self.kept).to_vec()
    }
}

#[async_trait::async_trait]
impl Provider for OpenAiProvider {
    async fn stream(&self, request: &ProviderRequest) -> Result<EventStream, ProviderError> {
        let body = request::request_bytes(request, &self.endpoint, &self.kept);
        let headers = self.headers.get()?;
        let sse = SsePost::to(&self.client, &self.url, &self.endpoint, headers, body)
            .send()
            .await?;
        let nonce = uuid::Uuid::new_v4().simple().to_string();
        Ok(drive(sse, stream::ChunkDecoder::new(&nonce[..8])))
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
    drive(sse, stream::ChunkDecoder::new("fuzz"))
}
