//! The HTTP client model requests go out on: hyper's HTTP/1.1 client over
//! rustls (the web PKI's roots), its connection pool, and the proxies the
//! environment names (`HTTPS_PROXY`, `HTTP_PROXY`, `ALL_PROXY`,
//! `NO_PROXY`, as curl reads them).
//!
//! hyper directly rather than through reqwest: a waiting session holds one
//! connection, and what a connection costs is what a fleet worker carries
//! per session. reqwest puts its own layers around each request and each
//! connection (its redirect and retry services, a boxed connection, a
//! request future, a copy of the headers, about 4 KB per waiting request)
//! and does not let the read buffer be sized; here it is a fixed
//! [`READ_BUFFER`] instead of hyper's adaptive 8 KB (tickets/providers.md).

use crate::body::Body;
use bytes::Bytes;
use http::{HeaderMap, HeaderValue, Request, Response, Uri};
use hyper::body::Incoming;
use hyper_rustls::{HttpsConnector, HttpsConnectorBuilder};
use hyper_util::client::legacy::connect::proxy::Tunnel;
use hyper_util::client::legacy::connect::{Connected, Connection, HttpConnector};
use hyper_util::client::legacy::Client;
use hyper_util::client::proxy::matcher::Matcher;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::net::TcpStream;

/// Bytes read from a connection at a time, and what a waiting request's
/// connection holds to read into. Streamed answers come in events of tens
/// to hundreds of bytes; a larger piece (a long response head, a whole
/// tool call in one event) takes a few reads, and the buffer grows while a
/// head does not fit. hyper's default starts at 8 KB and adapts upwards.
const READ_BUFFER: usize = 2048;

/// How long connecting may take before the request fails (a black-holed
/// host), well below the request timeout so the retry policy gets to try
/// again sooner.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(30);

