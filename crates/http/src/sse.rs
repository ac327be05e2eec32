//! Server-Sent Events: one stream per session, resumable by the log's
//! sequence, and one for every session.
//!
//! A session's stream sends each committed record as a `record` event
//! whose id is its sequence number (the first record is 1), so a watcher
//! that reconnects with `Last-Event-ID` (or `?after=`) gets exactly the
//! records it missed. Besides records it sends `todos` (the whole plan,
//! when a record changed it), `status` (when the session starts or stops
//! running), `approvals` (the calls waiting for an answer, when they
//! change) and `delta` (text as a model running here streams it); these
//! carry no id: they are state, sent again on reconnect.
//!
//! The streams read the store, as `pod show --follow` does: it works on
//! both stores and across machines, and writers pay nothing for watchers.
//! Watchers pay once, not each: a session's streams share one reader
//! ([`super::tail`]), and the list's streams share another
//! ([`super::listing`]).

use super::api::{resolve, store_error, AppState};
use super::error::ApiError;
use super::listing::Board;
use super::tail::{Counted, Frame, Subscription};
use axum::extract::rejection::QueryRejection;
use axum::extract::{Path, Query, State};
use axum::http::HeaderMap;
use axum::response::sse::{Event, KeepAlive, Sse};
use futures_util::Stream;
use pod::log::LogRecord;
use pod::PodError;
use serde::Deserialize;
use serde_json::json;
use std::collections::{HashSet, VecDeque};
use std::convert::Infallible;
use std::sync::Arc;
use tokio::sync::{broadcast, watch};
use uuid::Uuid;

/// Where a session's stream starts.
#[derive(Deserialize)]
pub struct From {
    /// Records after this sequence number (as `Last-Event-ID`).
    #[serde(default)]
    after: Option<usize>,
}

type EventStream = std::pin::Pin<Box<dyn Stream<Item = Result<Event, Infallible>> + Send>>;
type Events = Sse<axum::response::sse::KeepAliveStream<EventStream>>;

/// What a stream sends next: `None` ends it.
trait Next: Send + 'static {
    fn next(&mut self) -> impl std::future::Future<Output = Option<Event>> + Send;
}

/// The events of `watcher`, pulled as the connection takes them: a slow
/// client holds nothing but its place (no queue of its own).
fn stream(watcher: impl Next) -> Events {
    let stream = futures_util::stream::unfold(watcher, |mut watcher| async move {
        let event = watcher.next().await?;
        Some((Ok(event), watcher))
    });
    let stream: EventStream = Box::pin(stream);
    Sse::new(stream).keep_alive(KeepAlive::default())
}

/// `GET /api/sessions/{id}/events`.
pub async fn session(
    State(app): State<AppState>,
    Path(id): Path<String>,
    from: Result<Query<From>, QueryRejection>,
    headers: HeaderMap,
) -> Result<Events, ApiError> {
    let Query(from) = from.map_err(|e| ApiError::bad_request(format!("bad query: {e}")))?;
    let id = resolve(&app, &id).await?;
    let last = headers
        .get("last-event-id")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<usize>().ok());
    let after = last.or(from.after).unwrap_or(0);
    // Read before the stream starts, so a log that cannot be read is an
    // error, not an empty stream.
    let mut watcher = SessionWatcher {
        frames: None,
        _counted: app.tails.watcher(),
        app,
        id,
        sent: after,
        records: VecDeque::new(),
        state: VecDeque::new(),
    };
    watcher.join().await.map_err(store_error)?;
    Ok(stream(watcher))
}

/// One watcher of a session: what it has sent, what it sends next.
struct SessionWatcher {
    app: AppState,
    id: Uuid,
    /// The last sequence number it sent (or was told the client has).
    sent: usize,
    /// Records to send before the tail's next frames, then state.
    records: VecDeque<LogRecord>,
    state: VecDeque<Frame>,
    frames: Option<broadcast::Receiver<Frame>>,
    _counted: Counted,
}

impl Drop for SessionWatcher {
    /// The connection dropped the stream (or it never started): its tail
    /// ends now if this was its last watcher (the receiver goes first, so
    /// it is not counted).
    fn drop(&mut self) {
        self.frames = None;
        self.app.tails.release(self.id);
    }
}

impl SessionWatcher {
    /// Joins the session's tail: the records after `sent` up to where the
    /// tail is (from the store, unless the tail just read them), then the
    /// state, then the tail's frames.
    async fn join(&mut self) -> Result<(), PodError> {
        let Subscription {
            seq,
            state,
            frames,
            records,
        } = self.app.tails.subscribe(&self.app.shared, self.id).await?;
        let missed = seq.saturating_sub(self.sent);
        let records = match records {
            Some(records) => records.into_iter().skip(self.sent).take(missed).collect(),
            None if missed == 0 => Vec::new(),
            None => {
                let mut records = self.app.store.read_after(self.id, self.sent).await?;
                records.truncate(missed);
                records
            }
        };
        self.records = records.into();
        self.state = state.into();
        self.frames = Some(frames);
        Ok(())
    }
}

