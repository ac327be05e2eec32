//! A Chat Completions server on loopback that speaks HTTP/2 (h2's server
//! side), plain or over TLS with ALPN, and counts what it sees: its
//! connections, the most streams open at once on one, and the prompt of
//! every request it answered.

use crate::wire::openai_parts;
use bytes::Bytes;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Barrier;

/// What the server does besides answering.
#[derive(Default)]
pub struct Behaviour {
    /// `SETTINGS_MAX_CONCURRENT_STREAMS` it sends (h2's default, none, when
    /// unset).
    pub max_streams: Option<u32>,
    /// The first answers, this many, stop after their first event until
    /// all of them are open at once on all connections together: a client
    /// that queued streams would never get there (and time out).
    pub hold_until: Option<usize>,
    /// Every stream of the first connection is reset with
    /// `REFUSED_STREAM`.
    pub refuse_first_connection: bool,
    /// The first connection, written frame by frame: it waits for this
    /// many requests, sends GOAWAY naming the first as the last it
    /// processed, answers that one and closes.
    pub go_away_after: Option<usize>,
    /// ALPN protocols of a TLS server (`h2`, `http/1.1`).
    pub alpn: Vec<&'static str>,
}

/// What the server saw.
#[derive(Default)]
pub struct Stats {
    /// Connections accepted.
    pub connections: AtomicUsize,
    /// The most streams open at once on one connection.
    pub most_streams: AtomicUsize,
    /// Streams reset with `REFUSED_STREAM`.
    pub refused: AtomicUsize,
    /// Requests answered over HTTP/1.1 (a TLS server whose client chose it).
    pub http1_answers: AtomicUsize,
    /// The last user message of every request answered, in order.
    pub answered: parking_lot::Mutex<Vec<String>>,
    /// HTTP/2 connections that ended.
    pub closed: AtomicUsize,
    /// Told when an HTTP/2 connection ends.
    pub closing: tokio::sync::Notify,
    /// Streams open now, all connections together.
    open: AtomicUsize,
}

/// A running server.
pub struct H2Server {
    /// `http://127.0.0.1:PORT` or `https://127.0.0.1:PORT`.
    pub base: String,
    /// What it saw.
    pub stats: Arc<Stats>,
    /// The PEM of its CA certificate (TLS only).
    pub ca_pem: Option<String>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for H2Server {
    fn drop(&mut self) {
        self.task.abort();
    }
}

type Tls = Option<(tokio_rustls::TlsAcceptor, String)>;

impl H2Server {
    /// A plain HTTP/2 server (prior knowledge).
    pub async fn plain(behaviour: Behaviour) -> Self {
        Self::start(behaviour, None).await
    }

    /// A TLS server for `127.0.0.1` with a certificate of its own CA,
    /// offering `behaviour.alpn`.
    pub async fn tls(behaviour: Behaviour) -> Self {
        let certified = rcgen::generate_simple_self_signed(vec!["127.0.0.1".into()]).unwrap();
        let cert = certified.cert.der().clone();
        let key = rustls::pki_types::PrivateKeyDer::Pkcs8(
            rustls::pki_types::PrivatePkcs8KeyDer::from(certified.key_pair.serialize_der()),
        );
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut config = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_no_client_auth()
            .with_single_cert(vec![cert], key)
            .unwrap();
        config.alpn_protocols = behaviour
            .alpn
            .iter()
            .map(|p| p.as_bytes().to_vec())
            .collect();
        let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
        Self::start(behaviour, Some((acceptor, certified.cert.pem()))).await
    }

    async fn start(behaviour: Behaviour, tls: Tls) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let scheme = if tls.is_some() { "https" } else { "http" };
        let ca_pem = tls.as_ref().map(|(_, pem)| pem.clone());
        let acceptor = tls.map(|(acceptor, _)| acceptor);
        let stats = Arc::new(Stats::default());
        let shared = Arc::new(Shared {
            barrier: behaviour.hold_until.map(|n| Arc::new(Barrier::new(n))),
            behaviour,
            held: AtomicUsize::new(0),
            stats: Arc::clone(&stats),
        });
        let task = tokio::spawn(async move {
            loop {
                let Ok((socket, _)) = listener.accept().await else {
                    return;
                };
                let index = shared.stats.connections.fetch_add(1, Ordering::SeqCst);
                tokio::spawn(serve(socket, index, acceptor.clone(), Arc::clone(&shared)));
            }
        });
        Self {
            base: format!("{scheme}://127.0.0.1:{port}"),
            stats,
            ca_pem,
            task,
        }
    }

