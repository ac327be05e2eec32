//! The connection loop of `pod serve --http`: HTTP/1.1 on hyper with the
//! limits a server left running overnight needs, so that idle, slow or
//! numerous clients cannot starve the operator's own requests.
//!
//! - At most [`Limits::max_connections`] connections are served at once; one
//!   more is answered `503` (JSON) and closed instead of waiting in the
//!   kernel's backlog holding a file descriptor. Connections that have not
//!   shown the token hold at most a quarter of them, the oldest making way
//!   for a new one ([`super::admission`]): strangers cannot starve the
//!   token holder.
//! - A connection must send a request's headers within
//!   [`Limits::header_timeout`], counted from when it opens or from the end of
//!   its previous response (hyper's header-read timer): idle keep-alive
//!   connections and header tricklers are closed.
//! - A request's body must arrive within [`Limits::body_timeout`] and be at
//!   most [`Limits::max_body`] bytes ([`super::guard`]).
//! - On stop, no new connection is accepted and open ones finish their
//!   request (event streams end on their own) for at most [`DRAIN`].

use super::admission::{Admission, Ticket};
use super::config::Limits;
use super::guard;
use axum::Router;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::{GracefulShutdown, Watcher};
use hyper_util::service::TowerToHyperService;
use pod::CancellationToken;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt, ReadBuf};
use tokio::net::{TcpListener, TcpStream};

/// How long open connections get to finish after a stop.
const DRAIN: Duration = Duration::from_secs(5);

/// A pause after a failed accept (out of file descriptors, say), so the
/// loop does not spin while the condition lasts.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(100);

/// The most the parser buffers for one request's head: the guard's own
/// limits (URI and headers, answered in JSON) are far below it, so only a
/// head this large gets the parser's bare 431.
const PARSER_BUFFER: usize = 1024 * 1024;

/// Serves `app` on `listener` until `stop` fires.
pub async fn serve(listener: TcpListener, app: Router, stop: CancellationToken, limits: Limits) {
    let admission = Admission::new(limits.max_connections);
    let graceful = GracefulShutdown::new();
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_timeout)
        .max_buf_size(PARSER_BUFFER)
        .keep_alive(true);
    let builder = Arc::new(builder);
    loop {
        let (stream, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(err) => {
                    tracing::warn!(%err, "accepting a connection failed");
                    tokio::time::sleep(ACCEPT_BACKOFF).await;
                    continue;
                }
            },
            _ = stop.cancelled() => break,
        };
        // Admitted (or refused) at once; served in a task of its own.
        let ticket = admission.admit();
        let (app, builder, watcher) = (app.clone(), Arc::clone(&builder), graceful.watcher());
        tokio::spawn(async move {
            let Some(ticket) = ticket else {
                return refuse_busy(stream).await;
            };
            serve_one(stream, peer, app, &builder, watcher, ticket).await;
        });
    }
    if tokio::time::timeout(DRAIN, graceful.shutdown())
        .await
        .is_err()
    {
        tracing::warn!("connections still open after {DRAIN:?}; closing them");
    }
}

/// Serves one admitted connection until it ends, or until a newer one
/// pushes it out.
async fn serve_one(
    stream: TcpStream,
    peer: std::net::SocketAddr,
    app: Router,
    builder: &hyper::server::conn::http1::Builder,
    watcher: Watcher,
    ticket: Arc<Ticket>,
) {
    // Answers are small and often single writes: send them at once.
    let _ = stream.set_nodelay(true);
    // Each request carries where it came from, and the connection's
    // ticket, which a request with the token promotes.
    let service = TowerToHyperService::new(
        app.layer(axum::Extension(Peer(peer)))
            .layer(axum::Extension(Arc::clone(&ticket))),
    );
    let closing = ticket.closing().clone();
    let io = TokioIo::new(Slotted {
        _ticket: ticket,
        stream,
    });
    let connection = watcher.watch(builder.serve_connection(io, service));
    // Pushed out, an anonymous connection is dropped where it stands: it
    // has shown no token, so nothing of the operator's is cut.
    let ended = tokio::select! {
        ended = connection => ended,
        _ = closing.cancelled() => return,
    };
    if let Err(err) = ended {
        tracing::debug!(%err, "connection ended");
    }
}

/// The address a request came from, for the record of who answered.
#[derive(Debug, Clone, Copy)]
pub struct Peer(pub std::net::SocketAddr);

/// A connection holding its slot: the slot is given back as the socket is
/// dropped, before it closes (fields drop in order), so a client that saw
/// the close finds the slot free.
struct Slotted {
    // Held, never read: dropping it frees the slot.
    _ticket: Arc<Ticket>,
    stream: TcpStream,
}

impl AsyncRead for Slotted {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.stream).poll_read(cx, buf)
    }
}

impl AsyncWrite for Slotted {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.stream).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.stream).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.stream).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.stream).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.stream.is_write_vectored()
    }
}

/// One connection too many: a JSON 503 and the connection closed, written
/// with a short deadline so a client that does not read cannot keep it.
async fn refuse_busy(mut stream: TcpStream) {
    let body =
        guard::error_body("the server is serving as many connections as it allows; retry shortly");
    let response = format!(
        "HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\n\
         content-length: {}\r\nretry-after: 1\r\nconnection: close\r\n\r\n{body}",
        body.len()
    );
    let write = async {
        stream.write_all(response.as_bytes()).await?;
        stream.shutdown().await
    };
    let _ = tokio::time::timeout(Duration::from_secs(2), write).await;
}