/// How long an unused pooled connection is kept.
const IDLE_CONNECTION: Duration = Duration::from_secs(90);

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// Why a request got no response.
#[derive(Debug, thiserror::Error)]
pub(crate) enum SendError {
    /// The request's URL is not one hyper can send to.
    #[error("invalid request URL: {0}")]
    Url(#[from] http::uri::InvalidUri),
    /// No connection could be made (refused, unresolvable, TLS failed).
    #[error("cannot connect")]
    Connect(#[source] hyper_util::client::legacy::Error),
    /// The connection failed after it was made.
    #[error("the request failed")]
    Request(#[source] hyper_util::client::legacy::Error),
    /// The request could not be built (a header hyper refuses).
    #[error("cannot build the request")]
    Build(#[from] http::Error),
}

/// The process's model-request client (see the module docs). Cloning it
/// shares the pool.
#[derive(Clone)]
pub(crate) struct Transport {
    client: Client<HttpsConnector<Route>, Body>,
    proxies: Arc<Matcher>,
}

impl std::fmt::Debug for Transport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Transport").finish_non_exhaustive()
    }
}

impl Transport {
    /// The process's client, made once: each one holds its own TLS
    /// configuration with the root certificates (about a hundred
    /// kilobytes, a millisecond to build), which thousands of sessions on a
    /// fleet worker would each pay, and one pool keeps connections (and
    /// their TLS handshakes) to an API alive across sessions. A pooled
    /// connection whose runtime has ended (a process that runs several, as
    /// tests do) fails its request as a transport error, which the retry
    /// policy answers with a new connection.
    pub fn shared() -> Result<Self, rustls::Error> {
        static SHARED: std::sync::OnceLock<Transport> = std::sync::OnceLock::new();
        if let Some(shared) = SHARED.get() {
            return Ok(shared.clone());
        }
        let made = Self::new(Matcher::from_env())?;
        Ok(SHARED.get_or_init(|| made).clone())
    }

    /// A client that goes through `proxies`.
    pub fn new(proxies: Matcher) -> Result<Self, rustls::Error> {
        let proxies = Arc::new(proxies);
        let mut http = HttpConnector::new();
        // `https://` URLs are the TLS layer's; this one connects sockets.
        http.enforce_http(false);
        http.set_nodelay(true);
        http.set_connect_timeout(Some(CONNECT_TIMEOUT));
        let route = Route {
            http,
            proxies: Arc::clone(&proxies),
        };
        let https = HttpsConnectorBuilder::new()
            .with_tls_config(tls_config()?)
            .https_or_http()
            .enable_http1()
            .wrap_connector(route);
        let client = Client::builder(TokioExecutor::new())
            .pool_timer(TokioTimer::new())
            .pool_idle_timeout(IDLE_CONNECTION)
            .http1_read_buf_exact_size(READ_BUFFER)
            .build(https);
        Ok(Self { client, proxies })
    }

    /// Sends a POST of the JSON `body` to `url` with `headers`, asking for
    /// an event stream back.
    pub async fn post(
        &self,
        url: &url::Url,
        headers: &HeaderMap,
        body: Body,
    ) -> Result<Response<Incoming>, SendError> {
        let uri: Uri = url.as_str().parse()?;
        let length = body.len();
        let mut request = Request::post(uri).body(body)?;
        let sent = request.headers_mut();
        sent.reserve(headers.len() + 4);
        for (name, value) in headers {
            sent.append(name, value.clone());
        }
        sent.insert(
            http::header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
        sent.insert(
            http::header::ACCEPT,
            HeaderValue::from_static("text/event-stream"),
        );
        sent.insert(http::header::CONTENT_LENGTH, HeaderValue::from(length));
        // A plain request through a proxy names the proxy's credentials
        // itself (a tunnel's CONNECT carries them for `https://`).
        if request.uri().scheme() == Some(&http::uri::Scheme::HTTP) {
            if let Some(auth) = self
                .proxies
                .intercept(request.uri())
                .and_then(|proxy| proxy.basic_auth().cloned())
            {
                request
                    .headers_mut()
                    .insert(http::header::PROXY_AUTHORIZATION, auth);
            }
        }
        self.client.request(request).await.map_err(|err| {
            if err.is_connect() {
                SendError::Connect(err)
            } else {
                SendError::Request(err)
            }
        })
    }
}

/// The web PKI's roots with ring, the provider the build carries (not the
/// process default, which another crate may have set differently). No
/// ALPN: the connector leaves it empty for HTTP/1.1 only, and a server
/// then speaks HTTP/1.1.
fn tls_config() -> Result<rustls::ClientConfig, rustls::Error> {
    let mut roots = rustls::RootCertStore::empty();
    roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    Ok(rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .with_root_certificates(roots)
        .with_no_client_auth())
}

/// Connects to where a request for a URL goes: the server itself, a
/// tunnel through an `https://` URL's proxy, or a plain URL's proxy (the
/// request then names the whole URL, which hyper does for a connection
/// marked proxied).
#[derive(Clone)]
struct Route {
    http: HttpConnector,
    proxies: Arc<Matcher>,
}

impl tower_service::Service<Uri> for Route {
    type Response = Routed;
    type Error = BoxError;
    type Future = Pin<Box<dyn Future<Output = Result<Routed, BoxError>> + Send>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, dst: Uri) -> Self::Future {
        let proxy = self.proxies.intercept(&dst);
        let mut http = self.http.clone();
        Box::pin(async move {
            let Some(proxy) = proxy else {
                let io = http.call(dst).await?;
                return Ok(Routed { io, proxied: false });
            };
            if proxy.uri().scheme() == Some(&http::uri::Scheme::HTTPS) {
                return Err(format!(
                    "the proxy {} is an https:// URL; only http:// proxies are supported",
                    without_userinfo(proxy.uri())
                )
                .into());
            }
            if dst.scheme() == Some(&http::uri::Scheme::HTTPS) {
                let mut tunnel = Tunnel::new(proxy.uri().clone(), http);
                if let Some(auth) = proxy.basic_auth() {
                    tunnel = tunnel.with_auth(auth.clone());
                }
                std::future::poll_fn(|cx| tunnel.poll_ready(cx)).await?;
                let io = tunnel.call(dst).await?;
                Ok(Routed { io, proxied: false })
            } else {
                let io = http.call(proxy.uri().clone()).await?;
                Ok(Routed { io, proxied: true })
            }
        })
    }
}

/// A proxy's address for a message, without credentials.
fn without_userinfo(uri: &Uri) -> String {
    match uri.authority() {
        Some(authority) => {
            let host = authority.as_str().rsplit('@').next().unwrap_or_default();
            format!("{}://{host}", uri.scheme_str().unwrap_or("http"))
        }
        None => "(no address)".into(),
    }
}

/// A connection, and whether it goes to a proxy that forwards plain
/// requests.
struct Routed {
    io: TokioIo<TcpStream>,
    proxied: bool,
}

impl Connection for Routed {
    fn connected(&self) -> Connected {
        self.io.connected().proxy(self.proxied)
    }
}

impl hyper::rt::Read for Routed {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: hyper::rt::ReadBufCursor<'_>,
    ) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.io).poll_read(cx, buf)
    }
}

impl hyper::rt::Write for Routed {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.io).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.io).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.io).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.io).poll_shutdown(cx)
    }
}

