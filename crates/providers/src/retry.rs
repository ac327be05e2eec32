//! The retry policy: exponential backoff with jitter, honouring the
//! server's `retry-after`, bounded in attempts.
//!
//! A request is retried transparently only while nothing of it has reached
//! the caller: a failure to connect, an error status, or an error before the
//! first event (Anthropic's `overloaded_error` right after `message_start`,
//! a connection dropped before any content). Once an event was yielded, a
//! failure ends the stream with a retryable error and the caller decides:
//! the turn loop folds events as they come, so a restart behind its back
//! would duplicate deltas, and buffering whole responses would cost the
//! streaming the user watches. Nothing of a failed attempt is ever kept.

use crate::gate::Gate;
use futures_util::{stream, StreamExt};
use pod_llm::{EventStream, Provider, ProviderError, ProviderRequest};
use std::hash::{BuildHasher, Hasher};
use std::sync::Arc;
use std::time::Duration;

/// When and how often to retry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Attempts in all, the first included; 1 disables retries.
    pub max_attempts: u32,
    /// Backoff before the first retry; doubled for each further one.
    pub base_delay: Duration,
    /// Backoff never exceeds this.
    pub max_delay: Duration,
    /// A server asking to wait longer than this is not retried: the error
    /// surfaces at once rather than hanging the session for minutes.
    pub max_retry_after: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        Self {
            // Five attempts ride out a short overload (about 15 s of backoff
            // in all) without making a dead endpoint look like a hang.
            max_attempts: 5,
            base_delay: Duration::from_millis(1000),
            max_delay: Duration::from_secs(30),
            max_retry_after: Duration::from_secs(120),
        }
    }
}

impl RetryPolicy {
    /// How long to wait after `attempt` (1-based) failed with `error`, or
    /// `None` to give up. `jitter` is in `[0, 1)`.
    pub fn delay(&self, attempt: u32, error: &ProviderError, jitter: f64) -> Option<Duration> {
        if !error.is_retryable() || attempt >= self.max_attempts {
            return None;
        }
        if let ProviderError::Http {
            retry_after: Some(wait),
            ..
        } = error
        {
            return (*wait <= self.max_retry_after).then_some(*wait);
        }
        let exponent = attempt.saturating_sub(1).min(20);
        let backoff = self
            .base_delay
            .saturating_mul(1 << exponent)
            .min(self.max_delay);
        // "Equal jitter": at least half the backoff, so clients that failed
        // together spread out without any of them retrying at once.
        let jitter = jitter.clamp(0.0, 1.0);
        Some(backoff / 2 + backoff.mul_f64(jitter / 2.0))
    }
}

/// A number in `[0, 1)` that differs between calls and processes: std's
/// `RandomState` is seeded randomly per instance, which is all the entropy
/// jitter needs.
fn jitter() -> f64 {
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    hasher.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0),
    );
    (hasher.finish() >> 11) as f64 / (1u64 << 53) as f64
}

/// Whether the provider said it gets too many requests (429, or 529
/// "overloaded").
fn rate_limited(error: &ProviderError) -> bool {
    matches!(
        error,
        ProviderError::Http {
            status: 429 | 529,
            ..
        }
    )
}

/// Wraps a provider with a [`RetryPolicy`], through a [`Gate`].
#[derive(Debug, Clone)]
pub struct RetryingProvider<P> {
    inner: P,
    policy: RetryPolicy,
    gate: Arc<Gate>,
}

impl<P: Provider> RetryingProvider<P> {
    /// `inner`, retried according to `policy`, with a gate of its own.
    pub fn new(inner: P, policy: RetryPolicy) -> Self {
        Self {
            inner,
            policy,
            gate: Gate::unshared(),
        }
    }

    /// Sends through `gate` (shared with the endpoint's other providers:
    /// its limit on requests in flight, and the pause a rate-limit answer
    /// starts for all of them).
    pub fn with_gate(mut self, gate: Arc<Gate>) -> Self {
        self.gate = gate;
        self
    }

