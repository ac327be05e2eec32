//! What model requests cost in time and how they fail, per model, counted
//! for the whole process: how long each answer took to end and to start,
//! every failed attempt by kind (the retried ones too, which no session
//! sees), and the retries. A front end's `/metrics` reads [`snapshot`].
//!
//! Every provider [`crate::build_provider`] makes is wrapped in a
//! [`Metered`]; [`crate::RetryingProvider`] reports the attempts it
//! retries. Counting takes one short lock per request (never per event).

use futures_util::{Stream, StreamExt};
use pod_llm::{EventStream, Provider, ProviderError, ProviderRequest, StreamEvent};
use std::collections::BTreeMap;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

/// Upper bounds of the request-time buckets, in seconds: model answers
/// take from a tenth of a second (a cached short reply) to minutes (long
/// reasoning).
pub const REQUEST_BUCKETS: [f64; 12] = [
    0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 20.0, 40.0, 80.0, 160.0, 320.0,
];

/// Models counted apart at most; the rest are counted as `other`. Models
/// come from the operator's profiles, so this is never reached in
/// practice, but a label set must stay bounded whatever the config.
const MAX_MODELS: usize = 64;

/// A histogram of durations over [`REQUEST_BUCKETS`].
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Histogram {
    /// Observations at or under each bound (not cumulative).
    pub buckets: [u64; REQUEST_BUCKETS.len()],
    /// Observations in all.
    pub count: u64,
    /// Their sum, in seconds.
    pub sum: f64,
}

impl Histogram {
    fn observe(&mut self, took: Duration) {
        let seconds = took.as_secs_f64();
        if let Some(i) = REQUEST_BUCKETS.iter().position(|bound| seconds <= *bound) {
            self.buckets[i] += 1;
        }
        self.count += 1;
        self.sum += seconds;
    }

    /// `(bound, observations at or under it)`, cumulative, as Prometheus
    /// histograms are written.
    pub fn cumulative(&self) -> Vec<(f64, u64)> {
        let mut total = 0;
        REQUEST_BUCKETS
            .iter()
            .zip(self.buckets)
            .map(|(bound, n)| {
                total += n;
                (*bound, total)
            })
            .collect()
    }
}

/// One model's counts.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ModelStats {
    /// From sending a request to the end of its answer (answers that
    /// ended whole).
    pub request: Histogram,
    /// From sending a request to its first streamed event.
    pub first_event: Histogram,
    /// Failed attempts by [`ProviderError::kind`], retried or not.
    pub failures: BTreeMap<&'static str, u64>,
    /// Attempts sent again after a failure.
    pub retries: u64,
}

// Held for one update or one copy, never across an await.
static MODELS: parking_lot::Mutex<BTreeMap<String, ModelStats>> =
    parking_lot::Mutex::new(BTreeMap::new());

fn update(model: &str, change: impl FnOnce(&mut ModelStats)) {
    let mut models = MODELS.lock();
    let key = match models.contains_key(model) || models.len() < MAX_MODELS {
        true => model,
        false => "other",
    };
    match models.get_mut(key) {
        Some(stats) => change(stats),
        None => change(models.entry(key.to_string()).or_default()),
    }
}

/// An attempt at `model` failed with `error` and is sent again.
pub(crate) fn retried(model: &str, error: &ProviderError) {
    update(model, |stats| {
        *stats.failures.entry(error.kind()).or_default() += 1;
        stats.retries += 1;
    });
}

/// The counts of this process, by model.
pub fn snapshot() -> BTreeMap<String, ModelStats> {
    MODELS.lock().clone()
}

/// A provider whose requests are counted under its model's name.
pub struct Metered {
    inner: Arc<dyn Provider>,
    model: Arc<str>,
}

impl Metered {
    /// `inner`, counted.
    pub fn new(inner: Arc<dyn Provider>) -> Self {
        let model = inner.model_name().into();
        Self { inner, model }
    }
}

#[async_trait::async_trait]
impl Provider for Metered {
    async fn stream(&self, request: &ProviderRequest) -> Result<EventStream, ProviderError> {
        let sent = Instant::now();
        match self.inner.stream(request).await {
            Ok(events) => Ok(Timed {
                events,
                model: Arc::clone(&self.model),
                sent,
                started: false,
                finished: None,
                done: false,
            }
            .boxed()),
            Err(err) => {
                update(&self.model, |stats| {
                    *stats.failures.entry(err.kind()).or_default() += 1
                });
                Err(err)
            }
        }
    }

    fn context_window(&self) -> Option<u64> {
        self.inner.context_window()
    }

    fn model_name(&self) -> String {
        self.inner.model_name()
    }
}

/// An answer's events, timed as they pass. Its end is its last event
/// after the model's finish (consumers stop reading there), or the end of
/// the stream; an answer dropped before its finish is not timed.
struct Timed {
    events: EventStream,
    model: Arc<str>,
    sent: Instant,
    started: bool,
    // When the last event since the finish arrived.
    finished: Option<Duration>,
    // Counted: its time or its failure.
    done: bool,
}

impl Drop for Timed {
    fn drop(&mut self) {
        if let (false, Some(took)) = (self.done, self.finished) {
            update(&self.model, |stats| stats.request.observe(took));
        }
    }
}

impl Stream for Timed {
    type Item = Result<StreamEvent, ProviderError>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let polled = self.events.poll_next_unpin(cx);
        let Poll::Ready(item) = &polled else {
            return polled;
        };
        if self.done {
            return polled;
        }
        let took = self.sent.elapsed();
        match item {
            Some(Ok(event)) => {
                if !self.started {
                    self.started = true;
                    update(&self.model, |stats| stats.first_event.observe(took));
                }
                if matches!(event, StreamEvent::Finish { .. }) || self.finished.is_some() {
                    self.finished = Some(took);
                }
            }
            Some(Err(err)) => {
                self.done = true;
                update(&self.model, |stats| {
                    *stats.failures.entry(err.kind()).or_default() += 1
                });
            }
            None => {
                self.done = true;
                update(&self.model, |stats| stats.request.observe(took));
            }
        }
        polled
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_are_cumulative_and_the_sum_is_kept() {
        let mut histogram = Histogram::default();
        histogram.observe(Duration::from_millis(50));
        histogram.observe(Duration::from_millis(700));
        histogram.observe(Duration::from_secs(1000));
        let cumulative = histogram.cumulative();
        assert_eq!(cumulative[0], (0.1, 1));
        assert_eq!(cumulative[3], (1.0, 2));
        // Past the last bound: only in +Inf (the count).
        assert_eq!(cumulative.last().map(|(_, n)| *n), Some(2));
        assert_eq!(histogram.count, 3);
        assert!((histogram.sum - 1000.75).abs() < 1e-9);
    }

    #[test]
    fn models_past_the_cap_are_counted_as_other() {
        for i in 0..MAX_MODELS + 3 {
            update(&format!("cap-test-{i}"), |stats| stats.retries += 1);
        }
        let snapshot = snapshot();
        assert!(snapshot.len() <= MAX_MODELS + 1);
        assert!(snapshot.get("other").is_some_and(|s| s.retries >= 3));
    }
}
