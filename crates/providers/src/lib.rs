//! Real model providers for pod: OpenAI-compatible Chat Completions,
//! OpenAI's Responses API (the conversation kept on the server) and
//! Anthropic Messages, streamed over SSE.
//!
//! Each provider turns one [`ProviderRequest`](pod_llm::ProviderRequest)
//! into one HTTP request and the streamed answer into
//! [`StreamEvent`](pod_llm::StreamEvent)s. [`RetryingProvider`] adds the
//! retry policy, [`config`] resolves flags, profiles and environment into a
//! [`ProviderConfig`] and [`build_provider`] makes the provider.
//!
//! This crate must not know about sessions, the turn loop, tools' behaviour
//! or front ends: it maps history to a wire format and back, nothing more.
//! It never retries a request once events have reached the caller.
//!
//! ```
//! use pod_providers::{Endpoint, OpenAiProvider};
//! use pod_llm::{Item, Provider, ProviderRequest};
//!
//! let provider = OpenAiProvider::new(Endpoint::new("http://127.0.0.1:11434/v1", "qwen3")).unwrap();
//! let body = provider.request_body(&ProviderRequest {
//!     system_prompt: "Be brief.".into(),
//!     history: vec![Item::user("hi")].into(),
//!     tools: vec![].into(),
//!     cache_key: None,
//!     history_id: None,
//! });
//! assert_eq!(body["messages"][1]["content"], "hi");
//! assert_eq!(provider.model_name(), "qwen3");
//! ```
#![deny(missing_docs)]

mod anthropic;
mod body;
pub mod config;
mod drive;
mod endpoint;
mod gate;
mod http;
mod kept;
pub mod metered;
mod openai;
mod responses;
mod retry;
mod secret;
pub mod sse;
mod transport;

pub use anthropic::AnthropicProvider;
pub use config::{
    CacheTtl, ConfigError, ConfigFile, ProviderConfig, ProviderKind, RawProviderConfig,
    ReasoningEffort, CONFIG_ENV,
};
pub use endpoint::{Endpoint, Http2, PromptCache};
pub use gate::{Gate, Pass};
pub use http::Timeouts;
pub use metered::Metered;
pub use openai::OpenAiProvider;
pub use pod_llm::Prices;
pub use responses::OpenAiResponsesProvider;
pub use retry::{RetryPolicy, RetryingProvider};
pub use secret::ApiKey;
pub use transport::{http2_in_use, Http2InUse};

use pod_llm::{Provider, Script, ScriptError, ScriptedProvider};
use std::sync::Arc;

// Fuzzing entry point (fuzz/, pod-fuzz): a provider's SSE + stream parser on raw body chunks, no network; needs a tokio runtime.
#[doc(hidden)]
pub fn stream_parser_for_fuzzing(wire: FuzzWire, chunks: Vec<Vec<u8>>) -> pod_llm::EventStream {
    use futures_util::StreamExt;
    let body = futures_util::stream::iter(
        chunks
            .into_iter()
            .map(|chunk| Ok::<_, std::io::Error>(bytes::Bytes::from(chunk))),
    );
    let sse = http::sse_events(body, std::time::Duration::from_secs(3600)).boxed();
    match wire {
        FuzzWire::OpenAi => openai::decode_for_fuzzing(sse),
        FuzzWire::Anthropic => anthropic::decode_for_fuzzing(sse),
        FuzzWire::Responses => responses::decode_for_fuzzing(sse),
    }
}

// The wire whose stream parser `stream_parser_for_fuzzing` runs.
#[doc(hidden)]
#[derive(Clone, Copy, Debug)]
pub enum FuzzWire {
    OpenAi,
    Anthropic,
    Responses,
}

/// Why a provider could not be built.
#[derive(Debug, thiserror::Error)]
pub enum BuildError {
    /// The HTTP client could not be set up (its TLS configuration).
    #[error("cannot set up the HTTP client: {0}")]
    Http(String),
    /// The endpoint's URL is not a valid URL.
    #[error("invalid endpoint URL {url}: {reason}")]
    Url {
        /// The URL.
        url: String,
        /// Why it is invalid.
        reason: String,
    },
    /// The scripted provider's script could not be loaded.
    #[error(transparent)]
    Script(#[from] ScriptError),
}

/// The provider `config` describes; HTTP providers come wrapped in their
/// [`RetryingProvider`], and every one is [`Metered`].
pub fn build_provider(config: &ProviderConfig) -> Result<Arc<dyn Provider>, BuildError> {
    Ok(Arc::new(Metered::new(unmetered(config)?)))
}

fn unmetered(config: &ProviderConfig) -> Result<Arc<dyn Provider>, BuildError> {
    let gate = |endpoint: &Endpoint| {
        Gate::shared(&endpoint.base_url, &endpoint.model, endpoint.max_concurrent)
    };
    Ok(match config {
        ProviderConfig::OpenAi { endpoint, retry } => Arc::new(
            RetryingProvider::new(OpenAiProvider::new(endpoint.clone())?, retry.clone())
                .with_gate(gate(endpoint)),
        ),
        ProviderConfig::OpenAiResponses {
            endpoint,
            retry,
            store,
        } => Arc::new(
            RetryingProvider::new(
                OpenAiResponsesProvider::new(endpoint.clone(), *store)?,
                retry.clone(),
            )
            .with_gate(gate(endpoint)),
        ),
        ProviderConfig::Anthropic { endpoint, retry } => Arc::new(
            RetryingProvider::new(AnthropicProvider::new(endpoint.clone())?, retry.clone())
                .with_gate(gate(endpoint)),
        ),
        ProviderConfig::Scripted { script } => {
            // Nobody reads its requests back: keeping them would keep
            // every version of the history.
            Arc::new(ScriptedProvider::new(Script::load(script)?).without_recording())
        }
    })
}
