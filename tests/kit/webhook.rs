//! A webhook receiver on loopback: it records every request and answers
//! each with the status it was started with; and the receiver's side of a
//! Standard Webhooks signature check, written from the specification (not
//! pod's signer), for tests to verify what pod sends.

use base64::Engine;
use hmac::{KeyInit, Mac};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;
use tokio::sync::Notify;

/// One request as the receiver got it.
#[derive(Debug, Clone)]
pub struct Received {
    /// Header names in lower case.
    pub headers: HashMap<String, String>,
    /// The body.
    pub body: Vec<u8>,
}

impl Received {
    /// The body as JSON.
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body).expect("a JSON body")
    }

    /// Whether its `webhook-signature` is `secret`'s over its id,
    /// timestamp and body (`whsec_` secrets are base64 after the prefix).
    pub fn signed_with(&self, secret: &str) -> bool {
        let key = match secret.strip_prefix("whsec_") {
            Some(encoded) => base64::engine::general_purpose::STANDARD
                .decode(encoded)
                .expect("base64 secret"),
            None => secret.as_bytes().to_vec(),
        };
        let (Some(id), Some(timestamp), Some(signatures)) = (
            self.headers.get("webhook-id"),
            self.headers.get("webhook-timestamp"),
            self.headers.get("webhook-signature"),
        ) else {
            return false;
        };
        let mut mac = <hmac::Hmac<sha2::Sha256> as KeyInit>::new_from_slice(&key).unwrap();
        mac.update(format!("{id}.{timestamp}.").as_bytes());
        mac.update(&self.body);
        let expected =
            base64::engine::general_purpose::STANDARD.encode(mac.finalize().into_bytes());
        signatures
            .split(' ')
            .filter_map(|s| s.strip_prefix("v1,"))
            .any(|s| s == expected)
    }
}

/// GitHub's `X-Hub-Signature-256` of `body` with `secret`, as a sender
/// signs a delivery (`sha256=` and the hex HMAC-SHA256).
pub fn github_signature(secret: &str, body: &[u8]) -> String {
    let mut mac = <hmac::Hmac<sha2::Sha256> as KeyInit>::new_from_slice(secret.as_bytes()).unwrap();
    mac.update(body);
    let digest = mac.finalize().into_bytes();
    let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
    format!("sha256={hex}")
}

/// A receiver answering every request with one status.
pub struct Receiver {
    /// Where to POST.
    pub url: String,
    got: Arc<Log>,
}

#[derive(Default)]
struct Log {
    requests: Mutex<Vec<Received>>,
    // Woken at each request, for `wait_for`.
    arrived: Notify,
}

impl Receiver {
    /// Listens on a loopback port, answering `status`.
    pub async fn start(status: u16) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/hook", listener.local_addr().unwrap());
        let got = Arc::new(Log::default());
        let log = Arc::clone(&got);
        tokio::spawn(async move {
            while let Ok((socket, _)) = listener.accept().await {
                tokio::spawn(serve(socket, Arc::clone(&log), status));
            }
        });
        Self { url, got }
    }

    /// Everything received so far.
    pub fn received(&self) -> Vec<Received> {
        self.got.requests.lock().unwrap().clone()
    }

    /// Waits (up to 30 s) until a request passes `pick`, and returns it.
    pub async fn wait_for(&self, mut pick: impl FnMut(&Received) -> bool) -> Received {
        let found = async {
            loop {
                let arrived = self.got.arrived.notified();
                if let Some(found) = self.received().into_iter().find(|r| pick(r)) {
                    return found;
                }
                arrived.await;
            }
        };
        match tokio::time::timeout(Duration::from_secs(30), found).await {
            Ok(found) => found,
            Err(_) => panic!("no such request in 30 s; got {:?}", self.received()),
        }
    }
}

async fn serve(mut socket: tokio::net::TcpStream, log: Arc<Log>, status: u16) {
    let mut data = Vec::new();
    let mut buf = [0u8; 4096];
    let (head_end, length) = loop {
        let n = match socket.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => n,
        };
        data.extend_from_slice(&buf[..n]);
        if let Some(end) = data.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&data[..end]).to_string();
            let length = head
                .lines()
                .find_map(|l| {
                    let (name, value) = l.split_once(':')?;
                    name.eq_ignore_ascii_case("content-length")
                        .then(|| value.trim().parse::<usize>().ok())?
                })
                .unwrap_or(0);
            break (end + 4, length);
        }
    };
    while data.len() < head_end + length {
        match socket.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => data.extend_from_slice(&buf[..n]),
        }
    }
    let head = String::from_utf8_lossy(&data[..head_end]).to_string();
    let headers = head
        .lines()
        .skip(1)
        .filter_map(|l| {
            let (name, value) = l.split_once(':')?;
            Some((name.trim().to_ascii_lowercase(), value.trim().to_string()))
        })
        .collect();
    log.requests.lock().unwrap().push(Received {
        headers,
        body: data[head_end..].to_vec(),
    });
    log.arrived.notify_waiters();
    let reply = format!("HTTP/1.1 {status} X\r\ncontent-length: 0\r\nconnection: close\r\n\r\n");
    let _ = socket.write_all(reply.as_bytes()).await;
}
