//! A loopback HTTP/1.1 server that plays scripted replies byte for byte and
//! records the requests it received.
//!
//! Raw on purpose: tests need exact control over what reaches the client,
//! down to splitting an SSE line across two TCP writes or dropping the
//! connection in the middle of a chunked body.

use parking_lot::Mutex;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// One piece of a streamed reply.
#[derive(Clone, Debug)]
pub enum Part {
    /// Bytes written as one HTTP chunk.
    Bytes(Vec<u8>),
    /// A pause before the next part.
    Pause(Duration),
    /// Close the connection here, without the terminating chunk.
    Drop,
    /// Abort the connection here with a TCP reset (`SO_LINGER` 0): what a
    /// crashing proxy or a load balancer cutting a stream looks like.
    Reset,
    /// Send nothing more and keep the connection open until the client
    /// hangs up: a stalled stream. The request is still recorded, and the
    /// next connection is served as soon as the client gives up.
    Stall,
}

/// The reply to one request.
#[derive(Clone, Debug)]
pub struct Reply {
    status: u16,
    headers: Vec<(String, String)>,
    parts: Vec<Part>,
}

impl Reply {
    /// A 200 `text/event-stream` reply sending each string as one write.
    pub fn sse<S: AsRef<str>>(parts: impl IntoIterator<Item = S>) -> Self {
        Self {
            status: 200,
            headers: vec![("content-type".into(), "text/event-stream".into())],
            parts: parts
                .into_iter()
                .map(|p| Part::Bytes(p.as_ref().as_bytes().to_vec()))
                .collect(),
        }
    }

    /// An error reply with a JSON body.
    pub fn status(status: u16, body: &str) -> Self {
        Self {
            status,
            headers: vec![("content-type".into(), "application/json".into())],
            parts: vec![Part::Bytes(body.as_bytes().to_vec())],
        }
    }

    /// Adds a header.
    pub fn header(mut self, name: &str, value: &str) -> Self {
        self.headers.push((name.into(), value.into()));
        self
    }

    /// Appends a part.
    pub fn then(mut self, part: Part) -> Self {
        self.parts.push(part);
        self
    }
}

/// A request as the server received it.
#[derive(Clone, Debug)]
pub struct Recorded {
    /// Request line, e.g. `POST /v1/chat/completions HTTP/1.1`.
    pub request_line: String,
    /// Headers, names lower-cased.
    pub headers: Vec<(String, String)>,
    /// The raw body.
    pub body: Vec<u8>,
}

impl Recorded {
    /// The body as JSON.
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body).expect("request body is JSON")
    }

    /// A header's value.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }

    /// The request path.
    pub fn path(&self) -> &str {
        self.request_line.split(' ').nth(1).unwrap_or("")
    }
}

/// The server; it stops when dropped.
pub struct LoopbackServer {
    addr: std::net::SocketAddr,
    requests: Arc<Mutex<Vec<Recorded>>>,
    // Requests read, counted before their reply is served (a stalled
    // reply records its request only once the client hangs up).
    arrived: Arc<std::sync::atomic::AtomicUsize>,
    task: tokio::task::JoinHandle<()>,
}

impl LoopbackServer {
    /// Serves `replies` in order, one per connection; later requests get a
    /// 500 that says the script ran out.
    pub async fn start(replies: Vec<Reply>) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind loopback");
        let addr = listener.local_addr().expect("local addr");
        let requests = Arc::new(Mutex::new(Vec::new()));
        let record = requests.clone();
        let arrived = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let count = arrived.clone();
        let task = tokio::spawn(async move {
            let mut replies = replies.into_iter();
            while let Ok((socket, _)) = listener.accept().await {
                let reply = replies.next().unwrap_or_else(|| {
                    Reply::status(500, r#"{"error":{"message":"loopback script exhausted"}}"#)
                });
                // Served one at a time: requests of a test are sequential,
                // and the order of replies must follow the order of requests.
                if let Some(request) = serve(socket, reply, &count).await {
                    record.lock().push(request);
                }
            }
        });
        Self {
            addr,
            requests,
            arrived,
            task,
        }
    }