    /// The prompts answered, sorted.
    pub fn answered(&self) -> Vec<String> {
        let mut answered = self.stats.answered.lock().clone();
        answered.sort();
        answered
    }

    /// Connections accepted so far.
    pub fn connections(&self) -> usize {
        self.stats.connections.load(Ordering::SeqCst)
    }
}

struct Shared {
    behaviour: Behaviour,
    barrier: Option<Arc<Barrier>>,
    /// Answers that reached the barrier.
    held: AtomicUsize,
    stats: Arc<Stats>,
}

async fn serve(
    socket: TcpStream,
    index: usize,
    tls: Option<tokio_rustls::TlsAcceptor>,
    shared: Arc<Shared>,
) {
    let Some(acceptor) = tls else {
        match shared.behaviour.go_away_after {
            Some(requests) if index == 0 => going_away(socket, requests, &shared.stats).await,
            _ => http2(socket, index, shared).await,
        }
        return;
    };
    // A client that only asked which protocol it gets may hang up here.
    let Ok(stream) = acceptor.accept(socket).await else {
        return;
    };
    if stream.get_ref().1.alpn_protocol() == Some(b"h2") {
        http2(stream, index, shared).await;
    } else {
        http1(stream, &shared.stats).await;
    }
}

/// Serves one HTTP/2 connection.
async fn http2<T>(io: T, index: usize, shared: Arc<Shared>)
where
    T: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let mut builder = h2::server::Builder::new();
    if let Some(max) = shared.behaviour.max_streams {
        builder.max_concurrent_streams(max);
    }
    let Ok(mut conn) = builder.handshake::<_, Bytes>(io).await else {
        return;
    };
    let open_here = Arc::new(AtomicUsize::new(0));
    while let Some(Ok((request, mut respond))) = conn.accept().await {
        if shared.behaviour.refuse_first_connection && index == 0 {
            respond.send_reset(h2::Reason::REFUSED_STREAM);
            shared.stats.refused.fetch_add(1, Ordering::SeqCst);
            continue;
        }
        let open = open_here.fetch_add(1, Ordering::SeqCst) + 1;
        shared.stats.most_streams.fetch_max(open, Ordering::SeqCst);
        shared.stats.open.fetch_add(1, Ordering::SeqCst);
        let shared = Arc::clone(&shared);
        let open_here = Arc::clone(&open_here);
        tokio::spawn(async move {
            answer(request, respond, &shared).await;
            open_here.fetch_sub(1, Ordering::SeqCst);
            shared.stats.open.fetch_sub(1, Ordering::SeqCst);
        });
    }
    shared.stats.closed.fetch_add(1, Ordering::SeqCst);
    shared.stats.closing.notify_waiters();
}

/// Reads a request and streams its answer, the prompt said back.
async fn answer(
    request: http::Request<h2::RecvStream>,
    mut respond: h2::server::SendResponse<Bytes>,
    shared: &Shared,
) {
    let mut body = request.into_body();
    let mut bytes = Vec::new();
    while let Some(Ok(data)) = body.data().await {
        let _ = body.flow_control().release_capacity(data.len());
        bytes.extend_from_slice(&data);
    }
    let prompt = prompt_of(&bytes);
    let head = http::Response::builder()
        .header("content-type", "text/event-stream")
        .body(())
        .unwrap();
    let Ok(mut send) = respond.send_response(head, false) else {
        return;
    };
    let parts = openai_parts(&format!("you said {prompt}"), &[]);
    let (first, rest) = parts.split_first().unwrap();
    let _ = send.send_data(Bytes::from(first.clone()), false);
    if let (Some(barrier), Some(first)) = (&shared.barrier, shared.behaviour.hold_until) {
        if shared.held.fetch_add(1, Ordering::SeqCst) < first {
            barrier.wait().await;
        }
    }
    shared.stats.answered.lock().push(prompt);
    let _ = send.send_data(Bytes::from(rest.concat()), true);
}

/// The last message's content of a Chat Completions body.
fn prompt_of(body: &[u8]) -> String {
    let json: serde_json::Value = serde_json::from_slice(body).unwrap_or_default();
    json["messages"]
        .as_array()
        .and_then(|messages| messages.last())
        .and_then(|message| message["content"].as_str())
        .unwrap_or_default()
        .to_owned()
}