    /// The wrapped provider.
    pub fn inner(&self) -> &P {
        &self.inner
    }
}

#[async_trait::async_trait]
impl<P: Provider> Provider for RetryingProvider<P> {
    async fn stream(&self, request: &ProviderRequest) -> Result<EventStream, ProviderError> {
        let mut attempt = 0;
        loop {
            attempt += 1;
            let pass = self.gate.enter().await;
            let failure = match self.inner.stream(request).await {
                Err(err) => err,
                // Wait for the first event: until it is yielded, a failure
                // can still be retried without the caller seeing anything.
                Ok(mut events) => match events.next().await {
                    Some(Err(err)) => err,
                    Some(Ok(first)) => {
                        // The place is held until the answer is read.
                        let events = events.map(move |event| {
                            let _held = &pass;
                            event
                        });
                        return Ok(stream::iter([Ok(first)]).chain(events).boxed());
                    }
                    None => return Ok(stream::empty().boxed()),
                },
            };
            drop(pass);
            let Some(wait) = self.policy.delay(attempt, &failure, jitter()) else {
                return Err(failure);
            };
            if rate_limited(&failure) {
                // Every session of this endpoint waits, not only this one.
                self.gate.pause(wait);
            }
            crate::metered::retried(&self.inner.model_name(), &failure);
            tracing::warn!(
                attempt,
                wait_ms = wait.as_millis() as u64,
                error = %failure,
                "model request failed; retrying"
            );
            tokio::time::sleep(wait).await;
        }
    }

    fn context_window(&self) -> Option<u64> {
        self.inner.context_window()
    }

    fn model_name(&self) -> String {
        self.inner.model_name()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn http(status: u16, retry_after: Option<Duration>) -> ProviderError {
        ProviderError::Http {
            status,
            message: String::new(),
            retry_after,
        }
    }

    #[test]
    fn backoff_doubles_with_jitter_and_caps() {
        let policy = RetryPolicy {
            max_attempts: 10,
            base_delay: Duration::from_millis(100),
            max_delay: Duration::from_millis(500),
            max_retry_after: Duration::from_secs(60),
        };
        let err = ProviderError::Transport("reset".into());
        assert_eq!(policy.delay(1, &err, 0.0), Some(Duration::from_millis(50)));
        let most = policy.delay(1, &err, 0.999_999).unwrap();
        assert!(most > Duration::from_millis(99) && most < Duration::from_millis(100));
        assert_eq!(policy.delay(2, &err, 0.0), Some(Duration::from_millis(100)));
        assert_eq!(policy.delay(5, &err, 0.0), Some(Duration::from_millis(250)));
        assert_eq!(policy.delay(10, &err, 0.0), None);
    }

    #[test]
    fn retry_after_is_honoured_within_bounds() {
        let policy = RetryPolicy::default();
        let asked = http(429, Some(Duration::from_secs(7)));
        assert_eq!(policy.delay(1, &asked, 0.5), Some(Duration::from_secs(7)));
        let too_long = http(429, Some(Duration::from_secs(3600)));
        assert_eq!(policy.delay(1, &too_long, 0.5), None);
    }

    #[test]
    fn only_retryable_errors_are_retried() {
        let policy = RetryPolicy::default();
        for status in [408, 409, 429, 500, 502, 503, 529] {
            assert!(
                policy.delay(1, &http(status, None), 0.0).is_some(),
                "{status}"
            );
        }
        for status in [400, 401, 403, 404, 422] {
            assert!(
                policy.delay(1, &http(status, None), 0.0).is_none(),
                "{status}"
            );
        }
        let overloaded = ProviderError::Api {
            kind: "overloaded_error".into(),
            message: "Overloaded".into(),
            retryable: true,
        };
        assert!(policy.delay(1, &overloaded, 0.0).is_some());
        assert!(policy
            .delay(1, &ProviderError::Malformed("x".into()), 0.0)
            .is_none());
    }

    #[test]
    fn jitter_stays_in_range() {
        for _ in 0..100 {
            let j = jitter();
            assert!((0.0..1.0).contains(&j));
        }
    }
}
