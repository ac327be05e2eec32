//! A profile's shared limits (`[limits]`, [`crate::shared_limits`]): each
//! request reserves its estimate in its profile's windows before it is
//! sent, and the Pod's observer settles the reservation with what the
//! answer cost the moment it commits. A request the windows have no room
//! for stops the run with [`Limit::Shared`]; the session then waits for
//! the window to end (a store with workers continues it then).

use crate::gate::ParkedOn;
use crate::shared_limits::{Amounts, Reservation, Reserve, SharedLimits, SharedLimitsConfig};
use async_trait::async_trait;
use pod_llm::{Item, Usage};
use pod_worker::{AbortReason, Interceptor, Limit, PreRequestAction};
use std::sync::Arc;

/// The reservation of the request in flight, between the guard that made
/// it and the observer that settles it.
#[derive(Clone, Debug, Default)]
pub struct PendingReservation {
    // Held to put or take one value, never across an await.
    slot: Arc<parking_lot::Mutex<Option<Reservation>>>,
    backend: Option<Arc<dyn SharedLimits>>,
    prices: Option<pod_llm::Prices>,
}

impl PendingReservation {
    /// A slot settling in `backend` at `prices`.
    pub(crate) fn new(backend: Arc<dyn SharedLimits>, prices: Option<pod_llm::Prices>) -> Self {
        Self {
            slot: Arc::default(),
            backend: Some(backend),
            prices,
        }
    }

    /// The answer of the request in flight committed with `usage` (none:
    /// the provider reported none, and the estimate stands as spent).
    pub(crate) async fn settle(&self, usage: Option<&Usage>) {
        let Some(reservation) = self.slot.lock().take() else {
            return;
        };
        let actual = match usage {
            Some(usage) => Amounts::of_usage(usage, self.prices.as_ref()),
            None => reservation.amounts,
        };
        self.settle_with(&reservation, actual).await;
    }

    /// The request in flight got no answer (it failed, or the run was
    /// cancelled): its reservation is given back.
    async fn release(&self) {
        let taken = self.slot.lock().take();
        if let Some(reservation) = taken {
            self.settle_with(&reservation, Amounts::default()).await;
        }
    }

    async fn settle_with(&self, reservation: &Reservation, actual: Amounts) {
        let Some(backend) = &self.backend else {
            return;
        };
        if let Err(err) = backend.settle(reservation, actual).await {
            // What it cost is in the log; the window keeps the estimate
            // reserved until it ends.
            tracing::warn!(
                profile = %reservation.profile,
                error = %pod_llm::error_chain(&err),
                "cannot settle a shared limit's reservation"
            );
        }
    }

    fn put(&self, reservation: Reservation) {
        *self.slot.lock() = Some(reservation);
    }
}

/// Reserves each request in its profile's windows; stops the run when
/// they have no room.
pub struct SharedLimitGuard {
    config: SharedLimitsConfig,
    backend: Arc<dyn SharedLimits>,
    pending: PendingReservation,
    // Tokens every request sends besides its history: the system prompt
    // and the tools' specs.
    overhead: u64,
    // The session's own Pod says what it waits for; a subagent's does not
    // (its parent, refused in turn, does).
    parked: Option<ParkedOn>,
}

impl SharedLimitGuard {
    /// A guard of `config`'s caps in `backend`, making reservations the
    /// observer settles through `pending`; a refusal says on `parked` what
    /// the session waits for.
    pub(crate) fn new(
        config: SharedLimitsConfig,
        backend: Arc<dyn SharedLimits>,
        pending: PendingReservation,
        parked: Option<ParkedOn>,
    ) -> Self {
        Self {
            config,
            backend,
            pending,
            overhead: 0,
            parked,
        }
    }

    /// The same guard, estimating `overhead` tokens besides each
    /// request's history (its system prompt and tools' specs).
    pub(crate) fn with_overhead(mut self, overhead: u64) -> Self {
        self.overhead = overhead;
        self
    }
}

