//! Server-Sent Events: one stream per session, resumable by the log's
//! sequence, and one for every session.
//!
//! A session's stream sends each committed record as a `record` event
//! whose id is its sequence number (the first record is 1), so a watcher
//! that reconnects with `Last-Event-ID` (or `?after=`) gets exactly the
//! records it missed. Besides records it sends `todos` (the whole plan,
//! when a record changed it), `status` (when the session starts or stops
//! running) and `approvals` (the calls waiting for an answer, when they
//! change); these carry no id: they are state, sent again on reconnect.
//!
//! The streams poll the store (every quarter second for a session, every
//! second for the list), as `pod show --follow` does: it works on both
//! stores and across machines, and writers pay nothing for watchers.

use super::api::{resolve, store_error, todos_of, AppState, Row};
use super::error::ApiError;
use super::runner::Delta;
use axum::extract::rejection::QueryRejection;
use axum::extract::{Path, Query, State};
use axum::http::HeaderMap;
use axum::response::sse::{Event, KeepAlive, Sse};
use futures_util::Stream;
use pod::log::LogRecord;
use serde::Deserialize;
use serde_json::json;
use std::collections::HashMap;
use std::convert::Infallible;
use std::time::Duration;
use tokio::sync::{broadcast, mpsc};
use uuid::Uuid;

const SESSION_POLL: Duration = Duration::from_millis(250);
const LIST_POLL: Duration = Duration::from_secs(1);
// Events waiting for a slow watcher; past that the poller waits for it
// (a watcher never makes the server hold more than this per stream).
const BUFFER: usize = 256;

/// Where a session's stream starts.
#[derive(Deserialize)]
pub struct From {
    /// Records after this sequence number (as `Last-Event-ID`).
    #[serde(default)]
    after: Option<usize>,
}

type EventStream = std::pin::Pin<Box<dyn Stream<Item = Result<Event, Infallible>> + Send>>;
type Events = Sse<axum::response::sse::KeepAliveStream<EventStream>>;

fn stream(mut rx: mpsc::Receiver<Event>) -> Events {
    let stream = futures_util::stream::poll_fn(move |cx| rx.poll_recv(cx).map(|e| e.map(Ok)));
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
    // Read before the stream starts, so a missing session is a 404.
    let records = app.store.read(id).await.map_err(store_error)?.records;
    let (tx, rx) = mpsc::channel(BUFFER);
    tokio::spawn(async move {
        if let Err(err) = watch_session(app, id, after, records, tx).await {
            tracing::debug!(session = %id, %err, "session stream ended");
        }
    });
    Ok(stream(rx))
}

async fn watch_session(
    app: AppState,
    id: Uuid,
    after: usize,
    mut records: Vec<LogRecord>,
    tx: mpsc::Sender<Event>,
) -> Result<(), String> {
    let send = |event: Event| {
        let tx = tx.clone();
        async move { tx.send(event).await.map_err(|_| "watcher gone".to_string()) }
    };
    // Subscribed before anything is sent: a watcher that has seen its
    // first event misses none of the text streamed after it.
    let mut deltas = Some(app.runner.deltas());
    for (index, record) in records.iter().enumerate().skip(after) {
        send(record_event(index + 1, record)).await?;
    }
    send(json_event("todos", &json!({ "todos": todos_of(&records) }))).await?;
    let mut status = None;
    let mut approvals = None;
    loop {
        // Who holds it first, then the records: once it is not running,
        // everything it committed is in the records read next, and they
        // are sent before the status that says it stopped.
        let stat = app.store.stat(id).await.map_err(|e| e.to_string())?;
        let live = app.runner.is_live(id);
        let new = app
            .store
            .read_after(id, records.len())
            .await
            .map_err(|e| e.to_string())?;
        if !new.is_empty() {
            // Text streamed before these records goes out before them.
            while let Some(Ok(delta)) = deltas.as_mut().map(|d| d.try_recv()) {
                if delta.session_id == id {
                    send(delta_event(&delta)).await?;
                }
            }
            let changes_plan = new.iter().any(|r| {
                matches!(r, LogRecord::Compaction(_))
                    || matches!(r, LogRecord::Item(item) if matches!(item.kind, pod::ItemKind::ToolResult { .. }))
            });
            for record in new {
                records.push(record);
                send(record_event(records.len(), &records[records.len() - 1])).await?;
            }
            if changes_plan {
                send(json_event("todos", &json!({ "todos": todos_of(&records) }))).await?;
            }
        }
        let now = json!({
            "holder": stat.holder,
            "queued": stat.queued,
            "live": live,
        });
        if status.as_ref() != Some(&now) {
            send(json_event("status", &now)).await?;
            status = Some(now);
        }
        let waiting = super::api::waiting(&app, Some(id))
            .await
            .unwrap_or_else(|_| {
                let live = app.runner.approvals().into_iter();
                live.filter(|a| a.session_id == id).collect()
            });
        let ids: Vec<Uuid> = waiting.iter().map(|a| a.id).collect();
        if approvals.as_ref() != Some(&ids) {
            send(json_event("approvals", &json!({ "approvals": waiting }))).await?;
            approvals = Some(ids);
        }
        let poll = tokio::time::sleep(SESSION_POLL);
        tokio::pin!(poll);
        loop {
            tokio::select! {
                _ = &mut poll => break,
                _ = tx.closed() => return Ok(()),
                _ = app.stop.cancelled() => return Ok(()),
                delta = next_delta(&mut deltas) => match delta {
                    Ok(delta) if delta.session_id == id => send(delta_event(&delta)).await?,
                    Ok(_) | Err(broadcast::error::RecvError::Lagged(_)) => {}
                    // The runner is gone with the server; polling goes on.
                    Err(broadcast::error::RecvError::Closed) => deltas = None,
                },
            }
        }
    }
}

