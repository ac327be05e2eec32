//! `GET /v1/sessions/{id}/events/stream`: the session's events over SSE,
//! from when the client connected (or after `Last-Event-ID`), and with
//! `event_deltas=agent.message` a preview of each answer's text as the
//! model streams it (`event_start`, then `event_delta`s, concluded by the
//! `agent.message` with the same id).
//!
//! A stream reads the session's log once, then follows the session's tail
//! (the reader the native stream shares), which publishes each record as
//! it is written: the records are kept here and translated again in
//! memory ([`super::events::translate`]), so a wake-up costs no read of the
//! log. The log is read again only when the stream cannot follow the tail
//! (it fell behind, the tail started past what was read, or there is no
//! tail yet).

use super::error::Error;
use super::events::{translate, Seen};
use super::{query_pairs, sessions, Managed};
use axum::extract::{Path, RawQuery, State};
use axum::http::HeaderMap;
use axum::response::sse::{Event, KeepAlive, Sse};
use futures_util::Stream;
use pod::log::LogRecord;
use serde_json::{json, Value};
use std::collections::VecDeque;
use std::convert::Infallible;
use tokio::sync::broadcast::error::RecvError;
use uuid::Uuid;

type EventStream = std::pin::Pin<Box<dyn Stream<Item = Result<Event, Infallible>> + Send>>;

/// The event types whose previews a stream may ask for; pod streams
/// `agent.message`'s text and has no `agent.thinking` events.
const PREVIEWS: [&str; 2] = ["agent.message", "agent.thinking"];

/// `GET /v1/sessions/{id}/events/stream`: the events after the client
/// connected (or after `Last-Event-ID`), as `event: TYPE`, `id: ID`,
/// `data: JSON`.
pub(crate) async fn stream(
    State(m): State<Managed>,
    Path(id): Path<String>,
    RawQuery(query): RawQuery,
    headers: HeaderMap,
) -> Result<Sse<axum::response::sse::KeepAliveStream<EventStream>>, Error> {
    let mut previews = false;
    for (key, value) in query_pairs(query.as_deref()) {
        if key == "event_deltas" || key == "event_deltas[]" {
            if !PREVIEWS.contains(&value.as_str()) {
                return Err(Error::invalid(format!(
                    "event_deltas takes agent.message or agent.thinking, not {value:?}"
                )));
            }
            previews |= value == "agent.message";
        }
    }
    let session = sessions::get(&m, &id).await?;
    // Whether it runs first: once it does not, the records read next hold
    // everything it did.
    let idle = !sessions::running(&m, session.id).await;
    let records = sessions::records(&m, session.id).await?;
    let after_answer = ends_with_answer(&records);
    let mut watcher = Watcher {
        _counted: m.app.tails.watcher(),
        m,
        id: session.id,
        records,
        sent: 0,
        queue: VecDeque::new(),
        frames: None,
        previews,
        preview: None,
        after_answer,
        idle_read: idle,
    };
    let events = watcher.translated().await?;
    let last = headers
        .get("last-event-id")
        .and_then(|v| v.to_str().ok())
        .map(str::trim);
    watcher.sent = match last {
        Some(last) => events
            .iter()
            .position(|e| e["id"] == last)
            .map(|at| at + 1)
            .ok_or_else(|| {
                Error::invalid(format!("Last-Event-ID {last} is no event of this session"))
            })?,
        None => events.len(),
    };
    watcher.queue = events
        .into_iter()
        .skip(watcher.sent)
        .map(Outgoing::from)
        .collect();
    let stream = futures_util::stream::unfold(watcher, |mut watcher| async move {
        let event = watcher.next().await?;
        Some((Ok(event), watcher))
    });
    let stream: EventStream = Box::pin(stream);
    Ok(Sse::new(stream).keep_alive(KeepAlive::default()))
}

/// How long a stream waits for a sign of change before it looks anyway:
/// the tail wakes it on every record and status change; this only bounds
/// what a missed wake-up costs.
const RECHECK: std::time::Duration = std::time::Duration::from_secs(2);

