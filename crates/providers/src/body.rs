//! A request body made of pieces that are sent one after another: a part
//! many requests share (a process's tools array, the settled messages of a
//! session's last request) goes in as it is, neither copied into each body
//! nor held whole by it.
//!
//! Once sent, hyper drops the body; what a waiting session keeps is only
//! what it shares. A body of one piece is sent as such (reqwest can then
//! send it again by itself); one of several is streamed with its length
//! known, so it goes out with a `Content-Length`, never chunked.

use bytes::Bytes;
use std::collections::VecDeque;
use std::convert::Infallible;
use std::pin::Pin;
use std::task::{Context, Poll};

/// The pieces of a request body, in order.
#[derive(Clone, Debug, Default)]
pub(crate) struct Body {
    pieces: Vec<Bytes>,
    len: usize,
}

impl Body {
    /// Appends `piece` (empty pieces are left out).
    pub fn push(&mut self, piece: Bytes) {
        if !piece.is_empty() {
            self.len += piece.len();
            self.pieces.push(piece);
        }
    }

    /// The body's length in bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// The whole body in one buffer (for tests and inspection).
    pub fn to_vec(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.len);
        for piece in &self.pieces {
            out.extend_from_slice(piece);
        }
        out
    }

    /// The body as reqwest sends it.
    pub fn into_reqwest(self) -> reqwest::Body {
        match <[Bytes; 1]>::try_from(self.pieces) {
            Ok([one]) => reqwest::Body::from(one),
            Err(pieces) => reqwest::Body::wrap(Pieces {
                pieces: pieces.into(),
                left: self.len as u64,
            }),
        }
    }
}

impl From<Bytes> for Body {
    fn from(bytes: Bytes) -> Self {
        let mut body = Self::default();
        body.push(bytes);
        body
    }
}

impl From<Vec<u8>> for Body {
    fn from(bytes: Vec<u8>) -> Self {
        Bytes::from(bytes).into()
    }
}

impl From<String> for Body {
    fn from(text: String) -> Self {
        Bytes::from(text).into()
    }
}

/// The pieces as an HTTP body of known length.
struct Pieces {
    pieces: VecDeque<Bytes>,
    left: u64,
}

impl http_body::Body for Pieces {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Bytes>, Infallible>>> {
        let next = self.pieces.pop_front();
        if let Some(piece) = &next {
            self.left = self.left.saturating_sub(piece.len() as u64);
        }
        Poll::Ready(next.map(|piece| Ok(http_body::Frame::data(piece))))
    }

    fn is_end_stream(&self) -> bool {
        self.pieces.is_empty()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        http_body::SizeHint::with_exact(self.left)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http_body::Body as _;

    #[test]
    fn pieces_go_out_in_order_with_their_length_known() {
        let mut body = Body::default();
        body.push(Bytes::from_static(b"{\"a\":"));
        body.push(Bytes::new());
        body.push(Bytes::from_static(b"[1,2]"));
        body.push(Bytes::from_static(b"}"));
        assert_eq!(body.len(), 11);
        assert_eq!(body.to_vec(), b"{\"a\":[1,2]}");
        let mut pieces = Pieces {
            pieces: body.pieces.clone().into(),
            left: body.len() as u64,
        };
        assert_eq!(pieces.size_hint().exact(), Some(11));
        let waker = std::task::Waker::noop();
        let mut cx = Context::from_waker(waker);
        let mut sent = Vec::new();
        while let Poll::Ready(Some(Ok(frame))) = Pin::new(&mut pieces).poll_frame(&mut cx) {
            sent.extend_from_slice(frame.data_ref().map_or(&[][..], |d| &d[..]));
            assert_eq!(pieces.size_hint().exact(), Some(11 - sent.len() as u64));
        }
        assert_eq!(sent, b"{\"a\":[1,2]}");
        assert!(pieces.is_end_stream());
    }
}
