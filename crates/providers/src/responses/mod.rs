//! OpenAI's Responses API (`POST {base_url}/responses`), with the
//! conversation kept on the server.
//!
//! With `store` on (the API's default), each response is stored by the
//! server and the next request of the same conversation names it as
//! `previous_response_id` and sends only the items after its answer: a
//! request's size and cost stop growing with the session. Which
//! conversation a request belongs to is its cache key (a Pod's session id);
//! whether it may follow the stored response is checked (see [`chain`]),
//! and a request that cannot is sent whole. When a request that followed a
//! stored response is refused (the server no longer has it: expired,
//! deleted, another organisation), it is sent again whole before any event
//! reaches the caller; an error inside its stream drops the chain, and
//! before any event is made retryable, so the retry layer's next attempt is
//! whole.
//!
//! With `store` off, every request carries the whole history (each item's
//! encoding kept with it, as on the Chat Completions wire).

mod chain;
mod request;
mod stream;

use crate::drive::drive;
use crate::endpoint::{Endpoint, Headers};
use crate::http::SsePost;
use crate::kept::Kept;
use crate::openai::request::in_api_order;
use crate::BuildError;
use chain::{Conversations, Sent};
use pod_llm::{EventStream, Item, Provider, ProviderError, ProviderRequest};
use std::sync::Arc;
use stream::{Recorder, ResponseDecoder};

/// A provider speaking `POST {base_url}/responses` with `stream: true`.
///
/// It never retries a failed request; wrap it in
/// [`crate::RetryingProvider`] for that. (Sending a request whole again
/// because the server lost the response it followed is not a retry: the
/// first attempt produced nothing.)
#[derive(Debug, Clone)]
pub struct OpenAiResponsesProvider {
    endpoint: Endpoint,
    /// The request URL, parsed once.
    url: url::Url,
    client: crate::transport::Transport,
    /// Its request headers, made once.
    headers: Headers,
    kept: Arc<Kept>,
    store: bool,
    conversations: Arc<Conversations>,
}

/// One request ready to send.
struct Prepared {
    body: Vec<u8>,
    /// The stored response it follows, if any.
    followed: Option<String>,
    recorder: Option<Recorder>,
}

impl OpenAiResponsesProvider {
    /// A provider for `endpoint`; `store` keeps conversations on the
    /// server (see the module docs).
    pub fn new(endpoint: Endpoint, store: bool) -> Result<Self, BuildError> {
        let client = crate::transport::Transport::for_endpoint(&endpoint)
            .map_err(|err| BuildError::Http(err.to_string()))?;
        Ok(Self {
            url: endpoint.url("responses")?,
            headers: Headers::bearer(endpoint.api_key.as_ref()),
            endpoint,
            client,
            kept: Arc::default(),
            store,
            conversations: Arc::default(),
        })
    }

    /// The request body this provider would send for `request` now (for
    /// inspection and tests): after a stored response of the same
    /// conversation, only what follows it.
    pub fn request_body(&self, request: &ProviderRequest) -> serde_json::Value {
        let prepared = self.prepare(request, true);
        serde_json::from_slice(&prepared.body).unwrap_or(serde_json::Value::Null)
    }

    fn prepare(&self, request: &ProviderRequest, may_continue: bool) -> Prepared {
        let key = request.cache_key.as_ref().filter(|_| self.store);
        let continuation = key.filter(|_| may_continue).and_then(|key| {
            self.conversations
                .continuation(key, request.history_id, &request.history)
        });
        // In API order. After a stored response, ordered from its answer
        // on (its calls decide what waits for their results), which is then
        // left out: the server has it.
        let items: Vec<&Item> = match &continuation {
            Some(c) => in_api_order(&request.history[c.first_new - 1..])
                .into_iter()
                .skip(1)
                .collect(),
            None => in_api_order(&request.history),
        };
        let body = request::request_bytes(
            request,
            request::Input {
                items: &items,
                previous_response_id: continuation.as_ref().map(|c| c.response_id.as_str()),
                // Without a stored conversation every request is sent
                // whole, so each item's encoding is worth keeping.
                keep_encodings: key.is_none(),
            },
            &request::Envelope {
                endpoint: &self.endpoint,
                kept: &self.kept,
                // A request no later one can follow (no conversation key,
                // or not a committed history) is not stored.
                store: key.is_some() && request.history_id.is_some(),
            },
        );
        let recorder =
            key.zip(Sent::of(request.history_id, &request.history))
                .map(|(key, sent)| Recorder {
                    conversations: self.conversations.clone(),
                    key: key.clone(),
                    sent,
                    followed: continuation.as_ref().map(|c| c.response_id.clone()),
                });
        Prepared {
            body,
            followed: continuation.map(|c| c.response_id),
            recorder,
        }
    }

    async fn send(&self, body: Vec<u8>) -> Result<crate::http::SseStream, ProviderError> {
        let headers = self.headers.get()?;
        SsePost::to(&self.client, &self.url, &self.endpoint, headers, body)
            .send()
            .await
    }
}

/// Whether `err`, answering a request that followed a stored response, may
/// be that response's fault: the server lost it (OpenAI: 400/404
/// `previous_response_not_found`) or refuses what it holds together with
/// the new items. The request is then sent again whole, once; an error that
/// is the request's own comes back the same way.
fn may_be_the_chains(err: &ProviderError) -> bool {
    matches!(
        err,
        ProviderError::Http {
            status: 400 | 404 | 422,
            ..
        }
    )
}

#[async_trait::async_trait]
impl Provider for OpenAiResponsesProvider {
    async fn stream(&self, request: &ProviderRequest) -> Result<EventStream, ProviderError> {
        let mut prepared = self.prepare(request, true);
        let sse = match self.send(std::mem::take(&mut prepared.body)).await {
            Err(err) if prepared.followed.is_some() && may_be_the_chains(&err) => {
                tracing::info!(error = %err, "following the stored response failed; sending the whole history");
                if let (Some(key), Some(followed)) = (&request.cache_key, &prepared.followed) {
                    self.conversations.forget_if(key, followed);
                }
                prepared = self.prepare(request, false);
                self.send(std::mem::take(&mut prepared.body)).await?
            }
            result => result?,
        };
        let nonce = uuid::Uuid::new_v4().simple().to_string();
        Ok(drive(
            sse,
            ResponseDecoder::new(&nonce[..8], prepared.recorder),
        ))
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
    drive(sse, ResponseDecoder::new("fuzz", None))
}
