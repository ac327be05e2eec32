//! Provider selection: flags, profile file and environment lowered to one
//! [`RawProviderConfig`], resolved once into a [`ProviderConfig`].
//!
//! Precedence is flags over the profile over defaults:
//! `defaults.merge(profile).merge(flags).resolve()`. API keys are only ever
//! read from the environment (a named variable per profile, or the usual
//! `OPENAI_API_KEY` / `ANTHROPIC_API_KEY` / `DEEPSEEK_API_KEY`), never from
//! flags or the file, so they do not end up in shell history or dotfiles.

mod file;

pub use file::{ConfigFile, CONFIG_ENV};

use crate::endpoint::{Endpoint, PromptCache};
use crate::http::Timeouts;
use crate::retry::RetryPolicy;
use crate::secret::ApiKey;
use pod_llm::Prices;
use serde::{Deserialize, Serialize};
use std::path::PathBuf;
use std::time::Duration;

/// Which wire API a provider speaks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ProviderKind {
    /// OpenAI-compatible Chat Completions.
    OpenAi,
    /// OpenAI's Responses API, the conversation stored on the server.
    #[serde(rename = "openai-responses")]
    OpenAiResponses,
    /// Anthropic Messages.
    Anthropic,
    /// The deterministic scripted model (a JSON script file).
    Scripted,
}

impl std::str::FromStr for ProviderKind {
    type Err = ConfigError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        match text {
            "openai" => Ok(Self::OpenAi),
            "openai-responses" => Ok(Self::OpenAiResponses),
            "anthropic" => Ok(Self::Anthropic),
            "scripted" => Ok(Self::Scripted),
            other => Err(ConfigError::Invalid {
                field: "kind",
                reason: format!(
                    "unknown provider kind {other:?} (openai, openai-responses, anthropic, scripted)"
                ),
            }),
        }
    }
}

/// Provider settings as given: every field optional, so layers can merge.
/// It is also the shape of one `[profiles.NAME]` table in the config file.
/// It holds no secret (only the name of the key's variable), so front ends
/// may store it to start a session the same way later.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawProviderConfig {
    /// Wire API.
    pub kind: Option<ProviderKind>,
    /// Base URL of the API.
    pub base_url: Option<String>,
    /// Model id.
    pub model: Option<String>,
    /// Name of the environment variable holding the API key.
    pub api_key_env: Option<String>,
    /// Context window in tokens.
    pub context_window: Option<u64>,
    /// Output token limit per request.
    pub max_output_tokens: Option<u32>,
    /// Sampling temperature.
    pub temperature: Option<f64>,
    /// Extended-thinking budget in tokens (Anthropic).
    pub thinking_budget: Option<u32>,
    /// Reasoning effort of OpenAI's reasoning models (`openai`,
    /// `openai-responses`); the server's default when unset.
    pub reasoning_effort: Option<ReasoningEffort>,
    /// Seconds to wait for response headers.
    pub request_timeout_secs: Option<u64>,
    /// Seconds of silence allowed in a streaming body.
    pub idle_timeout_secs: Option<u64>,
    /// Attempts per request, the first included.
    pub max_attempts: Option<u32>,
    /// The most requests in flight to this model from one process, all
    /// its sessions together (a fleet worker's); a rate-limit answer
    /// pauses them all either way.
    pub max_concurrent_requests: Option<u32>,
    /// Whether requests may go over HTTP/2: `auto` (default: where a
    /// server offers it in TLS), `prior-knowledge` (also plain `http://`
    /// gateways, HTTP/2 from the first byte) or `never`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub http2: Option<Http2>,
    /// A PEM file of certificate authorities trusted besides the web
    /// PKI's (a private gateway's). In the config file a relative path is
    /// relative to the file's directory.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ca_file: Option<PathBuf>,
    /// Script file of the scripted provider. In the config file a relative
    /// path is relative to the file's directory.
    pub script: Option<PathBuf>,
    /// Prompt caching (default on): Anthropic requests mark cache
    /// breakpoints; OpenAI-compatible servers cache on their own.
    pub cache: Option<bool>,
    /// How long Anthropic keeps a cached prefix: `5m` (default) or `1h`
    /// (for long unattended runs; writes cost more).
    pub cache_ttl: Option<CacheTtl>,
    /// Send the session id as `prompt_cache_key` (OpenAI wire), so requests
    /// of one session reach the same cache. On by default for OpenAI's own
    /// API only: other servers may reject unknown fields.
    pub prompt_cache_key: Option<bool>,
    /// Prices per million tokens, for the cost `pod show` and `pod
    /// sessions` print. None are built in: prices change.
    pub prices: Option<Prices>,
    /// Let the server store each response (Responses API, default on), so
    /// the next request sends only the new items. Off for organisations
    /// that may not keep data on the provider's side: every request is
    /// then sent whole.
    pub store: Option<bool>,
    /// The model id subagents use, with this profile's provider, key and
    /// settings otherwise (a cheaper model for delegated work); the
    /// profile's own model when unset.
    pub subagent_model: Option<String>,
    /// The profile's `budget` table, kept as parsed: its meaning belongs to
    /// front ends (the run's budget), which this crate must not know. Not
    /// part of what is stored of a profile.
    #[serde(default, skip_serializing)]
    pub budget: Option<toml::Value>,
    /// The profile's `notify` table (where notifications go), kept as
    /// parsed for front ends, its keys over the top-level `[notify]`'s.
    /// Not part of what is stored of a profile.
    #[serde(default, skip_serializing)]
    pub notify: Option<toml::Value>,
    /// The profile's `goal` table (the checks that decide whether a run is
    /// done), kept as parsed for front ends, its keys over the top-level
    /// `[goal]`'s. Not part of what is stored of a profile.
    #[serde(default, skip_serializing)]
    pub goal: Option<toml::Value>,
    /// The profile's `[profiles.NAME.mcp_servers.SERVER]` tables, kept as
    /// parsed for front ends. Never stored (they may hold secrets in `env`).
    #[serde(default, skip_serializing)]
    pub mcp_servers: Option<toml::Value>,
    /// The profile's `hooks_file` (over the top-level one's hooks, not
    /// instead of them). Never stored: a session records the hooks it read.
    #[serde(default, skip_serializing)]
    pub hooks_file: Option<std::path::PathBuf>,
    /// The profile's `workspace_hooks`.
    #[serde(default, skip_serializing)]
    pub workspace_hooks: Option<bool>,
}

