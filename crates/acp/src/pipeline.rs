//! The connection's byte streams as the lines the SDK reads and writes,
//! with pipelining made safe: a request written behind `initialize` waits
//! until `initialize` is answered.
//!
//! JSON-RPC lets a client write requests without waiting for answers, and
//! editors do (`initialize` and `session/new` in one write). The SDK refuses
//! every request but `initialize` until its answer has gone out (it marks
//! the connection initialized as it writes that answer), yet it reads the
//! next line as soon as the `initialize` handler returned: a pipelined
//! `session/new` was refused with -32600 or not, depending on which of its
//! tasks ran first. So the reader holds every line after an `initialize`
//! request until the writer has written the answer with that request's id.
//! Nothing is refused and nothing is reordered; only the handshake waits.

use agent_client_protocol::Lines;
use futures_util::{Sink, Stream};
use parking_lot::Mutex;
use serde_json::Value;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{ready, Context, Poll};
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, BufReader};
use tokio::sync::Notify;

/// `input` and `output` as newline-delimited lines for the SDK, requests
/// after an `initialize` held until it is answered.
pub fn lines<R, W>(
    input: R,
    output: W,
) -> Lines<
    impl Sink<String, Error = io::Error> + Send + 'static,
    impl Stream<Item = io::Result<String>> + Send + 'static,
>
where
    R: AsyncRead + Send + 'static,
    W: AsyncWrite + Send + 'static,
{
    let gate = Arc::new(Gate::default());
    let reader = Reader {
        lines: BufReader::new(Box::pin(input)).lines(),
        gate: gate.clone(),
    };
    let incoming = futures_util::stream::unfold(reader, |mut reader| async move {
        let line = reader.next().await?;
        Some((line, reader))
    });
    Lines::new(Writer::new(output, gate), incoming)
}

/// The handshake in progress: the id of an `initialize` request read and
/// not yet answered.
#[derive(Default)]
struct Gate {
    // Set by the reader, cleared by the writer; held only to read or swap
    // the id, never across an await.
    pending: Mutex<Option<Value>>,
    opened: Notify,
}

impl Gate {
    /// Holds the lines after this one until the answer to `id` is written.
    fn close(&self, id: Value) {
        *self.pending.lock() = Some(id);
    }

    /// Lets the reader go on.
    fn open(&self) {
        self.pending.lock().take();
        self.opened.notify_waiters();
    }

    /// The id whose answer the reader waits for, if any.
    fn pending(&self) -> Option<Value> {
        self.pending.lock().clone()
    }

    /// Returns once no answer is awaited.
    async fn wait(&self) {
        loop {
            // Made before the check: `notify_waiters` wakes a `Notified`
            // from its creation on, so an `open` between the two is seen.
            let opened = self.opened.notified();
            if self.pending.lock().is_none() {
                return;
            }
            opened.await;
        }
    }
}

/// The input's lines, each read once no `initialize` is unanswered.
struct Reader<R> {
    lines: tokio::io::Lines<BufReader<Pin<Box<R>>>>,
    gate: Arc<Gate>,
}

impl<R: AsyncRead> Reader<R> {
    async fn next(&mut self) -> Option<io::Result<String>> {
        self.gate.wait().await;
        match self.lines.next_line().await {
            Ok(Some(line)) => {
                if let Some(id) = initialize_id(&line) {
                    self.gate.close(id);
                }
                Some(Ok(line))
            }
            Ok(None) => None,
            Err(err) => Some(Err(err)),
        }
    }
}

/// The id of `line` if it is an `initialize` request.
fn initialize_id(line: &str) -> Option<Value> {
    // Most lines are not: skip parsing them (a prompt may be megabytes).
    if !line.contains("\"initialize\"") {
        return None;
    }
    let message: Value = serde_json::from_str(line).ok()?;
    match message.get("method") {
        Some(method) if method == "initialize" => message.get("id").cloned(),
        _ => None,
    }
}

/// Whether `line` is the answer to request `id`.
fn answers(line: &str, id: &Value) -> bool {
    let Ok(message) = serde_json::from_str::<Value>(line) else {
        return false;
    };
    message.get("method").is_none() && message.get("id") == Some(id)
}

/// Writes each line and its newline, flushed; opens the gate once the
/// answer it waits for is out, and when the output fails or goes away (so
/// the reader never waits on a writer that cannot answer).
struct Writer<W> {
    output: Pin<Box<W>>,
    gate: Arc<Gate>,
    bytes: Vec<u8>,
    written: usize,
    // The line being written answers the pending `initialize`.
    answering: bool,
    closing: bool,
}

impl<W> Writer<W> {
    fn new(output: W, gate: Arc<Gate>) -> Self {
        Self {
            output: Box::pin(output),
            gate,
            bytes: Vec::new(),
            written: 0,
            answering: false,
            closing: false,
        }
    }
}

impl<W: AsyncWrite> Writer<W> {
    fn write_and_flush(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        while self.written < self.bytes.len() {
            let count = ready!(self
                .output
                .as_mut()
                .poll_write(cx, &self.bytes[self.written..]))?;
            if count == 0 {
                return Poll::Ready(Err(io::ErrorKind::WriteZero.into()));
            }
            self.written += count;
        }
        ready!(self.output.as_mut().poll_flush(cx))?;
        self.bytes.clear();
        self.written = 0;
        if std::mem::take(&mut self.answering) {
            self.gate.open();
        }
        Poll::Ready(Ok(()))
    }
}

impl<W: AsyncWrite> Sink<String> for Writer<W> {
    type Error = io::Error;

    fn poll_ready(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.poll_flush(cx)
    }

    fn start_send(self: Pin<&mut Self>, line: String) -> io::Result<()> {
        let this = self.get_mut();
        if let Some(id) = this.gate.pending() {
            this.answering = answers(&line, &id);
        }
        this.bytes = line.into_bytes();
        this.bytes.push(b'\n');
        this.written = 0;
        Ok(())
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let result = ready!(this.write_and_flush(cx));
        if result.is_err() {
            this.gate.open();
        }
        Poll::Ready(result)
    }

    fn poll_close(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if !this.closing {
            ready!(Pin::new(&mut *this).poll_flush(cx))?;
            this.closing = true;
        }
        this.output.as_mut().poll_shutdown(cx)
    }
}

impl<W> Drop for Writer<W> {
    fn drop(&mut self) {
        self.gate.open();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn only_an_initialize_request_closes_the_gate_and_only_its_answer_opens_it() {
        let request = r#"{"jsonrpc":"2.0","id":"a","method":"initialize","params":{}}"#;
        assert_eq!(initialize_id(request), Some(json!("a")));
        let notification = r#"{"jsonrpc":"2.0","method":"initialize"}"#;
        assert_eq!(initialize_id(notification), None);
        let prompt = r#"{"jsonrpc":"2.0","id":3,"method":"session/prompt","params":{"prompt":[{"type":"text","text":"\"initialize\""}]}}"#;
        assert_eq!(initialize_id(prompt), None);

        let id = json!("a");
        assert!(answers(r#"{"jsonrpc":"2.0","id":"a","result":{}}"#, &id));
        assert!(answers(
            r#"{"jsonrpc":"2.0","id":"a","error":{"code":-32602,"message":"bad"}}"#,
            &id
        ));
        assert!(!answers(r#"{"jsonrpc":"2.0","id":1,"result":{}}"#, &id));
        // The agent's own request with the same id is not an answer.
        assert!(!answers(
            r#"{"jsonrpc":"2.0","id":"a","method":"session/request_permission"}"#,
            &id
        ));
    }
}
