//! The HTTP client model requests go out on: HTTP/2 where the server
//! offers it (TLS's ALPN, or prior knowledge for a plain gateway, the
//! profile key `http2`) on connections of its own pool ([`pool`]), else
//! hyper's HTTP/1.1 client and its pool; rustls (the web PKI's roots and a
//! profile's `ca_file`), and the proxies the environment names
//! (`HTTPS_PROXY`, `HTTP_PROXY`, `ALL_PROXY`, `NO_PROXY`, as curl reads
//! them).
//!
//! hyper directly rather than through reqwest: a waiting session holds one
//! connection, and what a connection costs is what a fleet worker carries
//! per session. reqwest puts its own layers around each request and each
//! connection (its redirect and retry services, a boxed connection, a
//! request future, a copy of the headers, about 4 KB per waiting request)
//! and does not let the read buffer be sized; here it is a fixed
//! [`READ_BUFFER`] instead of hyper's adaptive 8 KB (tickets/providers.md).
//!
//! Over HTTP/2 a waiting request is a stream on a shared connection: its
//! state in h2 and a [`pool::Slot`], not a connection of its own. The pool
//! is the transport's, not hyper's, because hyper's client keeps one
//! HTTP/2 connection per host and queues streams past the server's
//! `SETTINGS_MAX_CONCURRENT_STREAMS`, where model answers stream for
//! minutes; this one opens another connection instead. A request the
//! server did not process (GOAWAY, `REFUSED_STREAM`) is sent once more on
//! another connection here, unseen by the retry policy.

mod pool;
pub use pool::{http2_in_use, Http2InUse};
mod response;

pub(crate) use response::{data, ResponseBody};

use crate::body::Body;
use crate::endpoint::Http2;
use bytes::Bytes;
use http::{HeaderMap, HeaderValue, Request, Response, Uri};
use hyper_rustls::{HttpsConnector, HttpsConnectorBuilder};
use hyper_util::client::legacy::connect::proxy::Tunnel;
use hyper_util::client::legacy::connect::{Connected, Connection, HttpConnector};
use hyper_util::client::legacy::Client;
use hyper_util::client::proxy::matcher::Matcher;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use pool::{Checkout, Failure, Opened, Pool};
use std::collections::HashMap;
use std::future::Future;
use std::path::{Path, PathBuf};
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
/// again sooner. Over HTTP/2 it bounds the whole opening (TCP, TLS, the
/// preface and a round trip for the server's settings), during which the
/// origin's other requests that found no room wait.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(30);

/// How long an unused pooled connection is kept (either protocol).
const IDLE_CONNECTION: Duration = Duration::from_secs(90);

/// HTTP/2 stream window: how much of one answer the server may send ahead
/// of reading. Every piece is read and its window given back at once, so
/// this bounds only data a stalled reader leaves buffered in the process
/// (over HTTP/1.1 it waits in the kernel instead). RFC 9113's default,
/// 64 KB: streamed answers come in events of tens to hundreds of bytes.
const STREAM_WINDOW: u32 = 65_535;

/// HTTP/2 connection window, shared by its streams: sixteen stream
/// windows, so a few stalled readers do not stop the others, while a
/// connection never buffers more than a megabyte.
const CONNECTION_WINDOW: u32 = 16 * STREAM_WINDOW;

/// Largest HTTP/2 frame the server may send: the protocol's minimum (and
/// default). A frame is read whole before it is handed on, so this is the
/// largest read buffer a connection needs.
const MAX_FRAME: u32 = 16_384;

