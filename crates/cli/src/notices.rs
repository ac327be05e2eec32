//! What the libraries log that a person at the terminal should read, said
//! once in words: a model request that failed and will be tried again.
//!
//! Without `-v` (or `RUST_LOG`) the log shows errors only; a retry, a
//! warning in the log, would leave the screen silent for the length of the
//! backoff. This layer turns those log events into notices the driver
//! prints through the output ([`crate::output::Output::note`]), above a
//! live status line. With the log on stderr at warning level the log line
//! says it, with its details, and no notice is made.

use parking_lot::Mutex;
use std::fmt::Write as _;
use std::sync::atomic::{AtomicBool, Ordering};
use tokio::sync::mpsc::{unbounded_channel, UnboundedReceiver, UnboundedSender};
use tracing::field::{Field, Visit};
use tracing::{Event, Metadata, Subscriber};
use tracing_subscriber::filter::FilterFn;
use tracing_subscriber::layer::{Context, Layer};

/// The target of the providers' retry events.
const RETRY_TARGET: &str = "pod_providers::retry";

/// Notices not yet shown; taken by the session being driven.
static WAITING: Mutex<Option<UnboundedReceiver<String>>> = Mutex::new(None);

/// Whether someone reads the notices: a process that drives no session
/// (`pod serve`, `pod acp`) makes none, so none pile up.
static READ: AtomicBool = AtomicBool::new(false);

/// The layer to install, and the place its notices wait.
pub fn layer() -> Notices {
    let (tx, rx) = unbounded_channel();
    *WAITING.lock() = Some(rx);
    Notices(tx)
}

/// The notices of this process, if a layer was installed and nobody else
/// reads them; hand them back with [`give_back`].
pub fn take() -> Option<UnboundedReceiver<String>> {
    let taken = WAITING.lock().take();
    READ.store(taken.is_some(), Ordering::Release);
    taken
}

/// Returns the receiver [`take`] gave.
pub fn give_back(notices: Option<UnboundedReceiver<String>>) {
    READ.store(false, Ordering::Release);
    if let Some(mut rx) = notices {
        // What came too late for the session that was driven is dropped.
        while rx.try_recv().is_ok() {}
        *WAITING.lock() = Some(rx);
    }
}

/// A `tracing` layer that makes notices of retry events.
pub struct Notices(UnboundedSender<String>);

impl<S: Subscriber> Layer<S> for Notices {
    fn on_event(&self, event: &Event<'_>, _ctx: Context<'_, S>) {
        if !wanted(event.metadata()) || !READ.load(Ordering::Acquire) {
            return;
        }
        let mut retry = Retry::default();
        event.record(&mut retry);
        // Nobody reading (no session driven) is not an error.
        let _ = self.0.send(retry.line());
    }
}

/// The layer's own filter: it sees retry events only. A per-layer filter,
/// so that the other layers' events are not disabled by its lack of
/// interest.
pub fn only_retries() -> FilterFn {
    tracing_subscriber::filter::filter_fn(wanted)
}

fn wanted(metadata: &Metadata<'_>) -> bool {
    metadata.is_event() && metadata.target() == RETRY_TARGET
}

/// The fields of a retry event.
#[derive(Default)]
struct Retry {
    attempt: Option<u64>,
    wait_ms: Option<u64>,
    error: String,
}

impl Retry {
    fn line(&self) -> String {
        // The first line is the gist; the rest is for -v.
        let error = crate::render::first_line(self.error.lines().next().unwrap_or(""), 100);
        let mut line = format!("↻ the model request failed ({error})");
        if let Some(ms) = self.wait_ms {
            let _ = write!(line, "; trying again in {}", seconds(ms));
        }
        if let Some(attempt) = self.attempt {
            let _ = write!(line, " (attempt {} of this request)", attempt + 1);
        }
        line
    }
}

fn seconds(ms: u64) -> String {
    match ms {
        0..=999 => format!("{ms} ms"),
        _ => format!("{:.1} s", ms as f64 / 1000.0),
    }
}

impl Visit for Retry {
    fn record_u64(&mut self, field: &Field, value: u64) {
        match field.name() {
            "attempt" => self.attempt = Some(value),
            "wait_ms" => self.wait_ms = Some(value),
            _ => {}
        }
    }

    fn record_i64(&mut self, field: &Field, value: i64) {
        if let Ok(value) = u64::try_from(value) {
            self.record_u64(field, value);
        }
    }

    fn record_str(&mut self, field: &Field, value: &str) {
        if field.name() == "error" {
            self.error = value.to_string();
        }
    }

    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        if field.name() == "error" {
            self.error = format!("{value:?}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_retry_reads_as_one_line() {
        let retry = Retry {
            attempt: Some(1),
            wait_ms: Some(2_500),
            error: "provider returned HTTP 429: rate limited\nmore detail".into(),
        };
        assert_eq!(
            retry.line(),
            "↻ the model request failed (provider returned HTTP 429: rate limited); \
             trying again in 2.5 s (attempt 2 of this request)"
        );
        let short = Retry {
            attempt: None,
            wait_ms: Some(40),
            error: "reset".into(),
        };
        assert_eq!(
            short.line(),
            "↻ the model request failed (reset); trying again in 40 ms"
        );
    }
}