pub use crate::endpoint::{CacheTtl, Http2, ReasoningEffort};

/// A resolved, valid provider configuration.
#[derive(Clone, Debug, PartialEq)]
pub enum ProviderConfig {
    /// OpenAI-compatible Chat Completions.
    OpenAi {
        /// The endpoint.
        endpoint: Endpoint,
        /// The retry policy.
        retry: RetryPolicy,
    },
    /// OpenAI's Responses API.
    OpenAiResponses {
        /// The endpoint.
        endpoint: Endpoint,
        /// The retry policy.
        retry: RetryPolicy,
        /// Whether responses are stored on the server and followed.
        store: bool,
    },
    /// Anthropic Messages.
    Anthropic {
        /// The endpoint.
        endpoint: Endpoint,
        /// The retry policy.
        retry: RetryPolicy,
    },
    /// The scripted model.
    Scripted {
        /// The script file.
        script: PathBuf,
    },
}

/// Why a configuration could not be loaded or resolved.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The config file could not be read.
    #[error("cannot read {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
    /// The config file is not valid: not TOML, or not a config.
    #[error("invalid config file {path}{}: {message}", at_line(*line_column))]
    Parse {
        /// The file.
        path: PathBuf,
        /// Where, 1-based, in characters, when the parser says.
        line_column: Option<(usize, usize)>,
        /// What is wrong, on one line.
        message: String,
        /// The parser's own display of the place: the line with a caret
        /// under the fault (several lines), for front ends that can show
        /// it below the message.
        snippet: String,
    },
    /// A profile that the file does not define.
    #[error("no profile {name:?} in {path} ({})", known_profiles(known))]
    UnknownProfile {
        /// The name asked for.
        name: String,
        /// The file.
        path: PathBuf,
        /// The names the file defines, comma-separated.
        known: String,
    },
    /// No provider kind anywhere.
    #[error("no provider kind given (openai, openai-responses, anthropic or scripted)")]
    MissingKind,
    /// No model for an HTTP provider.
    #[error("no model given for the {0} provider")]
    MissingModel(&'static str),
    /// The scripted provider without a script.
    #[error("the scripted provider needs a script file")]
    MissingScript,
    /// The API key variable is unset or empty.
    #[error("environment variable {0} with the API key is not set")]
    MissingKey(String),
    /// A value out of range.
    #[error("invalid {field}: {reason}")]
    Invalid {
        /// The setting.
        field: &'static str,
        /// Why.
        reason: String,
    },
}

