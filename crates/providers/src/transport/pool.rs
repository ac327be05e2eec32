//! The transport's own HTTP/2 connections: per origin a list of
//! connections, each carrying at most as many streams as its server allows
//! (`SETTINGS_MAX_CONCURRENT_STREAMS`), and another connection opened when
//! every one is full, so an answer streaming for minutes never waits for
//! another to end. hyper's client opens one HTTP/2 connection per host
//! and queues streams past the server's limit instead
//! (tickets/providers.md).
//!
//! A stream counts against its connection from the moment it is taken
//! until its response body ends or is dropped ([`Slot`]). A connection
//! that ends, fails or says it is going away takes no new streams and
//! leaves the list; one with no streams for [`IDLE_CONNECTION`] is closed.

use super::response::{H2Body, ResponseBody};
use super::IDLE_CONNECTION;
use crate::body::Body;
use bytes::Bytes;
use futures_util::future::BoxFuture;
use http::{Request, Response};
use parking_lot::Mutex;
use std::collections::HashMap;
use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Weak};
use tokio::time::Instant;

/// Streams put on one connection at most, however many its server
/// allows: a server that sets no limit (or a very high one) would
/// otherwise get every request of the process on one TCP connection,
/// where one lost packet stalls them all. 100 is the least RFC 9113 asks
/// servers to allow and what most send.
const MAX_STREAMS_PER_CONNECTION: usize = 100;

/// The process's HTTP/2 connections to models that are open, and the
/// streams on them: what [`http2_in_use`] reports.
static CONNECTIONS: AtomicUsize = AtomicUsize::new(0);
static STREAMS: AtomicUsize = AtomicUsize::new(0);

/// What the process's model connections over HTTP/2 hold now, every
/// transport together.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Http2InUse {
    /// Connections open (each one descriptor).
    pub connections: usize,
    /// Requests in flight on them, from the request's start until its
    /// answer ends or is dropped.
    pub streams: usize,
}

/// What the process's HTTP/2 model connections hold now: a fleet worker
/// reckons a session waiting on a stream with no descriptor of its own
/// (`pod_fleet::capacity`).
pub fn http2_in_use() -> Http2InUse {
    Http2InUse {
        connections: CONNECTIONS.load(Ordering::Relaxed),
        streams: STREAMS.load(Ordering::Relaxed),
    }
}

/// A connection just made: HTTP/2 (its handle, the task that runs it, and
/// a ping to learn its server's settings before the first stream), or a
/// server that chose HTTP/1.1.
pub(super) enum Opened {
    /// The server speaks HTTP/2.
    Http2 {
        /// Where requests go in.
        send: h2::client::SendRequest<Bytes>,
        /// The connection itself, run by a task of the pool's.
        conn: BoxFuture<'static, ()>,
        /// A round trip that ends after the server's SETTINGS were read
        /// (frames are read in order), so the first streams already
        /// honour its stream limit.
        ping: Option<h2::PingPong>,
    },
    /// The server answered TLS's ALPN with HTTP/1.1, or not at all.
    Http1,
}

/// Where a request goes.
pub(super) enum Checkout {
    /// A place on an HTTP/2 connection.
    Http2(Slot),
    /// The origin speaks HTTP/1.1: hyper's pool.
    Http1,
}

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// The HTTP/2 connections of one transport, by origin (scheme and
/// authority; a transport's proxies are fixed, so the origin also decides
/// the route).
#[derive(Default)]
pub(super) struct Pool {
    /// Held only to find or add an origin's entry, never across an await.
    /// Entries stay for the process's life: a process talks to a handful
    /// of origins.
    origins: Mutex<HashMap<String, Arc<OriginPool>>>,
}

