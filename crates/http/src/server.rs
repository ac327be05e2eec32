//! The connection loop of `pod serve --http`: HTTP/1.1 on hyper with the
//! limits a server left running overnight needs, so that idle, slow or
//! numerous clients cannot starve the operator's own requests.
//!
//! - At most [`Limits::max_connections`] connections are served at once; one
//!   more is answered `503` (JSON) and closed instead of waiting in the
//!   kernel's backlog holding a file descriptor.
//! - A connection must send a request's headers within
//!   [`Limits::header_timeout`], counted from when it opens or from the end of
//!   its previous response (hyper's header-read timer): idle keep-alive
//!   connections and header tricklers are closed.
//! - A request's body must arrive within [`Limits::body_timeout`] and be at
//!   most [`Limits::max_body`] bytes ([`super::guard`]).
//! - On stop, no new connection is accepted and open ones finish their
//!   request (event streams end on their own) for at most [`DRAIN`].

use super::config::Limits;
use super::guard;
use axum::Router;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use pod::CancellationToken;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

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
    let slots = Arc::new(Semaphore::new(limits.max_connections));
    let graceful = GracefulShutdown::new();
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_timeout)
        .max_buf_size(PARSER_BUFFER)
        .keep_alive(true);
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
        let Ok(slot) = Arc::clone(&slots).try_acquire_owned() else {
            tokio::spawn(refuse_busy(stream));
            continue;
        };
        // Answers are small and often single writes: send them at once.
        let _ = stream.set_nodelay(true);
        // Each request carries where it came from.
        let service = TowerToHyperService::new(app.clone().layer(axum::Extension(Peer(peer))));
        let io = TokioIo::new(Slotted {
            _slot: slot,
            stream,
        });
        let connection = graceful.watch(builder.serve_connection(io, service));
        tokio::spawn(async move {
            if let Err(err) = connection.await {
                tracing::debug!(%err, "connection ended");
            }
        });
    }
    if tokio::time::timeout(DRAIN, graceful.shutdown())
        .await
        .is_err()
    {
        tracing::warn!("connections still open after {DRAIN:?}; closing them");
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
    _slot: OwnedSemaphorePermit,
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