#[async_trait]
impl Interceptor for SharedLimitGuard {
    async fn pre_llm_request(&mut self, request: &mut Arc<Vec<Item>>) -> PreRequestAction {
        // A reservation still pending is a request that got no answer.
        self.pending.release().await;
        let ask = self.config.estimate(request, self.overhead);
        match self
            .backend
            .reserve(&self.config.profile, &self.config.caps, ask)
            .await
        {
            Ok(Reserve::Granted(reservation)) => {
                self.pending.put(reservation);
                PreRequestAction::Continue
            }
            Ok(Reserve::Refused { cap, spent, until }) => {
                if let Some(parked) = &self.parked {
                    parked.limited(until);
                }
                PreRequestAction::Stop(Limit::Shared {
                    profile: self.config.profile.clone(),
                    measure: cap.measure,
                    window: cap.window,
                    max: cap.max,
                    spent,
                })
            }
            Err(err) => {
                // The store's outage pauses the session's writes anyway;
                // refusing here would stop it as if the limit were
                // reached. The request goes uncounted.
                tracing::warn!(
                    profile = %self.config.profile,
                    error = %pod_llm::error_chain(&err),
                    "cannot reserve in the shared limits; the request goes out uncounted"
                );
                PreRequestAction::Continue
            }
        }
    }

    async fn on_abort(&mut self, _reason: &AbortReason) {
        self.pending.release().await;
    }
}

impl Drop for SharedLimitGuard {
    fn drop(&mut self) {
        // A run that ended with a request unanswered (its provider failed):
        // give its reservation back.
        let pending = self.pending.clone();
        if pending.slot.lock().is_some() {
            if let Ok(runtime) = tokio::runtime::Handle::try_current() {
                runtime.spawn(async move { pending.release().await });
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::shared_limits::{Cap, InProcessLimits, Measure, Window};

    #[tokio::test]
    async fn a_request_reserves_its_answer_settles_and_a_full_window_stops_the_run() {
        let backend: Arc<dyn SharedLimits> = Arc::new(InProcessLimits::default());
        let config = SharedLimitsConfig {
            profile: "p".into(),
            caps: vec![Cap {
                measure: Measure::Tokens,
                window: Window::Day,
                max: 3000,
            }],
            prices: None,
            output_estimate: 1000,
            backend: None,
        };
        let pending = PendingReservation::new(Arc::clone(&backend), None);
        let parked = ParkedOn::default();
        let mut guard = SharedLimitGuard::new(
            config.clone(),
            Arc::clone(&backend),
            pending.clone(),
            Some(parked.clone()),
        );
        let mut other = SharedLimitGuard::new(
            config,
            Arc::clone(&backend),
            PendingReservation::new(Arc::clone(&backend), None),
            None,
        );
        let mut request = Arc::new(vec![Item::user("hi")]);
        // Two sessions reserve about 1000 each; a third request does not fit
        // while they are in flight.
        assert_eq!(
            guard.pre_llm_request(&mut request).await,
            PreRequestAction::Continue
        );
        assert_eq!(
            other.pre_llm_request(&mut request).await,
            PreRequestAction::Continue
        );
        let mut third = SharedLimitGuard::new(
            guard.config.clone(),
            Arc::clone(&backend),
            PendingReservation::new(Arc::clone(&backend), None),
            None,
        );
        assert!(matches!(
            third.pre_llm_request(&mut request).await,
            PreRequestAction::Stop(Limit::Shared { .. })
        ));
        // The first answer cost 100 tokens: room again.
        pending
            .settle(Some(&Usage {
                prompt_tokens: 90,
                completion_tokens: 10,
                ..Usage::default()
            }))
            .await;
        assert_eq!(
            third.pre_llm_request(&mut request).await,
            PreRequestAction::Continue
        );
        // Its next request: 100 spent + two reservations of ~1000.
        assert_eq!(
            guard.pre_llm_request(&mut request).await,
            PreRequestAction::Stop(Limit::Shared {
                profile: "p".into(),
                measure: Measure::Tokens,
                window: Window::Day,
                max: 3000,
                spent: 100 + 2 * (1000 + pod_llm::tokens::estimate_item_tokens(&request[0])),
            })
        );
        assert!(matches!(parked.take(), Some(crate::Waits::Limit { .. })));
    }
}
