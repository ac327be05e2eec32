//! Runs a wire decoder over an SSE stream, producing the provider's
//! [`EventStream`].

use crate::http::SseStream;
use crate::sse::SseEvent;
use futures_util::StreamExt;
use pod_llm::{EventStream, ProviderError, StreamEvent};
use std::collections::VecDeque;

/// What each wire format implements: a pure state machine from SSE events to
/// [`StreamEvent`]s, tested without a network.
pub(crate) trait WireDecoder: Send + 'static {
    /// Folds one SSE event in.
    fn on_event(&mut self, event: SseEvent) -> Result<Vec<StreamEvent>, ProviderError>;
    /// Whether the server said it is done (`[DONE]`, `message_stop`): no
    /// more bytes are read after that.
    fn is_done(&self) -> bool;
    /// Whether the finish information arrived; a stream that ends or goes
    /// idle after it is complete.
    fn has_finished(&self) -> bool;
    /// The stream ended: flush what is held back, or fail if it ended
    /// before its finish information (a dropped connection).
    fn on_end(&mut self) -> Result<Vec<StreamEvent>, ProviderError>;
}

struct State<D> {
    sse: SseStream,
    decoder: D,
    ready: VecDeque<StreamEvent>,
    ended: bool,
}

/// The events `decoder` makes of `sse`. The stream ends after the first
/// error.
pub(crate) fn drive<D: WireDecoder>(sse: SseStream, decoder: D) -> EventStream {
    let state = State {
        sse,
        decoder,
        ready: VecDeque::new(),
        ended: false,
    };
    futures_util::stream::unfold(state, |mut state| async move {
        loop {
            if let Some(event) = state.ready.pop_front() {
                return Some((Ok(event), state));
            }
            if state.ended {
                return None;
            }
            let result = match state.sse.next().await {
                Some(Ok(event)) => state.decoder.on_event(event).and_then(|events| {
                    state.ready.extend(events);
                    if state.decoder.is_done() {
                        state.ended = true;
                        state.decoder.on_end()
                    } else {
                        Ok(Vec::new())
                    }
                }),
                Some(Err(ProviderError::IdleTimeout(_))) if state.decoder.has_finished() => {
                    state.ended = true;
                    state.decoder.on_end()
                }
                Some(Err(err)) => Err(err),
                None => {
                    state.ended = true;
                    state.decoder.on_end()
                }
            };
            match result {
                Ok(events) => state.ready.extend(events),
                Err(err) => {
                    // Events decoded before the error are dropped with it:
                    // the caller discards a failed response whole anyway.
                    state.ready.clear();
                    state.ended = true;
                    return Some((Err(err), state));
                }
            }
        }
    })
    .boxed()
}

/// A malformed-data error quoting at most the start of `data`: enough to
/// recognise the server's output without flooding logs.
pub(crate) fn malformed(what: &str, err: &serde_json::Error, data: &str) -> ProviderError {
    const QUOTED_CHARS: usize = 200;
    let mut quoted: String = data.chars().take(QUOTED_CHARS).collect();
    if quoted.len() < data.len() {
        quoted.push('…');
    }
    ProviderError::Malformed(format!("bad {what} ({err}): {quoted}"))
}