fn at_line(line_column: Option<(usize, usize)>) -> String {
    match line_column {
        Some((line, column)) => format!(", line {line}, column {column}"),
        None => String::new(),
    }
}

fn known_profiles(known: &str) -> String {
    if known.is_empty() {
        "it defines no profiles".into()
    } else {
        format!("known: {known}")
    }
}

const OPENAI_URL: &str = "https://api.openai.com/v1";
const ANTHROPIC_URL: &str = "https://api.anthropic.com";

impl RawProviderConfig {
    /// `self` with every field that `over` sets replaced by `over`'s.
    pub fn merge(self, over: RawProviderConfig) -> Self {
        Self {
            kind: over.kind.or(self.kind),
            base_url: over.base_url.or(self.base_url),
            model: over.model.or(self.model),
            api_key_env: over.api_key_env.or(self.api_key_env),
            context_window: over.context_window.or(self.context_window),
            max_output_tokens: over.max_output_tokens.or(self.max_output_tokens),
            temperature: over.temperature.or(self.temperature),
            thinking_budget: over.thinking_budget.or(self.thinking_budget),
            reasoning_effort: over.reasoning_effort.or(self.reasoning_effort),
            request_timeout_secs: over.request_timeout_secs.or(self.request_timeout_secs),
            idle_timeout_secs: over.idle_timeout_secs.or(self.idle_timeout_secs),
            max_attempts: over.max_attempts.or(self.max_attempts),
            max_concurrent_requests: over
                .max_concurrent_requests
                .or(self.max_concurrent_requests),
            http2: over.http2.or(self.http2),
            ca_file: over.ca_file.or(self.ca_file),
            script: over.script.or(self.script),
            cache: over.cache.or(self.cache),
            cache_ttl: over.cache_ttl.or(self.cache_ttl),
            prompt_cache_key: over.prompt_cache_key.or(self.prompt_cache_key),
            prices: over.prices.or(self.prices),
            store: over.store.or(self.store),
            subagent_model: over.subagent_model.or(self.subagent_model),
            budget: over.budget.or(self.budget),
            notify: over.notify.or(self.notify),
            goal: over.goal.or(self.goal),
            mcp_servers: over.mcp_servers.or(self.mcp_servers),
            hooks_file: over.hooks_file.or(self.hooks_file),
            workspace_hooks: over.workspace_hooks.or(self.workspace_hooks),
        }
    }

    /// Resolves against the process environment.
    pub fn resolve(&self) -> Result<ProviderConfig, ConfigError> {
        self.resolve_with(|name| std::env::var(name).ok())
    }