#[derive(Default)]
struct OriginPool {
    /// Held to pick a connection with room, to add one or to take one
    /// out; never across an await.
    conns: Mutex<Vec<Arc<Conn>>>,
    /// One connection is opened at a time per origin: requests that find
    /// every connection full wait for the one being opened (and take its
    /// room) instead of each opening their own, which a thousand sessions
    /// starting at once would do.
    opening: tokio::sync::Mutex<()>,
    /// The server answered ALPN with HTTP/1.1: its requests go to hyper's
    /// pool from now on. Kept for the process's life; a server that starts
    /// offering HTTP/2 is found by the next process.
    http1: AtomicBool,
}

struct Conn {
    send: h2::client::SendRequest<Bytes>,
    /// Streams taken and not yet ended.
    in_flight: AtomicUsize,
    /// Takes no new streams: it ended, failed, or its server refused a
    /// stream or said it is going away.
    retired: AtomicBool,
    /// When a stream last ended, for the idle timeout. Held a moment,
    /// to read or write the instant.
    idle_since: Mutex<Instant>,
}

/// A stream's place on a connection, given back when dropped.
pub(crate) struct Slot {
    conn: Arc<Conn>,
}

impl std::fmt::Debug for Slot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Slot").finish_non_exhaustive()
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        // Before the count falls: the idle check never sees no streams
        // with an older instant.
        *self.conn.idle_since.lock() = Instant::now();
        self.conn.in_flight.fetch_sub(1, Ordering::AcqRel);
        STREAMS.fetch_sub(1, Ordering::Relaxed);
    }
}

impl Drop for Conn {
    fn drop(&mut self) {
        CONNECTIONS.fetch_sub(1, Ordering::Relaxed);
    }
}

impl Conn {
    /// A place for one more stream, if the server allows it.
    fn take(self: &Arc<Self>) -> Option<Slot> {
        if self.retired.load(Ordering::Acquire) {
            return None;
        }
        let limit = self
            .send
            .current_max_send_streams()
            .min(MAX_STREAMS_PER_CONNECTION);
        self.in_flight
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < limit).then_some(n + 1)
            })
            .ok()?;
        STREAMS.fetch_add(1, Ordering::Relaxed);
        Some(Slot {
            conn: Arc::clone(self),
        })
    }

    fn retire(&self) {
        self.retired.store(true, Ordering::Release);
    }
}

impl OriginPool {
    fn take(&self) -> Option<Slot> {
        self.conns.lock().iter().find_map(Conn::take)
    }

    fn remove(&self, conn: &Arc<Conn>) {
        self.conns.lock().retain(|held| !Arc::ptr_eq(held, conn));
    }
}

impl Pool {
    /// A place on a connection to `origin` with room, opening one with
    /// `open` when none has, or word that the origin speaks HTTP/1.1.
    pub async fn checkout<F, Fut>(&self, origin: &str, open: F) -> Result<Checkout, BoxError>
    where
        F: FnOnce() -> Fut,
        Fut: Future<Output = Result<Opened, BoxError>>,
    {
        let entry = Arc::clone(self.origins.lock().entry(origin.to_owned()).or_default());
        if entry.http1.load(Ordering::Acquire) {
            return Ok(Checkout::Http1);
        }
        if let Some(slot) = entry.take() {
            return Ok(Checkout::Http2(slot));
        }
        let _opening = entry.opening.lock().await;
        // Opened by another request while this one waited.
        if entry.http1.load(Ordering::Acquire) {
            return Ok(Checkout::Http1);
        }
        if let Some(slot) = entry.take() {
            return Ok(Checkout::Http2(slot));
        }
        let (send, conn, ping) = match open().await? {
            Opened::Http1 => {
                entry.http1.store(true, Ordering::Release);
                return Ok(Checkout::Http1);
            }
            Opened::Http2 { send, conn, ping } => (send, conn, ping),
        };
        CONNECTIONS.fetch_add(1, Ordering::Relaxed);
        let held = Arc::new(Conn {
            send,
            in_flight: AtomicUsize::new(0),
            retired: AtomicBool::new(false),
            idle_since: Mutex::new(Instant::now()),
        });
        tokio::spawn(run(conn, Arc::clone(&held), Arc::downgrade(&entry)));
        if let Some(mut ping) = ping {
            ping.ping(h2::Ping::opaque()).await?;
        }
        let slot = held
            .take()
            .ok_or("the server allows no streams on a new connection")?;
        entry.conns.lock().push(held);
        Ok(Checkout::Http2(slot))
    }
}

