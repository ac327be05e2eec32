//! What an HTTP provider needs to know about its endpoint and model.

use crate::secret::ApiKey;
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// Settings of one HTTP model endpoint, already resolved (see
/// [`crate::config`] for where they come from).
#[derive(Clone, Debug, PartialEq)]
pub struct Endpoint {
    /// Base URL: `https://api.openai.com/v1` for Chat Completions (the
    /// provider appends `/chat/completions`), `https://api.anthropic.com`
    /// for Messages (the provider appends `/v1/messages`).
    pub base_url: String,
    /// The model id sent with every request.
    pub model: String,
    /// The API key, if the endpoint needs one (local servers do not).
    pub api_key: Option<ApiKey>,
    /// Upper bound on generated tokens per request.
    pub max_output_tokens: Option<u32>,
    /// Sampling temperature; the server's default when absent.
    pub temperature: Option<f64>,
    /// The model's context window in tokens, when known.
    pub context_window: Option<u64>,
    /// Extended-thinking budget in tokens (Anthropic only).
    pub thinking_budget: Option<u32>,
    /// Reasoning effort (OpenAI's wires only); the server's default when
    /// absent.
    pub reasoning_effort: Option<ReasoningEffort>,
    /// Request and idle timeouts.
    pub timeouts: Timeouts,
    /// Prompt caching.
    pub cache: PromptCache,
    /// The most requests this process has in flight to this endpoint and
    /// model, all sessions together (`max_concurrent_requests`); none when
    /// unset.
    pub max_concurrent: Option<u32>,
    /// Whether requests may go over HTTP/2 (`http2`).
    pub http2: Http2,
    /// A PEM file of certificate authorities trusted besides the web PKI's
    /// roots (`ca_file`): a private gateway's own CA.
    pub ca_file: Option<std::path::PathBuf>,
}

/// Whether requests to an endpoint may go over HTTP/2 (the profile key
/// `http2`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Http2 {
    /// HTTP/2 where the server offers it: `https://` offers `h2` and
    /// `http/1.1` in TLS's ALPN and speaks what the server picks; plain
    /// `http://` speaks HTTP/1.1.
    #[default]
    Auto,
    /// As `auto`, and plain `http://` speaks HTTP/2 from the first byte
    /// (a gateway known to speak it, "prior knowledge"). Not through a
    /// forwarding proxy, which speaks HTTP/1.1.
    PriorKnowledge,
    /// HTTP/1.1 only.
    Never,
}

/// Prompt caching settings of an endpoint.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PromptCache {
    /// Mark cache breakpoints (Anthropic).
    pub enabled: bool,
    /// How long a marked prefix is kept (Anthropic).
    pub ttl: CacheTtl,
    /// Send the request's cache key as `prompt_cache_key` (OpenAI wire).
    pub send_key: bool,
}

impl Default for PromptCache {
    /// Breakpoints on, 5 minutes, no key.
    fn default() -> Self {
        Self {
            enabled: true,
            ttl: CacheTtl::FiveMinutes,
            send_key: false,
        }
    }
}

impl Endpoint {
    /// An endpoint with no key, no limits and default timeouts.
    pub fn new(base_url: impl Into<String>, model: impl Into<String>) -> Self {
        Self {
            base_url: base_url.into(),
            model: model.into(),
            api_key: None,
            max_output_tokens: None,
            temperature: None,
            context_window: None,
            thinking_budget: None,
            reasoning_effort: None,
            timeouts: Timeouts::default(),
            cache: PromptCache::default(),
            max_concurrent: None,
            http2: Http2::Auto,
            ca_file: None,
        }
    }

    /// `base_url` joined with `path` by exactly one slash, parsed once
    /// when a provider is built (not for every request).
    pub(crate) fn url(&self, path: &str) -> Result<url::Url, crate::BuildError> {
        let url = format!(
            "{}/{}",
            self.base_url.trim_end_matches('/'),
            path.trim_start_matches('/')
        );
        url::Url::parse(&url).map_err(|err| crate::BuildError::Url {
            url,
            reason: err.to_string(),
        })
    }
}

/// A provider's fixed request headers, made once when it is built (not a
/// map and a formatted key per request). A key that cannot be a header
/// value fails each request, as it always did.
#[derive(Debug, Clone)]
pub(crate) struct Headers(Option<http::header::HeaderMap>);

impl Headers {
    /// `fixed`, plus `key` after `prefix` under `name`, marked sensitive so
    /// it never shows in debug output.
    pub fn with_key(
        mut fixed: http::header::HeaderMap,
        name: http::header::HeaderName,
        prefix: &str,
        key: Option<&crate::secret::ApiKey>,
    ) -> Self {
        if let Some(key) = key {
            match http::header::HeaderValue::from_str(&format!("{prefix}{}", key.expose())) {
                Ok(mut value) => {
                    value.set_sensitive(true);
                    fixed.insert(name, value);
                }
                Err(_) => return Self(None),
            }
        }
        Self(Some(fixed))
    }

    /// `key` as a bearer token (OpenAI's wires).
    pub fn bearer(key: Option<&crate::secret::ApiKey>) -> Self {
        Self::with_key(
            http::header::HeaderMap::new(),
            http::header::AUTHORIZATION,
            "Bearer ",
            key,
        )
    }

    /// The headers, or why a request cannot be sent with them.
    pub fn get(&self) -> Result<&http::header::HeaderMap, pod_llm::ProviderError> {
        self.0.as_ref().ok_or_else(|| {
            pod_llm::ProviderError::Transport("API key is not a valid header".into())
        })
    }
}

/// How hard a reasoning model thinks before it answers (OpenAI's
/// `reasoning_effort`): less is faster and cheaper.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ReasoningEffort {
    /// As little as the model allows.
    Minimal,
    /// Low.
    Low,
    /// Medium (the API's default).
    Medium,
    /// High.
    High,
}

impl ReasoningEffort {
    /// The API's name for it.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Minimal => "minimal",
            Self::Low => "low",
            Self::Medium => "medium",
            Self::High => "high",
        }
    }
}

/// How long Anthropic keeps a cached prefix.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum CacheTtl {
    /// Five minutes, refreshed by every read (the API's default).
    #[default]
    #[serde(rename = "5m")]
    FiveMinutes,
    /// One hour: for runs whose requests can be minutes apart.
    #[serde(rename = "1h")]
    OneHour,
}

/// Timeouts of one HTTP request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Timeouts {
    /// Connecting, sending the request and receiving the response headers.
    /// Generous by default because hosted APIs queue requests before they
    /// answer; a long answer streams for minutes afterwards, which is why
    /// the body has its own, idle-based limit instead.
    pub request: Duration,
    /// The longest silence allowed in a streaming body. Servers that queue
    /// or think send keep-alive comments, which count as data.
    pub idle: Duration,
}

impl Default for Timeouts {
    fn default() -> Self {
        Self {
            request: Duration::from_secs(120),
            idle: Duration::from_secs(120),
        }
    }
}
