//! A request body made of pieces that are sent one after another: a part
//! many requests share (a process's tools array, the settled messages of a
//! session's last request) goes in as it is, neither copied into each body
//! nor held whole by it.
//!
//! Once sent, hyper drops the body; what a waiting session keeps is only
//! what it shares. It goes out with its length known (`Content-Length`),
//! never chunked, each piece a buffer of hyper's vectored write (over
//! HTTP/2, a DATA frame's payload, split as the window allows).

use bytes::Bytes;
use std::convert::Infallible;
use std::pin::Pin;
use std::task::{Context, Poll};

/// The pieces of a request body, in order.
#[derive(Clone, Debug, Default)]
pub(crate) struct Body {
    pieces: Vec<Bytes>,
    len: usize,
    /// Pieces sent so far (taken out of `pieces`).
    sent: usize,
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

    /// The pieces not yet sent, in order (HTTP/2 sends them as they are).
    pub fn pieces(&self) -> &[Bytes] {
        &self.pieces[self.sent..]
    }

    /// The whole body in one buffer (for tests and inspection).
    pub fn to_vec(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.len);
        for piece in &self.pieces {
            out.extend_from_slice(piece);
        }
        out
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

/// The pieces, one frame each, with the length known.
impl http_body::Body for Body {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Bytes>, Infallible>>> {
        let this = &mut *self;
        let Some(slot) = this.pieces.get_mut(this.sent) else {
            return Poll::Ready(None);
        };
        let piece = std::mem::take(slot);
        this.sent += 1;
        Poll::Ready(Some(Ok(http_body::Frame::data(piece))))
    }

    fn is_end_stream(&self) -> bool {
        self.sent == self.pieces.len()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        let left: usize = self.pieces[self.sent..].iter().map(Bytes::len).sum();
        http_body::SizeHint::with_exact(left as u64)
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
        let mut pieces = body.clone();
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
