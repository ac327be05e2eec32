//! A response body from either protocol: hyper's HTTP/1.1 body, or an
//! HTTP/2 stream of the pool's that gives its flow-control window back as
//! data is read and frees its place on the connection when it ends.

use super::pool::Slot;
use bytes::Bytes;
use hyper::body::Incoming;
use std::pin::Pin;
use std::task::{ready, Context, Poll};

/// The body of a model's response.
#[derive(Debug)]
pub(crate) enum ResponseBody {
    /// Read from an HTTP/1.1 connection of hyper's pool.
    Http1(Incoming),
    /// Read from an HTTP/2 stream of the transport's own pool.
    Http2(H2Body),
}

/// Why a response body could not be read to its end.
#[derive(Debug, thiserror::Error)]
pub(crate) enum BodyError {
    /// The HTTP/1.1 connection failed.
    #[error(transparent)]
    Http1(#[from] hyper::Error),
    /// The HTTP/2 stream was reset or its connection failed.
    #[error(transparent)]
    Http2(#[from] h2::Error),
}

/// An HTTP/2 response's data, holding its stream's place on the
/// connection until the end (or until it is dropped, which resets the
/// stream).
#[derive(Debug)]
pub(crate) struct H2Body {
    recv: h2::RecvStream,
    /// The stream's place among the connection's in-flight streams; given
    /// back as soon as the body has ended, not only when it is dropped.
    slot: Option<Slot>,
}

impl H2Body {
    pub(super) fn new(recv: h2::RecvStream, slot: Slot) -> Self {
        Self {
            recv,
            slot: Some(slot),
        }
    }
}

impl http_body::Body for ResponseBody {
    type Data = Bytes;
    type Error = BodyError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Bytes>, BodyError>>> {
        match self.get_mut() {
            Self::Http1(body) => Pin::new(body)
                .poll_frame(cx)
                .map(|frame| frame.map(|frame| frame.map_err(BodyError::from))),
            Self::Http2(body) => body.poll_data(cx),
        }
    }

    fn is_end_stream(&self) -> bool {
        match self {
            Self::Http1(body) => body.is_end_stream(),
            Self::Http2(body) => body.recv.is_end_stream(),
        }
    }
}

impl H2Body {
    /// The next piece of data. Its bytes go back to the server's window at
    /// once: the reader takes every piece as it comes (the SSE decoder
    /// keeps only an unfinished line), so what the window bounds is data
    /// not yet read, at most one window per stream. Trailers are not
    /// read: no model API sends any.
    fn poll_data(
        &mut self,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Bytes>, BodyError>>> {
        match ready!(self.recv.poll_data(cx)) {
            Some(Ok(data)) => {
                // Fails only once the stream is closed, which the next
                // read reports.
                let _ = self.recv.flow_control().release_capacity(data.len());
                Poll::Ready(Some(Ok(http_body::Frame::data(data))))
            }
            Some(Err(err)) => {
                self.slot = None;
                Poll::Ready(Some(Err(err.into())))
            }
            None => {
                self.slot = None;
                Poll::Ready(None)
            }
        }
    }
}

/// The data of a response body, piece by piece.
pub(crate) fn data(
    body: ResponseBody,
) -> impl futures_util::Stream<Item = Result<Bytes, BodyError>> + Send + Unpin + 'static {
    http_body_util::BodyExt::into_data_stream(body)
}
