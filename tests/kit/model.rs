//! A loopback model server that serves every connection at once: each
//! request is answered with the same Chat Completions stream (a text, no
//! tool calls), and answers can be held back until the test lets them go.
//! It counts the requests waiting for their answer and the most that ever
//! waited together, which is how many sessions a client had in flight.
//!
//! [`LoopbackServer`](crate::server::LoopbackServer) plays a script one
//! connection at a time, in order; this one is for many sessions at once
//! (a fleet worker), where order cannot be known. It runs on a thread of
//! its own, so synchronous tests that drive child processes can use it.

use crate::server::read_request;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use tokio::io::AsyncWriteExt;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

#[derive(Default)]
struct Counts {
    /// Requests read and not yet answered.
    waiting: AtomicUsize,
    /// The most that waited at once.
    peak: AtomicUsize,
    /// Requests answered.
    answered: AtomicUsize,
}

/// The server; it stops when dropped.
pub struct ModelServer {
    addr: std::net::SocketAddr,
    counts: Arc<Counts>,
    held: watch::Sender<bool>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl ModelServer {
    /// Answers every request with `text`, at once, or (`held`) only after
    /// [`release`](Self::release).
    pub fn start(text: &str, held: bool) -> Self {
        let body = crate::wire::openai_parts(text, &[]);
        let counts = Arc::new(Counts::default());
        let (gate, _) = watch::channel(held);
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let (addr_tx, addr_rx) = std::sync::mpsc::channel();
        let (serve_counts, serve_gate) = (counts.clone(), gate.clone());
        let thread = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("runtime");
            runtime.block_on(async move {
                let listener = TcpListener::bind("127.0.0.1:0")
                    .await
                    .expect("bind loopback");
                addr_tx.send(listener.local_addr().expect("addr")).ok();
                let body = Arc::new(body);
                let accept = async {
                    while let Ok((socket, _)) = listener.accept().await {
                        let (counts, gate, body) =
                            (serve_counts.clone(), serve_gate.subscribe(), body.clone());
                        tokio::spawn(answer(socket, counts, gate, body));
                    }
                };
                tokio::select! {
                    () = accept => {}
                    _ = stopped => {}
                }
            });
        });
        let addr = addr_rx.recv().expect("the server's address");
        Self {
            addr,
            counts,
            held: gate,
            stop: Some(stop),
            thread: Some(thread),
        }
    }

    /// `http://127.0.0.1:PORT/v1`: a profile's `base_url`.
    pub fn base_url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    /// Answers the requests held so far and every later one at once.
    pub fn release(&self) {
        self.held.send_replace(false);
    }

    /// Requests waiting for their answer now.
    pub fn waiting(&self) -> usize {
        self.counts.waiting.load(Ordering::SeqCst)
    }

    /// The most requests that ever waited for their answer at once.
    pub fn peak(&self) -> usize {
        self.counts.peak.load(Ordering::SeqCst)
    }

    /// Requests answered.
    pub fn answered(&self) -> usize {
        self.counts.answered.load(Ordering::SeqCst)
    }
}

impl Drop for ModelServer {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            stop.send(()).ok();
        }
        if let Some(thread) = self.thread.take() {
            thread.join().ok();
        }
    }
}

async fn answer(
    mut socket: TcpStream,
    counts: Arc<Counts>,
    mut gate: watch::Receiver<bool>,
    body: Arc<Vec<String>>,
) {
    if read_request(&mut socket).await.is_none() {
        return;
    }
    let now = counts.waiting.fetch_add(1, Ordering::SeqCst) + 1;
    counts.peak.fetch_max(now, Ordering::SeqCst);
    // Waits while held; a dropped server ends the wait too.
    let _ = gate.wait_for(|held| !held).await;
    counts.waiting.fetch_sub(1, Ordering::SeqCst);
    let mut reply = String::from(
        "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n\
         transfer-encoding: chunked\r\nconnection: close\r\n\r\n",
    );
    for part in body.iter() {
        reply.push_str(&format!("{:x}\r\n{part}\r\n", part.len()));
    }
    reply.push_str("0\r\n\r\n");
    if socket.write_all(reply.as_bytes()).await.is_ok() && socket.shutdown().await.is_ok() {
        counts.answered.fetch_add(1, Ordering::SeqCst);
    }
}