/// Runs a connection until it ends or has been idle for
/// [`IDLE_CONNECTION`], then takes it out of its origin's list.
async fn run(conn: BoxFuture<'static, ()>, held: Arc<Conn>, origin: Weak<OriginPool>) {
    let mut conn = conn;
    loop {
        // Idle since its last stream ended, or busy: look again after a
        // whole idle period.
        let deadline = if held.in_flight.load(Ordering::Acquire) == 0 {
            *held.idle_since.lock() + IDLE_CONNECTION
        } else {
            Instant::now() + IDLE_CONNECTION
        };
        tokio::select! {
            () = &mut conn => break,
            () = tokio::time::sleep_until(deadline) => {
                let Some(origin) = origin.upgrade() else { break };
                // Under the list's lock, where streams are taken: none can
                // be taken between the check and the removal.
                let mut conns = origin.conns.lock();
                let idle = held.in_flight.load(Ordering::Acquire) == 0
                    && held.idle_since.lock().elapsed() >= IDLE_CONNECTION;
                if idle {
                    held.retire();
                    conns.retain(|other| !Arc::ptr_eq(other, &held));
                    tracing::debug!("closing an idle HTTP/2 connection");
                    return;
                }
            }
        }
    }
    held.retire();
    if let Some(origin) = origin.upgrade() {
        origin.remove(&held);
    }
}

/// Why a request sent on an HTTP/2 connection got no response.
pub(super) enum Failure {
    /// The server did not process it (a stream above a GOAWAY's last
    /// stream, `REFUSED_STREAM`, or a connection gone before the request
    /// was sent): it can be sent again.
    Unprocessed(h2::Error),
    /// It may have been processed.
    Failed(h2::Error),
}

/// Sends `head` and `body` on the slot's connection and waits for the
/// response head; the response body holds the slot.
pub(super) async fn send(
    slot: Slot,
    head: Request<()>,
    body: &Body,
) -> Result<Response<ResponseBody>, Failure> {
    let conn = Arc::clone(&slot.conn);
    let failed = |err: h2::Error| {
        if unprocessed(&err) {
            conn.retire();
            Failure::Unprocessed(err)
        } else {
            Failure::Failed(err)
        }
    };
    // Nothing was sent if the connection cannot take a stream.
    let mut send = slot.conn.send.clone().ready().await.map_err(|err| {
        conn.retire();
        Failure::Unprocessed(err)
    })?;
    let pieces = body.pieces();
    let (response, mut stream) = send.send_request(head, pieces.is_empty()).map_err(failed)?;
    // The pieces are shared buffers: handing them all over copies
    // nothing, and h2 sends each as the server's window allows.
    for (at, piece) in pieces.iter().enumerate() {
        stream
            .send_data(piece.clone(), at + 1 == pieces.len())
            .map_err(failed)?;
    }
    let (parts, recv) = response.await.map_err(failed)?.into_parts();
    Ok(Response::from_parts(
        parts,
        ResponseBody::Http2(H2Body::new(recv, slot)),
    ))
}

/// Whether the server said it did not process the stream: RFC 9113 §8.7,
/// a GOAWAY whose last stream is below it (h2 fails only those streams
/// with the GOAWAY, and new streams on that connection) or a
/// `REFUSED_STREAM` reset.
fn unprocessed(err: &h2::Error) -> bool {
    err.is_remote()
        && (err.is_go_away()
            || (err.is_reset() && err.reason() == Some(h2::Reason::REFUSED_STREAM)))
}