/// The next streamed piece, or never once the runner's channel closed.
async fn next_delta(
    deltas: &mut Option<broadcast::Receiver<Delta>>,
) -> Result<Delta, broadcast::error::RecvError> {
    match deltas {
        Some(receiver) => receiver.recv().await,
        None => std::future::pending().await,
    }
}

fn delta_event(delta: &Delta) -> Event {
    json_event("delta", &json!({ "kind": delta.kind, "text": delta.text }))
}

fn record_event(seq: usize, record: &LogRecord) -> Event {
    json_event("record", &json!({ "seq": seq, "record": record })).id(seq.to_string())
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
    let (tx, rx) = mpsc::channel(BUFFER);
    tokio::spawn(async move {
        let mut seen: HashMap<Uuid, String> = HashMap::new();
        let mut approvals = None;
        let mut ready = false;
        loop {
            match app.summaries.all(app.store.as_ref()).await {
                Ok(entries) => {
                    // Sessions removed since the last look.
                    let now: std::collections::HashSet<Uuid> =
                        entries.iter().map(|e| e.summary.id).collect();
                    let gone: Vec<Uuid> = seen
                        .keys()
                        .filter(|id| !now.contains(id))
                        .copied()
                        .collect();
                    for id in gone {
                        seen.remove(&id);
                        let event = json_event("removed", &json!({ "id": id }));
                        if tx.send(event).await.is_err() {
                            return;
                        }
                    }
                    for entry in entries {
                        let row = Row {
                            live: app.runner.is_live(entry.summary.id),
                            summary: entry.summary,
                        };
                        let text = serde_json::to_string(&row).unwrap_or_default();
                        if seen.get(&row.summary.id) != Some(&text) {
                            seen.insert(row.summary.id, text.clone());
                            if tx
                                .send(Event::default().event("session").data(text))
                                .await
                                .is_err()
                            {
                                return;
                            }
                        }
                    }
                }
                Err(err) => tracing::warn!(err = %format!("{err:#}"), "cannot list sessions"),
            }
            let waiting = super::api::waiting(&app, None)
                .await
                .unwrap_or_else(|_| app.runner.approvals());
            let ids: Vec<Uuid> = waiting.iter().map(|a| a.id).collect();
            if approvals.as_ref() != Some(&ids) {
                let event = json_event("approvals", &json!({ "approvals": waiting }));
                if tx.send(event).await.is_err() {
                    return;
                }
                approvals = Some(ids);
            }
            if !std::mem::replace(&mut ready, true) {
                let event = json_event(
                    "ready",
                    &json!({ "server": app.server, "now": chrono::Utc::now() }),
                );
                if tx.send(event).await.is_err() {
                    return;
                }
            }
            tokio::select! {
                _ = tokio::time::sleep(LIST_POLL) => {}
                _ = tx.closed() => return,
                _ = app.stop.cancelled() => return,
            }
        }
    });
    stream(rx)
}
