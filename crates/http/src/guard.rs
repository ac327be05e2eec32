//! What every request passes before it is routed, and what every response
//! carries: the request's size limits and body deadline, the `Host` check
//! that keeps a loopback server from answering a page of another site
//! (DNS rebinding), the headers that keep the dashboard out of other
//! pages' frames, and a JSON body on every error, whoever produced it.

use super::config::Limits;
use super::error::ApiError;
use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::http::header::{self, HeaderValue};
use axum::http::{HeaderMap, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use std::sync::Arc;

/// The guard's settings.
#[derive(Debug, Clone)]
pub struct Guard {
    /// Size limits and the body deadline.
    pub limits: Limits,
    /// The `Host` values (name and port, lower case) the server answers;
    /// `None` answers any (a server bound to a public address, which
    /// every client reaches by a name of its own).
    pub hosts: Option<Vec<String>>,
}

impl Guard {
    /// The hosts a loopback server at `addr` answers to: `localhost`,
    /// `127.0.0.1` and `[::1]` with its port, and `extra` names.
    pub fn loopback_hosts(addr: std::net::SocketAddr, extra: &[String]) -> Vec<String> {
        let port = addr.port();
        let mut hosts: Vec<String> = ["localhost", "127.0.0.1", "[::1]"]
            .iter()
            .map(|name| format!("{name}:{port}"))
            .collect();
        hosts.push(match addr {
            std::net::SocketAddr::V4(v4) => format!("{}:{port}", v4.ip()),
            std::net::SocketAddr::V6(v6) => format!("[{}]:{port}", v6.ip()),
        });
        hosts.extend(extra.iter().map(|h| h.to_ascii_lowercase()));
        hosts
    }
}

/// `{"error": message}` as text.
pub fn error_body(message: &str) -> String {
    serde_json::json!({ "error": message }).to_string()
}

/// The middleware.
pub async fn check(State(guard): State<Arc<Guard>>, request: Request, next: Next) -> Response {
    let html = request.uri().path() == "/";
    let response = match admit(&guard, request).await {
        Ok(request) => as_json_error(next.run(request).await).await,
        Err(err) => err.into_response(),
    };
    with_safety_headers(response, html)
}

/// The request with its body read, or why it is refused.
async fn admit(guard: &Guard, request: Request) -> Result<Request, ApiError> {
    let limits = &guard.limits;
    let target = request
        .uri()
        .path_and_query()
        .map_or(0, |target| target.as_str().len());
    if target > limits.max_uri {
        return Err(ApiError::with_status(
            StatusCode::URI_TOO_LONG,
            format!(
                "the request target is {target} bytes; at most {} are accepted",
                limits.max_uri
            ),
        ));
    }
    let head = head_size(request.headers());
    if head > limits.max_headers {
        return Err(ApiError::with_status(
            StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE,
            format!(
                "the headers are {head} bytes; at most {} are accepted",
                limits.max_headers
            ),
        ));
    }
    if let Some(hosts) = &guard.hosts {
        let host = request
            .headers()
            .get(header::HOST)
            .and_then(|h| h.to_str().ok())
            .map(str::to_ascii_lowercase);
        if !host.as_ref().is_some_and(|h| hosts.contains(h)) {
            return Err(ApiError::with_status(
                StatusCode::MISDIRECTED_REQUEST,
                format!(
                    "this server answers only for {} (the request was for {}); open the \
                     dashboard at one of those addresses",
                    hosts.join(", "),
                    host.as_deref().unwrap_or("no host")
                ),
            ));
        }
    }
    let (parts, body) = request.into_parts();
    let declared = parts
        .headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    let too_large = || {
        ApiError::with_status(
            StatusCode::PAYLOAD_TOO_LARGE,
            format!("the body is larger than {} bytes", limits.max_body),
        )
    };
    if declared.is_some_and(|len| len > limits.max_body as u64) {
        return Err(too_large());
    }
    let read = axum::body::to_bytes(body, limits.max_body);
    let bytes: Bytes = match tokio::time::timeout(limits.body_timeout, read).await {
        Ok(Ok(bytes)) => bytes,
        Ok(Err(err)) if is_length_limit(&err) => return Err(too_large()),
        Ok(Err(err)) => {
            return Err(ApiError::bad_request(format!(
                "the body could not be read: {err}"
            )))
        }
        Err(_) => {
            return Err(ApiError::with_status(
                StatusCode::REQUEST_TIMEOUT,
                format!(
                    "the body did not arrive within {} s",
                    limits.body_timeout.as_secs()
                ),
            ))
        }
    };
    Ok(Request::from_parts(parts, Body::from(bytes)))
}

fn is_length_limit(err: &axum::Error) -> bool {
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(err);
    while let Some(err) = source {
        if err.is::<http_body_util::LengthLimitError>() {
            return true;
        }
        source = err.source();
    }
    false
}

fn head_size(headers: &HeaderMap) -> usize {
    headers
        .iter()
        .map(|(name, value)| name.as_str().len() + value.len() + 4)
        .sum()
}

/// An error response that is not JSON (a rejection of an extractor, a
/// fallback) gets `{"error": ...}` with its text, or its status's reason.
async fn as_json_error(response: Response) -> Response {
    let status = response.status();
    let json = response
        .headers()
        .get(header::CONTENT_TYPE)
        .is_some_and(|v| v.as_bytes().starts_with(b"application/json"));
    if !(status.is_client_error() || status.is_server_error()) || json {
        return response;
    }
    let (parts, body) = response.into_parts();
    // Error texts are a line or two; a cap keeps a large one from being
    // buffered whole.
    let text = match axum::body::to_bytes(body, 16 * 1024).await {
        Ok(bytes) if !bytes.is_empty() => String::from_utf8_lossy(&bytes).trim().to_string(),
        _ => status.canonical_reason().unwrap_or("error").to_string(),
    };
    let mut response = ApiError::with_status(status, text).into_response();
    for (name, value) in parts.headers.iter() {
        if name != header::CONTENT_TYPE && name != header::CONTENT_LENGTH {
            response.headers_mut().insert(name.clone(), value.clone());
        }
    }
    response
}

/// No framing by other pages, no type sniffing, no referrer, no caching
/// of API answers, and for the dashboard's page a policy that loads only
/// its own files.
fn with_safety_headers(mut response: Response, html: bool) -> Response {
    let headers = response.headers_mut();
    let csp = match html {
        true => {
            "default-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; \
             frame-ancestors 'none'"
        }
        false => "default-src 'none'; frame-ancestors 'none'",
    };
    for (name, value) in [
        (header::X_FRAME_OPTIONS, "DENY"),
        (header::CONTENT_SECURITY_POLICY, csp),
        (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
        (header::REFERRER_POLICY, "no-referrer"),
        (header::CACHE_CONTROL, "no-store"),
    ] {
        headers.insert(name, HeaderValue::from_static(value));
    }
    response
}