/// The data of a response body, piece by piece.
pub(crate) fn data(
    body: Incoming,
) -> impl futures_util::Stream<Item = Result<Bytes, hyper::Error>> + Send + Unpin + 'static {
    http_body_util::BodyExt::into_data_stream(body)
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::TcpListener;

    /// A complete answer with no events.
    const ANSWER: &str =
        "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncontent-length: 12\r\n\r\ndata: [DONE]";

    /// `Basic` and base64 of `me:secret`.
    const CREDENTIALS: &str = "proxy-authorization: basic bwu6c2vjcmv0\r\n";

    /// A server on loopback that answers its first request with `answer`
    /// and hands back that request's head.
    async fn server(answer: &'static str) -> (String, tokio::task::JoinHandle<String>) {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = format!("http://127.0.0.1:{}", listener.local_addr().unwrap().port());
        let task = tokio::spawn(async move {
            let (mut socket, _) = listener.accept().await.unwrap();
            let mut head = Vec::new();
            let mut buf = [0u8; 1024];
            while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                let n = socket.read(&mut buf).await.unwrap();
                if n == 0 {
                    break;
                }
                head.extend_from_slice(&buf[..n]);
            }
            socket.write_all(answer.as_bytes()).await.unwrap();
            String::from_utf8_lossy(&head).into_owned()
        });
        (address, task)
    }

    /// Posts `body` to `url`, checks the answer was a 200, and gives back
    /// the head the server (`asked`) was sent.
    async fn answered(
        transport: &Transport,
        url: &str,
        body: Body,
        asked: tokio::task::JoinHandle<String>,
    ) -> String {
        let url = url::Url::parse(url).unwrap();
        let response = transport.post(&url, &HeaderMap::new(), body).await.unwrap();
        assert_eq!(response.status(), 200);
        asked.await.unwrap()
    }

    /// The connect error of a post to an `https://` URL.
    async fn not_connected(transport: &Transport) -> SendError {
        let url = url::Url::parse("https://api.model.invalid/v1/messages").unwrap();
        let err = transport
            .post(&url, &HeaderMap::new(), Body::default())
            .await
            .unwrap_err();
        assert!(matches!(err, SendError::Connect(_)), "{err:?}");
        err
    }

    fn with_credentials(address: &str) -> String {
        address.replace("http://", "http://me:secret@")
    }

    #[tokio::test]
    async fn a_plain_request_goes_to_its_proxy_whole_with_the_proxys_credentials() {
        let (proxy, asked) = server(ANSWER).await;
        let transport =
            Transport::new(Matcher::builder().http(with_credentials(&proxy)).build()).unwrap();
        let body = Body::from(b"{}".to_vec());
        let head = answered(
            &transport,
            "http://model.invalid:8080/v1/chat/completions",
            body,
            asked,
        )
        .await;
        assert!(
            head.starts_with("POST http://model.invalid:8080/v1/chat/completions HTTP/1.1\r\n"),
            "{head}"
        );
        let head = head.to_ascii_lowercase();
        assert!(head.contains(CREDENTIALS), "{head}");
        assert!(head.contains("content-length: 2\r\n"), "{head}");
        assert!(head.contains("accept: text/event-stream\r\n"), "{head}");
    }

    #[tokio::test]
    async fn an_https_request_asks_its_proxy_for_a_tunnel_and_a_refusal_is_a_connect_error() {
        let (proxy, asked) =
            server("HTTP/1.1 407 Proxy Authentication Required\r\ncontent-length: 0\r\n\r\n").await;
        let transport =
            Transport::new(Matcher::builder().https(with_credentials(&proxy)).build()).unwrap();
        not_connected(&transport).await;
        let head = asked.await.unwrap();
        assert!(
            head.starts_with("CONNECT api.model.invalid:443 HTTP/1.1\r\n"),
            "{head}"
        );
        assert!(head.to_ascii_lowercase().contains(CREDENTIALS), "{head}");
    }

    #[tokio::test]
    async fn a_host_the_no_proxy_list_names_is_reached_directly() {
        let (origin, asked) = server(ANSWER).await;
        // Nothing listens on the discard port: through it, no answer.
        let transport = Transport::new(
            Matcher::builder()
                .all("http://127.0.0.1:9")
                .no("127.0.0.1")
                .build(),
        )
        .unwrap();
        let url = format!("{origin}/v1/chat/completions");
        let head = answered(&transport, &url, Body::default(), asked).await;
        assert!(
            head.starts_with("POST /v1/chat/completions HTTP/1.1\r\n"),
            "{head}"
        );
    }

    #[tokio::test]
    async fn an_https_proxy_is_refused_with_a_reason() {
        let transport = Transport::new(
            Matcher::builder()
                .https("https://proxy.invalid:3128")
                .build(),
        )
        .unwrap();
        let err = not_connected(&transport).await;
        let why = pod_llm::error_chain(&err);
        assert!(why.contains("only http:// proxies are supported"), "{why}");
        assert!(why.contains("https://proxy.invalid:3128"), "{why}");
    }
}