    /// How many requests have arrived, including one whose reply is still
    /// being served (or stalls): what a test waits on before it kills the
    /// client mid-request.
    pub fn arrived(&self) -> usize {
        self.arrived.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// `http://127.0.0.1:PORT` followed by `path`.
    pub fn url(&self, path: &str) -> String {
        format!("http://{}{}", self.addr, path)
    }

    /// Every request received so far.
    pub fn requests(&self) -> Vec<Recorded> {
        self.requests.lock().clone()
    }

    /// The JSON bodies of every request received so far.
    pub fn bodies(&self) -> Vec<serde_json::Value> {
        self.requests().iter().map(Recorded::json).collect()
    }
}

impl Drop for LoopbackServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn serve(
    mut socket: TcpStream,
    reply: Reply,
    arrived: &std::sync::atomic::AtomicUsize,
) -> Option<Recorded> {
    let request = read_request(&mut socket).await?;
    arrived.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    let reason = match reply.status {
        200 => "OK",
        401 => "Unauthorized",
        400 => "Bad Request",
        429 => "Too Many Requests",
        529 => "Overloaded",
        _ => "Status",
    };
    let mut head = format!("HTTP/1.1 {} {reason}\r\n", reply.status);
    for (name, value) in &reply.headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    head.push_str("transfer-encoding: chunked\r\nconnection: close\r\n\r\n");
    socket.write_all(head.as_bytes()).await.ok()?;
    for part in reply.parts {
        match part {
            Part::Bytes(bytes) => {
                let mut chunk = format!("{:x}\r\n", bytes.len()).into_bytes();
                chunk.extend_from_slice(&bytes);
                chunk.extend_from_slice(b"\r\n");
                socket.write_all(&chunk).await.ok()?;
                socket.flush().await.ok()?;
            }
            Part::Pause(duration) => tokio::time::sleep(duration).await,
            Part::Drop => return Some(request),
            Part::Reset => {
                // Zero linger turns the close into an RST instead of a FIN.
                socket.set_zero_linger().ok()?;
                return Some(request);
            }
            Part::Stall => {
                wait_for_hang_up(&mut socket).await;
                return Some(request);
            }
        }
    }
    socket.write_all(b"0\r\n\r\n").await.ok()?;
    socket.shutdown().await.ok()?;
    Some(request)
}

/// Returns once the peer closed (or reset) the connection; anything it still
/// sends is discarded.
async fn wait_for_hang_up(socket: &mut TcpStream) {
    let mut sink = [0u8; 1024];
    while let Ok(n) = socket.read(&mut sink).await {
        if n == 0 {
            return;
        }
    }
}

pub(crate) async fn read_request(socket: &mut TcpStream) -> Option<Recorded> {
    let mut buffer = Vec::new();
    let mut chunk = [0u8; 8192];
    let head_end = loop {
        if let Some(pos) = buffer.windows(4).position(|w| w == b"\r\n\r\n") {
            break pos;
        }
        let n = socket.read(&mut chunk).await.ok()?;
        if n == 0 {
            return None;
        }
        buffer.extend_from_slice(&chunk[..n]);
    };
    let head = String::from_utf8_lossy(&buffer[..head_end]).to_string();
    let mut lines = head.split("\r\n");
    let request_line = lines.next()?.to_string();
    let headers: Vec<(String, String)> = lines
        .filter_map(|line| line.split_once(':'))
        .map(|(n, v)| (n.trim().to_ascii_lowercase(), v.trim().to_string()))
        .collect();
    let length: usize = headers
        .iter()
        .find(|(n, _)| n == "content-length")
        .and_then(|(_, v)| v.parse().ok())
        .unwrap_or(0);
    let mut body = buffer[head_end + 4..].to_vec();
    while body.len() < length {
        let n = socket.read(&mut chunk).await.ok()?;
        if n == 0 {
            return None;
        }
        body.extend_from_slice(&chunk[..n]);
    }
    Some(Recorded {
        request_line,
        headers,
        body,
    })
}

/// `event:` + `data:` pairs — the Anthropic Messages framing. The event name
/// is taken from each value's `type`.
pub fn anthropic_sse(events: &[serde_json::Value]) -> Vec<String> {
    events
        .iter()
        .map(|e| {
            let name = e["type"].as_str().unwrap_or("message");
            format!("event: {name}\ndata: {e}\n\n")
        })
        .collect()
}