impl Next for SessionWatcher {
    async fn next(&mut self) -> Option<Event> {
        loop {
            if self.app.stop.is_cancelled() {
                return None;
            }
            if let Some(record) = self.records.pop_front() {
                self.sent += 1;
                return Some(event(&Frame::record(self.sent, &record)));
            }
            if let Some(frame) = self.state.pop_front() {
                return Some(event(&frame));
            }
            let frames = self.frames.as_mut()?;
            let frame = tokio::select! {
                frame = frames.recv() => frame,
                _ = self.app.stop.cancelled() => return None,
            };
            match frame {
                Ok(frame) => {
                    if let Some(seq) = frame.seq {
                        if seq <= self.sent {
                            continue;
                        }
                        self.sent = seq;
                    }
                    return Some(event(&frame));
                }
                // Too far behind for the tail to keep what it missed: read
                // it from the store, as a reconnection would.
                Err(broadcast::error::RecvError::Lagged(missed)) => {
                    tracing::debug!(session = %self.id, missed, "a slow watcher catches up from the log");
                    self.app.tails.resynced();
                    if let Err(err) = self.join().await {
                        tracing::debug!(session = %self.id, %err, "session stream ended");
                        return None;
                    }
                }
                // The tail ended (the store failed, or the server stops).
                Err(broadcast::error::RecvError::Closed) => return None,
            }
        }
    }
}

fn event(frame: &Frame) -> Event {
    let event = Event::default().event(frame.name).data(&*frame.data);
    match frame.seq {
        Some(seq) => event.id(seq.to_string()),
        None => event,
    }
}

fn json_event(name: &str, data: &serde_json::Value) -> Event {
    Event::default().event(name).data(data.to_string())
}

/// `GET /api/events`: every session's summary when it changes (all of
/// them first), `removed` when one is deleted, and the waiting approvals
/// when they change. After the first full pass (every session, then the
/// approvals) comes one `ready` event: `{"server", "now"}` (who serves,
/// and the server's clock, for relative times): a client that reconnects
/// drops the sessions it knew that the pass did not name.
pub async fn all(State(app): State<AppState>) -> Events {
    let board = app.listing.subscribe(&app.shared);
    stream(ListWatcher {
        _counted: app.listing.watcher(),
        app,
        board: Some(board),
        at: 0,
        known: HashSet::new(),
        ready: false,
        queue: VecDeque::new(),
    })
}

/// One watcher of the list: the version of the board it sent last and the
/// sessions it named.
struct ListWatcher {
    app: AppState,
    // `None` only while it is dropped.
    board: Option<watch::Receiver<Arc<Board>>>,
    at: u64,
    known: HashSet<Uuid>,
    ready: bool,
    queue: VecDeque<Event>,
    _counted: Counted,
}

impl Drop for ListWatcher {
    /// The connection dropped the stream: the listing ends now if this was
    /// its last watcher (the receiver goes first, so it is not counted).
    fn drop(&mut self) {
        if self.board.take().is_some() {
            self.app.listing.release();
        }
    }
}

impl ListWatcher {
    /// Queues what changed on `board` since the version it sent.
    fn catch_up(&mut self, board: &Board) {
        let gone: Vec<Uuid> = self
            .known
            .iter()
            .filter(|id| !board.ids.contains(id))
            .copied()
            .collect();
        for id in gone {
            self.known.remove(&id);
            self.queue
                .push_back(json_event("removed", &json!({ "id": id })));
        }
        for row in board.rows.iter().filter(|row| row.version > self.at) {
            self.known.insert(row.id);
            self.queue
                .push_back(Event::default().event("session").data(&*row.data));
        }
        let (version, approvals) = &board.approvals;
        if *version > self.at {
            self.queue
                .push_back(Event::default().event("approvals").data(&**approvals));
        }
        if !std::mem::replace(&mut self.ready, true) {
            self.queue.push_back(json_event(
                "ready",
                &json!({ "server": self.app.server, "now": chrono::Utc::now() }),
            ));
        }
        self.at = board.version;
    }
}

impl Next for ListWatcher {
    async fn next(&mut self) -> Option<Event> {
        loop {
            if self.app.stop.is_cancelled() {
                return None;
            }
            if let Some(event) = self.queue.pop_front() {
                return Some(event);
            }
            let receiver = self.board.as_mut()?;
            let board = Arc::clone(&receiver.borrow_and_update());
            if board.ready && (board.version > self.at || !self.ready) {
                self.catch_up(&board);
                continue;
            }
            tokio::select! {
                changed = receiver.changed() => changed.ok()?,
                _ = self.app.stop.cancelled() => return None,
            }
        }
    }
}