/// Answers HTTP/1.1 requests of one connection (the TLS server's, when the
/// client chose it).
async fn http1<T: AsyncRead + AsyncWrite + Unpin>(mut io: T, stats: &Stats) {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        let (head_end, length) = loop {
            if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                let head = String::from_utf8_lossy(&buf[..end]).to_ascii_lowercase();
                let length = head
                    .lines()
                    .find_map(|line| line.strip_prefix("content-length:"))
                    .and_then(|v| v.trim().parse::<usize>().ok())
                    .unwrap_or(0);
                break (end + 4, length);
            }
            match io.read(&mut chunk).await {
                Ok(0) | Err(_) => return,
                Ok(n) => buf.extend_from_slice(&chunk[..n]),
            }
        };
        while buf.len() < head_end + length {
            match io.read(&mut chunk).await {
                Ok(0) | Err(_) => return,
                Ok(n) => buf.extend_from_slice(&chunk[..n]),
            }
        }
        let prompt = prompt_of(&buf[head_end..head_end + length]);
        buf.drain(..head_end + length);
        let body = openai_parts(&format!("you said {prompt}"), &[]).concat();
        let head = format!(
            "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncontent-length: {}\r\n\r\n",
            body.len()
        );
        stats.http1_answers.fetch_add(1, Ordering::SeqCst);
        stats.answered.lock().push(prompt);
        if io
            .write_all(format!("{head}{body}").as_bytes())
            .await
            .is_err()
        {
            return;
        }
    }
}

/// HTTP/2 frame types and flags written by hand (RFC 9113 §6).
const DATA: u8 = 0;
const HEADERS: u8 = 1;
const SETTINGS: u8 = 4;
const PING: u8 = 6;
const GOAWAY: u8 = 7;
const END_STREAM: u8 = 0x1;
const ACK: u8 = 0x1;
const END_HEADERS: u8 = 0x4;

/// A connection spoken frame by frame, for a GOAWAY whose last stream is
/// one h2's server side would not name: it waits until `requests` streams
/// have been opened (and their bodies sent), says GOAWAY with the first
/// as the last it processed, answers the first and closes.
async fn going_away(mut io: TcpStream, requests: usize, stats: &Stats) {
    let mut preface = [0u8; 24];
    if io.read_exact(&mut preface).await.is_err() {
        return;
    }
    write_frame(&mut io, SETTINGS, 0, 0, &[]).await;
    let mut bodies: Vec<(u32, Vec<u8>, bool)> = Vec::new();
    while bodies.len() < requests || bodies.iter().any(|(_, _, ended)| !ended) {
        let mut header = [0u8; 9];
        if io.read_exact(&mut header).await.is_err() {
            return;
        }
        let length = u32::from_be_bytes([0, header[0], header[1], header[2]]) as usize;
        let (kind, flags) = (header[3], header[4]);
        let stream = u32::from_be_bytes([header[5], header[6], header[7], header[8]]) & 0x7fff_ffff;
        let mut payload = vec![0u8; length];
        if io.read_exact(&mut payload).await.is_err() {
            return;
        }
        match kind {
            SETTINGS if flags & ACK == 0 => write_frame(&mut io, SETTINGS, ACK, 0, &[]).await,
            PING if flags & ACK == 0 => write_frame(&mut io, PING, ACK, 0, &payload).await,
            HEADERS => bodies.push((stream, Vec::new(), flags & END_STREAM != 0)),
            DATA => {
                if let Some(body) = bodies.iter_mut().find(|(id, _, _)| *id == stream) {
                    body.1.extend_from_slice(&payload);
                    body.2 |= flags & END_STREAM != 0;
                }
            }
            _ => {}
        }
    }
    let (first, body, _) = &bodies[0];
    let mut go_away = first.to_be_bytes().to_vec();
    go_away.extend_from_slice(&0u32.to_be_bytes());
    write_frame(&mut io, GOAWAY, 0, 0, &go_away).await;
    // `:status: 200`, index 8 of HPACK's static table.
    write_frame(&mut io, HEADERS, END_HEADERS, *first, &[0x88]).await;
    let prompt = prompt_of(body);
    let answer = openai_parts(&format!("you said {prompt}"), &[]).concat();
    write_frame(&mut io, DATA, END_STREAM, *first, answer.as_bytes()).await;
    stats.answered.lock().push(prompt);
    let _ = io.shutdown().await;
}

async fn write_frame(io: &mut TcpStream, kind: u8, flags: u8, stream: u32, payload: &[u8]) {
    let length = (payload.len() as u32).to_be_bytes();
    let mut frame = vec![length[1], length[2], length[3], kind, flags];
    frame.extend_from_slice(&stream.to_be_bytes());
    frame.extend_from_slice(payload);
    let _ = io.write_all(&frame).await;
}