/// Largest response head accepted over HTTP/2 (h2 allows 16 MB by
/// default). Model APIs send a few kilobytes of headers; hyper's HTTP/1.1
/// client refuses heads past about 400 KB (its buffer's limit), and
/// 64 KB is plenty below that.
const MAX_HEADER_LIST: u32 = 64 * 1024;

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// Why a request got no response.
#[derive(Debug, thiserror::Error)]
pub(crate) enum SendError {
    /// The request's URL is not one hyper can send to.
    #[error("invalid request URL: {0}")]
    Url(#[from] http::uri::InvalidUri),
    /// No connection could be made (refused, unresolvable, TLS failed).
    #[error("cannot connect")]
    Connect(#[source] BoxError),
    /// The connection failed after it was made.
    #[error("the request failed")]
    Request(#[source] hyper_util::client::legacy::Error),
    /// The HTTP/2 stream failed before its response head (a reset, a
    /// broken connection), or after a retry of a request its server did
    /// not process.
    #[error("the request failed")]
    Stream(#[source] h2::Error),
    /// The request could not be built (a header hyper refuses).
    #[error("cannot build the request")]
    Build(#[from] http::Error),
}

/// Why a transport could not be set up.
#[derive(Debug, thiserror::Error)]
pub(crate) enum SetupError {
    /// rustls refused the configuration.
    #[error(transparent)]
    Tls(#[from] rustls::Error),
    /// A `ca_file` could not be read or holds no certificate.
    #[error("cannot use the CA file {path}: {reason}")]
    CaFile {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
}

/// The process's model-request client (see the module docs). Cloning it
/// shares the pools.
#[derive(Clone)]
pub(crate) struct Transport {
    client: Client<HttpsConnector<Route>, Body>,
    proxies: Arc<Matcher>,
    /// Connects HTTP/2 connections (the same routes as hyper's).
    route: Route,
    /// TLS offering `h2` and `http/1.1` (hyper's connector offers none, so
    /// its connections are HTTP/1.1).
    alpn: Arc<rustls::ClientConfig>,
    pool: Arc<Pool>,
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
    pub fn shared() -> Result<Self, SetupError> {
        static SHARED: std::sync::OnceLock<Transport> = std::sync::OnceLock::new();
        if let Some(shared) = SHARED.get() {
            return Ok(shared.clone());
        }
        let made = Self::new(Matcher::from_env(), None)?;
        Ok(SHARED.get_or_init(|| made).clone())
    }

    /// The client for an endpoint: the shared one, or with a `ca_file`
    /// the one made for that file (once per file and process, for the
    /// same reasons as [`Transport::shared`]; the file is read then).
    pub fn for_endpoint(endpoint: &crate::Endpoint) -> Result<Self, SetupError> {
        let Some(ca_file) = &endpoint.ca_file else {
            return Self::shared();
        };
        // Held while a transport is made for a new file (a millisecond),
        // so each file is read and built once.
        static BY_CA: std::sync::OnceLock<parking_lot::Mutex<HashMap<PathBuf, Transport>>> =
            std::sync::OnceLock::new();
        let mut made = BY_CA.get_or_init(Default::default).lock();
        if let Some(transport) = made.get(ca_file) {
            return Ok(transport.clone());
        }
        let transport = Self::new(Matcher::from_env(), Some(ca_file))?;
        made.insert(ca_file.clone(), transport.clone());
        Ok(transport)
    }

    /// A client that goes through `proxies`, trusting the certificate
    /// authorities of `ca_file` too.
    pub fn new(proxies: Matcher, ca_file: Option<&Path>) -> Result<Self, SetupError> {
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
        let tls = tls_config(ca_file)?;
        let mut alpn = tls.clone();
        alpn.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
        let https = HttpsConnectorBuilder::new()
            .with_tls_config(tls)
            .https_or_http()
            .enable_http1()
            .wrap_connector(route.clone());
        let client = Client::builder(TokioExecutor::new())
            .pool_timer(TokioTimer::new())
            .pool_idle_timeout(IDLE_CONNECTION)
            .http1_read_buf_exact_size(READ_BUFFER)
            .build(https);
        Ok(Self {
            client,
            proxies,
            route,
            alpn: Arc::new(alpn),
            pool: Arc::default(),
        })
    }

    /// Sends a POST of the JSON `body` to `url` with `headers`, asking for
    /// an event stream back, over HTTP/2 when `http2` and the server allow.
    pub async fn post(
        &self,
        url: &url::Url,
        headers: &HeaderMap,
        body: Body,
        http2: Http2,
    ) -> Result<Response<ResponseBody>, SendError> {
        let uri: Uri = url.as_str().parse()?;
        let head = head(uri, headers, body.len())?;
        if self.may_use_http2(head.uri(), http2) {
            if let Some(response) = self.post_http2(&head, &body).await? {
                return Ok(response);
            }
        }
        // Boxed for the same reason as opening an HTTP/2 connection: the
        // HTTP/1.1 client's future is large, and an HTTP/2 request would
        // carry its space while it waits.
        Box::pin(self.post_http1(head, body)).await
    }

    /// Whether a request to `uri` may go over HTTP/2: `https://` unless
    /// `never` (ALPN decides), plain `http://` with prior knowledge and
    /// no forwarding proxy in the way.
    fn may_use_http2(&self, uri: &Uri, http2: Http2) -> bool {
        match http2 {
            Http2::Never => false,
            _ if uri.scheme() == Some(&http::uri::Scheme::HTTPS) => true,
            Http2::Auto => false,
            Http2::PriorKnowledge => self.proxies.intercept(uri).is_none(),
        }
    }

    /// Sends over one of the pool's HTTP/2 connections; `None` when the
    /// server chose HTTP/1.1. A request its server did not process goes
    /// once more, on another connection (the one that refused it takes no
    /// new streams).
    async fn post_http2(
        &self,
        head: &Request<()>,
        body: &Body,
    ) -> Result<Option<Response<ResponseBody>>, SendError> {
        let uri = head.uri();
        let origin = format!(
            "{}://{}",
            uri.scheme_str().unwrap_or("http"),
            uri.authority().map_or("", |a| a.as_str())
        );
        let mut again = true;
        loop {
            // Boxed: opening a connection (TCP, TLS, the HTTP/2 handshake)
            // is a large future most requests never await, and a request
            // waiting for its answer would otherwise carry its space.
            let open = || {
                let opening = open(self.route.clone(), Arc::clone(&self.alpn), uri.clone());
                Box::pin(async move {
                    tokio::time::timeout(CONNECT_TIMEOUT, opening)
                        .await
                        .map_err(|_| format!("no connection within {CONNECT_TIMEOUT:?}"))?
                })
            };
            let slot = match self.pool.checkout(&origin, open).await {
                Ok(Checkout::Http2(slot)) => slot,
                Ok(Checkout::Http1) => return Ok(None),
                Err(err) => return Err(SendError::Connect(err)),
            };
            match pool::send(slot, copy_head(head), body).await {
                Ok(response) => return Ok(Some(response)),
                Err(Failure::Unprocessed(err)) if again => {
                    tracing::debug!(
                        error = %pod_llm::error_chain(&err),
                        "the server did not process an HTTP/2 request; sending it again"
                    );
                    again = false;
                }
                Err(Failure::Unprocessed(err) | Failure::Failed(err)) => {
                    return Err(SendError::Stream(err))
                }
            }
        }
    }

    /// Sends through hyper's HTTP/1.1 client.
    async fn post_http1(
        &self,
        head: Request<()>,
        body: Body,
    ) -> Result<Response<ResponseBody>, SendError> {
        let mut request = head.map(|()| body);
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
        match self.client.request(request).await {
            Ok(response) => Ok(response.map(ResponseBody::Http1)),
            Err(err) if err.is_connect() => Err(SendError::Connect(Box::new(err))),
            Err(err) => Err(SendError::Request(err)),
        }
    }
}

/// A POST's head: `headers`, and the JSON body's type and length, asking
/// for an event stream.
fn head(uri: Uri, headers: &HeaderMap, length: usize) -> Result<Request<()>, http::Error> {
    let mut request = Request::post(uri).body(())?;
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
    Ok(request)
}

/// The same head again (h2 takes a request by value; `Request` is not
/// `Clone`).
fn copy_head(head: &Request<()>) -> Request<()> {
    let mut copy = Request::new(());
    *copy.method_mut() = head.method().clone();
    *copy.uri_mut() = head.uri().clone();
    *copy.headers_mut() = head.headers().clone();
    copy
}

/// Opens a connection to `uri`'s server over `route`: TLS offering `h2`
/// for `https://` (HTTP/2 if the server picks it), HTTP/2 from the first
/// byte for `http://`.
async fn open(
    mut route: Route,
    alpn: Arc<rustls::ClientConfig>,
    uri: Uri,
) -> Result<Opened, BoxError> {
    use tower_service::Service;
    let tcp = route.call(uri.clone()).await?.io.into_inner();
    if uri.scheme() != Some(&http::uri::Scheme::HTTPS) {
        return handshake(tcp).await;
    }
    let host = uri.host().unwrap_or_default();
    let host = host.trim_start_matches('[').trim_end_matches(']');
    let name = rustls_pki_types::ServerName::try_from(host.to_owned())?;
    let tls = tokio_rustls::TlsConnector::from(alpn)
        .connect(name, tcp)
        .await?;
    if tls.get_ref().1.alpn_protocol() != Some(b"h2") {
        // The connection is dropped and hyper's pool makes its own: once
        // per origin and process.
        return Ok(Opened::Http1);
    }
    handshake(tls).await
}

/// HTTP/2's preface and settings on `io`.
async fn handshake<T>(io: T) -> Result<Opened, BoxError>
where
    T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let (send, mut conn) = h2::client::Builder::new()
        .initial_window_size(STREAM_WINDOW)
        .initial_connection_window_size(CONNECTION_WINDOW)
        .max_frame_size(MAX_FRAME)
        .max_header_list_size(MAX_HEADER_LIST)
        // Model APIs push nothing; refusing it keeps the protocol small.
        .enable_push(false)
        .handshake::<_, Bytes>(io)
        .await?;
    let ping = conn.ping_pong();
    let conn = Box::pin(async move {
        if let Err(err) = conn.await {
            tracing::debug!(error = %pod_llm::error_chain(&err), "an HTTP/2 connection ended");
        }
    });
    Ok(Opened::Http2 { send, conn, ping })
}

/// The web PKI's roots, and those of `ca_file`, with ring, the provider
/// the build carries (not the process default, which another crate may
/// have set differently). No ALPN: hyper's connector leaves it empty for
/// HTTP/1.1 only, and a server then speaks HTTP/1.1.
fn tls_config(ca_file: Option<&Path>) -> Result<rustls::ClientConfig, SetupError> {
    let mut roots = rustls::RootCertStore::empty();
    roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
    if let Some(path) = ca_file {
        add_ca_file(&mut roots, path)?;
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    Ok(rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .with_root_certificates(roots)
        .with_no_client_auth())
}

/// Adds the PEM certificates of `path` to `roots`.
fn add_ca_file(roots: &mut rustls::RootCertStore, path: &Path) -> Result<(), SetupError> {
    use rustls_pki_types::pem::PemObject;
    let failed = |reason: String| SetupError::CaFile {
        path: path.to_owned(),
        reason,
    };
    let certs = rustls_pki_types::CertificateDer::pem_file_iter(path)
        .map_err(|err| failed(err.to_string()))?
        .collect::<Result<Vec<_>, _>>()
        .map_err(|err| failed(err.to_string()))?;
    if certs.is_empty() {
        return Err(failed("no PEM certificate in it".into()));
    }
    for cert in certs {
        roots.add(cert).map_err(|err| failed(err.to_string()))?;
    }
    Ok(())
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
        let response = transport
            .post(&url, &HeaderMap::new(), body, Http2::Auto)
            .await
            .unwrap();
        assert_eq!(response.status(), 200);
        asked.await.unwrap()
    }

    /// The connect error of a post to an `https://` URL.
    async fn not_connected(transport: &Transport) -> SendError {
        let url = url::Url::parse("https://api.model.invalid/v1/messages").unwrap();
        let err = transport
            .post(&url, &HeaderMap::new(), Body::default(), Http2::Auto)
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
        let transport = Transport::new(
            Matcher::builder().http(with_credentials(&proxy)).build(),
            None,
        )
        .unwrap();
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
        let transport = Transport::new(
            Matcher::builder().https(with_credentials(&proxy)).build(),
            None,
        )
        .unwrap();
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
            None,
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
            None,
        )
        .unwrap();
        let err = not_connected(&transport).await;
        let why = pod_llm::error_chain(&err);
        assert!(why.contains("only http:// proxies are supported"), "{why}");
        assert!(why.contains("https://proxy.invalid:3128"), "{why}");
    }
}