    /// Resolves, reading environment variables through `env`.
    pub fn resolve_with(
        &self,
        env: impl Fn(&str) -> Option<String>,
    ) -> Result<ProviderConfig, ConfigError> {
        let kind = self.kind.ok_or(ConfigError::MissingKind)?;
        let (default_url, kind_name) = match kind {
            ProviderKind::Scripted => {
                let script = self.script.clone().ok_or(ConfigError::MissingScript)?;
                return Ok(ProviderConfig::Scripted { script });
            }
            ProviderKind::OpenAi => (OPENAI_URL, "openai"),
            ProviderKind::OpenAiResponses => (OPENAI_URL, "openai-responses"),
            ProviderKind::Anthropic => (ANTHROPIC_URL, "anthropic"),
        };
        let base_url = self.base_url.clone().unwrap_or_else(|| default_url.into());
        if !(base_url.starts_with("http://") || base_url.starts_with("https://")) {
            return Err(ConfigError::Invalid {
                field: "base_url",
                reason: format!("{base_url:?} is not an http(s) URL"),
            });
        }
        let model = self
            .model
            .clone()
            .ok_or(ConfigError::MissingModel(kind_name))?;
        if let Some(t) = self.temperature.filter(|t| !(0.0..=2.0).contains(t)) {
            return Err(ConfigError::Invalid {
                field: "temperature",
                reason: format!("{t} is outside 0..=2"),
            });
        }
        let mut endpoint = Endpoint::new(base_url, model);
        endpoint.api_key = self.api_key(kind, &endpoint.base_url, env)?;
        endpoint.context_window = self.context_window;
        endpoint.max_output_tokens = self.max_output_tokens;
        endpoint.temperature = self.temperature;
        endpoint.thinking_budget = self.thinking_budget;
        endpoint.reasoning_effort = self.reasoning_effort;
        endpoint.cache = PromptCache {
            enabled: self.cache.unwrap_or(true),
            ttl: self.cache_ttl.unwrap_or_default(),
            send_key: self
                .prompt_cache_key
                .unwrap_or(endpoint.base_url.trim_end_matches('/') == OPENAI_URL),
        };
        let defaults = Timeouts::default();
        endpoint.timeouts = Timeouts {
            request: self
                .request_timeout_secs
                .map_or(defaults.request, Duration::from_secs),
            idle: self
                .idle_timeout_secs
                .map_or(defaults.idle, Duration::from_secs),
        };
        endpoint.max_concurrent = self.max_concurrent_requests;
        endpoint.http2 = self.http2.unwrap_or_default();
        endpoint.ca_file.clone_from(&self.ca_file);
        let mut retry = RetryPolicy::default();
        if let Some(attempts) = self.max_attempts {
            retry.max_attempts = attempts.max(1);
        }
        Ok(match kind {
            ProviderKind::Anthropic => ProviderConfig::Anthropic { endpoint, retry },
            ProviderKind::OpenAiResponses => ProviderConfig::OpenAiResponses {
                endpoint,
                retry,
                store: self.store.unwrap_or(true),
            },
            _ => ProviderConfig::OpenAi { endpoint, retry },
        })
    }

    /// The key from the named variable, else the usual one for the kind
    /// and host. Hosted APIs need a key; local servers (Ollama, llama.cpp)
    /// do not, so a missing default variable is an error only for them.
    ///
    /// The variable itself: what a person checks when the key is refused.
    pub fn key_variable(&self) -> Option<String> {
        let kind = self.kind?;
        if kind == ProviderKind::Scripted {
            return None;
        }
        let base_url = self.base_url.clone().unwrap_or_default();
        Some(match (&self.api_key_env, kind) {
            (Some(name), _) => name.clone(),
            (None, ProviderKind::Anthropic) => "ANTHROPIC_API_KEY".into(),
            (None, _) if base_url.contains("deepseek.com") => "DEEPSEEK_API_KEY".into(),
            (None, _) => "OPENAI_API_KEY".into(),
        })
    }

    /// The key for `kind` at `base_url`, from the environment.
    fn api_key(
        &self,
        kind: ProviderKind,
        base_url: &str,
        env: impl Fn(&str) -> Option<String>,
    ) -> Result<Option<ApiKey>, ConfigError> {
        let hosted = [
            "api.openai.com",
            "api.deepseek.com",
            "api.anthropic.com",
            "openrouter.ai",
        ]
        .iter()
        .any(|host| base_url.contains(host));
        let (name, required) = match (&self.api_key_env, kind) {
            (Some(name), _) => (name.clone(), true),
            (None, ProviderKind::Anthropic) => ("ANTHROPIC_API_KEY".into(), true),
            (None, _) if base_url.contains("deepseek.com") => ("DEEPSEEK_API_KEY".into(), true),
            (None, _) => ("OPENAI_API_KEY".into(), hosted),
        };
        match env(&name).filter(|key| !key.trim().is_empty()) {
            Some(key) => Ok(Some(ApiKey::new(key.trim()))),
            None if required => Err(ConfigError::MissingKey(name)),
            None => Ok(None),
        }
    }
}

#[cfg(test)]
#[path = "tests.rs"]
mod tests;