/// One stream: the session's records as far as it knows them, how many of
/// their events it sent, and what it sends next.
struct Watcher {
    m: Managed,
    id: Uuid,
    records: Vec<LogRecord>,
    sent: usize,
    /// Events to send; a preview is not one of the `sent`.
    queue: VecDeque<Outgoing>,
    // The session's tail, once its log exists.
    frames: Option<tokio::sync::broadcast::Receiver<crate::tail::Frame>>,
    /// Whether the client asked for `agent.message` previews.
    previews: bool,
    /// The id of the `agent.message` being previewed, and the record count
    /// it was opened at (a record written since concludes it).
    preview: Option<(String, usize)>,
    /// The last record known is an answer: text relayed now was streamed
    /// before it was written (the tail relays text between its reads of
    /// the log) and belongs to it, not to the next one.
    after_answer: bool,
    /// The records were read from the log since the session was last seen
    /// running, and nothing came since: they hold all it did.
    idle_read: bool,
    _counted: crate::tail::Counted,
}

/// An event of the session (counted in `sent`), or a preview.
enum Outgoing {
    Event(Value),
    Preview(Value),
}

impl From<Value> for Outgoing {
    fn from(event: Value) -> Self {
        Outgoing::Event(event)
    }
}

/// What woke a stream.
enum Woke {
    /// Records up to the tail's are known here: translate them again.
    Records,
    /// A piece of streamed text.
    Text(String),
    /// The records here may be behind: read the log.
    Behind,
}

impl Drop for Watcher {
    fn drop(&mut self) {
        if self.frames.take().is_some() {
            self.m.app.tails.release(self.id);
        }
    }
}

impl Watcher {
    async fn next(&mut self) -> Option<Event> {
        loop {
            if self.m.app.stop.is_cancelled() {
                return None;
            }
            match self.queue.pop_front() {
                Some(Outgoing::Event(event)) => {
                    self.sent += 1;
                    let kind = event["type"].as_str().unwrap_or("message").to_string();
                    let id = event["id"].as_str().unwrap_or_default().to_string();
                    return Some(Event::default().event(kind).id(id).data(event.to_string()));
                }
                // No SSE id: a client that reconnects goes on after the
                // last event, and previews are never history.
                Some(Outgoing::Preview(preview)) => {
                    let kind = preview["type"].as_str().unwrap_or("message").to_string();
                    return Some(Event::default().event(kind).data(preview.to_string()));
                }
                None => {}
            }
            match self.wait().await {
                Woke::Text(text) => {
                    self.preview_text(text);
                    continue;
                }
                Woke::Behind => match sessions::records(&self.m, self.id).await {
                    Ok(records) => {
                        self.m.app.tails.resynced();
                        self.after_answer = ends_with_answer(&records);
                        self.records = records;
                    }
                    Err(err) => {
                        tracing::debug!(session = %self.id, error = %err, "Managed Agents stream ended");
                        return None;
                    }
                },
                Woke::Records => {}
            }
            let events = match self.translated().await {
                Ok(events) => events,
                Err(err) => {
                    tracing::debug!(session = %self.id, error = %err, "Managed Agents stream ended");
                    return None;
                }
            };
            // A turn's idle waits while a new prompt starts (the session
            // runs before its message is in the log): only what lies past
            // what was sent is new.
            self.queue = events
                .into_iter()
                .skip(self.sent)
                .map(Outgoing::from)
                .collect();
        }
    }

    /// The session's events as of the records known here.
    async fn translated(&mut self) -> Result<Vec<Value>, Error> {
        let running = sessions::running(&self.m, self.id).await;
        // A session nothing runs ends its turn with an idle, which must
        // come after everything it did: the tail may not have published
        // its last records yet, so they are read from the log (once, until
        // it runs again or a record comes).
        if running {
            self.idle_read = false;
        } else if !self.idle_read {
            self.records = sessions::records(&self.m, self.id).await?;
            self.after_answer = ends_with_answer(&self.records);
            self.idle_read = true;
        }
        let session = sessions::get(&self.m, &sessions::public_id(self.id)).await?;
        let seen = Seen {
            outcome: session.outcome.as_ref(),
            custom_tools: &session.agent.custom_tools,
            mcp_servers: &session.agent.mcp_servers,
        };
        Ok(translate(&self.records, running, seen))
    }

