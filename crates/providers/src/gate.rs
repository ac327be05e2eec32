//! What the sessions of one process share per model endpoint: a limit on
//! requests in flight, and a pause after the provider said "too many".
//!
//! A fleet worker runs thousands of sessions against the same API. Each
//! session's [`RetryingProvider`](crate::RetryingProvider) backs off on its
//! own; without a shared gate, the other sessions keep sending while the
//! provider rate-limits, and every one of them meets the same 429. So a
//! rate-limit answer (429, or 529 "overloaded") pauses every session of the
//! endpoint until the wait it asked for (its `retry-after`, else the
//! backoff) has passed, and `max_concurrent_requests` (a profile setting)
//! bounds how many requests the process has in flight to it.

use std::collections::HashMap;
use std::sync::{Arc, OnceLock, Weak};
use std::time::Duration;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::time::Instant;

/// The gate of one endpoint (base URL and model) in this process.
#[derive(Debug, Default)]
pub struct Gate {
    permits: Option<Arc<Semaphore>>,
    // When requests may go again. Held to read or raise it.
    paused_until: parking_lot::Mutex<Option<Instant>>,
}

/// A request's place in the gate: held while its answer streams.
#[derive(Debug)]
pub struct Pass {
    _permit: Option<OwnedSemaphorePermit>,
}

type Key = (String, String, Option<u32>);

impl Gate {
    /// A gate of its own (no limit, nobody else pauses it).
    pub fn unshared() -> Arc<Self> {
        Arc::new(Self::default())
    }

    /// The process's gate for `model` at `base_url` with at most
    /// `max_concurrent` requests in flight: every provider built for the
    /// same three shares it.
    pub fn shared(base_url: &str, model: &str, max_concurrent: Option<u32>) -> Arc<Self> {
        // Weak: a gate lives as long as a provider uses it. The lock is
        // held for one lookup or insert.
        static GATES: OnceLock<parking_lot::Mutex<HashMap<Key, Weak<Gate>>>> = OnceLock::new();
        let key = (
            base_url.trim_end_matches('/').to_string(),
            model.to_string(),
            max_concurrent,
        );
        let mut gates = GATES
            .get_or_init(|| parking_lot::Mutex::new(HashMap::new()))
            .lock();
        if let Some(gate) = gates.get(&key).and_then(Weak::upgrade) {
            return gate;
        }
        gates.retain(|_, gate| gate.strong_count() > 0);
        let gate = Arc::new(Self {
            permits: max_concurrent.map(|n| Arc::new(Semaphore::new(n.max(1) as usize))),
            paused_until: parking_lot::Mutex::new(None),
        });
        gates.insert(key, Arc::downgrade(&gate));
        gate
    }

    /// Waits until requests may go (the pause is over and a place is
    /// free) and takes a place.
    pub async fn enter(&self) -> Pass {
        loop {
            let until = *self.paused_until.lock();
            match until {
                Some(until) if until > Instant::now() => tokio::time::sleep_until(until).await,
                _ => break,
            }
        }
        let permit = match &self.permits {
            Some(permits) => Arc::clone(permits).acquire_owned().await.ok(),
            None => None,
        };
        Pass { _permit: permit }
    }

    /// The provider asked to wait `wait`: nobody sends before it passed.
    pub fn pause(&self, wait: Duration) {
        let until = Instant::now() + wait;
        let mut paused = self.paused_until.lock();
        if paused.is_none_or(|current| current < until) {
            *paused = Some(until);
        }
    }

    /// Places free now, if it has a limit.
    pub fn available(&self) -> Option<usize> {
        self.permits.as_ref().map(|p| p.available_permits())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn providers_of_one_endpoint_share_its_gate() {
        let a = Gate::shared("http://x/v1/", "m", Some(2));
        let b = Gate::shared("http://x/v1", "m", Some(2));
        let other = Gate::shared("http://x/v1", "n", Some(2));
        assert!(Arc::ptr_eq(&a, &b));
        assert!(!Arc::ptr_eq(&a, &other));
    }

    #[tokio::test(start_paused = true)]
    async fn a_pause_holds_every_request_until_it_passed() {
        let gate = Gate::shared("http://pause/v1", "m", None);
        gate.pause(Duration::from_secs(10));
        let waiting = tokio::spawn({
            let gate = Arc::clone(&gate);
            async move {
                gate.enter().await;
                Instant::now()
            }
        });
        let start = Instant::now();
        let entered = waiting.await.unwrap();
        assert!(entered >= start + Duration::from_secs(10));
        // A shorter pause does not shorten a longer one.
        gate.pause(Duration::from_secs(30));
        gate.pause(Duration::from_secs(1));
        let start = Instant::now();
        gate.enter().await;
        assert!(Instant::now() >= start + Duration::from_secs(30));
    }

    #[tokio::test]
    async fn the_limit_holds_requests_while_others_stream() {
        let gate = Gate::shared("http://limit/v1", "m", Some(2));
        let first = gate.enter().await;
        let _second = gate.enter().await;
        assert_eq!(gate.available(), Some(0));
        let third = tokio::spawn({
            let gate = Arc::clone(&gate);
            async move { gate.enter().await }
        });
        tokio::task::yield_now().await;
        assert!(!third.is_finished(), "a third request waits for a place");
        drop(first);
        third.await.unwrap();
    }
}