    /// Queues `text` as a preview of the next `agent.message`, opening the
    /// preview first: its id is the one the answer's record will have
    /// (the next record's).
    fn preview_text(&mut self, text: String) {
        if !self.previews || text.is_empty() || self.after_answer {
            return;
        }
        let next = self.records.len() + 1;
        let id = match &self.preview {
            Some((id, at)) if *at == self.records.len() => id.clone(),
            _ => {
                let id = format!("sevt_{next:08}");
                self.preview = Some((id.clone(), self.records.len()));
                self.queue.push_back(Outgoing::Preview(json!({
                    "type": "event_start",
                    "event": {"type": "agent.message", "id": id},
                })));
                id
            }
        };
        self.queue.push_back(Outgoing::Preview(json!({
            "type": "event_delta",
            "event_id": id,
            "delta": {"type": "content_delta", "index": 0, "content": {"type": "text", "text": text}},
        })));
    }

    /// Until something may have changed: a frame of the session's tail,
    /// its first message (before its log exists), or [`RECHECK`].
    async fn wait(&mut self) -> Woke {
        if self.frames.is_none() {
            let shared = &self.m.app.shared;
            // No log yet: the first message has not started it.
            if let Ok(subscription) = self.m.app.tails.subscribe(shared, self.id).await {
                self.frames = Some(subscription.frames);
                match subscription.records {
                    // It started the tail with a fresh read.
                    Some(records) => {
                        self.after_answer = ends_with_answer(&records);
                        self.records = records;
                    }
                    // The tail is past what was read here.
                    None if subscription.seq > self.records.len() => return Woke::Behind,
                    None => {}
                }
            }
        }
        let started = self.m.started.clone();
        let stop = self.m.app.stop.clone();
        let Some(frames) = self.frames.as_mut() else {
            tokio::select! {
                _ = started.notified() => {}
                _ = tokio::time::sleep(RECHECK) => {}
                _ = stop.cancelled() => {}
            }
            return Woke::Behind;
        };
        let frame = tokio::select! {
            frame = frames.recv() => frame,
            _ = tokio::time::sleep(RECHECK) => return Woke::Records,
            _ = stop.cancelled() => return Woke::Records,
        };
        match frame {
            Ok(frame) => match (frame.name, frame.seq) {
                ("record", Some(seq)) => self.follow(seq, &frame.data),
                ("delta", _) => {
                    let delta: Value = serde_json::from_str(&frame.data).unwrap_or_default();
                    match (delta["kind"].as_str(), delta["text"].as_str()) {
                        (Some("text"), Some(text)) => Woke::Text(text.to_string()),
                        _ => Woke::Records,
                    }
                }
                // The status and the approvals: whether it runs may have
                // changed.
                _ => Woke::Records,
            },
            Err(RecvError::Lagged(_)) => Woke::Behind,
            // The tail ended (its store failed): the next wait joins a
            // new one, after a pause, instead of spinning on a closed
            // channel.
            Err(RecvError::Closed) => {
                self.frames = None;
                tokio::time::sleep(RECHECK).await;
                Woke::Behind
            }
        }
    }

    /// Record `seq` as the tail published it: the next one is kept; one
    /// already known is skipped; a gap (or a record that does not parse)
    /// sends the stream back to the log.
    fn follow(&mut self, seq: usize, data: &str) -> Woke {
        if seq <= self.records.len() {
            return Woke::Records;
        }
        if seq > self.records.len() + 1 {
            return Woke::Behind;
        }
        let parsed = serde_json::from_str::<Value>(data)
            .ok()
            .and_then(|frame| serde_json::from_value::<LogRecord>(frame["record"].clone()).ok());
        match parsed {
            Some(record) => {
                self.idle_read = false;
                self.records.push(record);
                self.after_answer = ends_with_answer(&self.records);
                Woke::Records
            }
            None => Woke::Behind,
        }
    }
}

/// Whether the last of `records` is an answer.
fn ends_with_answer(records: &[LogRecord]) -> bool {
    matches!(
        records.last(),
        Some(LogRecord::Item(item)) if matches!(item.kind, pod::ItemKind::Assistant { .. })
    )
}
