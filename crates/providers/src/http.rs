//! The HTTP half shared by both wire formats: send one POST, turn error
//! statuses into [`ProviderError`]s, and hand back the body as SSE events
//! with an idle timeout.

use crate::secret::ApiKey;
use crate::sse::{SseDecoder, SseEvent};
use crate::transport::{SendError, Transport};
use futures_util::stream::{BoxStream, Stream};
use futures_util::StreamExt;
use http::HeaderMap;
use pod_llm::ProviderError;
use std::collections::VecDeque;
use std::time::Duration;

pub use crate::endpoint::Timeouts;

/// Error bodies are read for their message only; a few kilobytes is plenty
/// and a runaway body must not stall error reporting.
const MAX_ERROR_BODY: usize = 64 * 1024;
/// Messages shown to users are cut to this many characters.
const MAX_MESSAGE_CHARS: usize = 2000;

/// A POST of a JSON body whose response is an SSE stream.
pub(crate) struct SsePost<'a> {
    pub client: &'a Transport,
    pub url: &'a url::Url,
    /// The endpoint's base URL as configured: what an unreachable server
    /// is named by.
    pub base_url: &'a str,
    pub headers: &'a HeaderMap,
    pub body: crate::body::Body,
    pub timeouts: Timeouts,
    pub key: Option<&'a ApiKey>,
    /// Whether the request may go over HTTP/2.
    pub http2: crate::endpoint::Http2,
}

/// SSE events of a response body; an idle timeout is an item so the wire
/// decoder can decide whether the response was already complete.
pub(crate) type SseStream = BoxStream<'static, Result<SseEvent, ProviderError>>;

impl<'a> SsePost<'a> {
    /// A POST of `body` to `url` with `endpoint`'s timeouts, its key
    /// scrubbed from any error.
    pub fn to(
        client: &'a Transport,
        url: &'a url::Url,
        endpoint: &'a crate::endpoint::Endpoint,
        headers: &'a HeaderMap,
        body: impl Into<crate::body::Body>,
    ) -> Self {
        Self {
            client,
            url,
            base_url: &endpoint.base_url,
            headers,
            body: body.into(),
            timeouts: endpoint.timeouts,
            key: endpoint.api_key.as_ref(),
            http2: endpoint.http2,
        }
    }

    /// Sends the request; `Ok` once a success status arrived.
    pub async fn send(self) -> Result<SseStream, ProviderError> {
        let scrub = |text: String| match self.key {
            Some(key) => key.scrub(&text),
            None => text,
        };
        let mut url = self.url.clone();
        let mut hops = 0;
        let response = loop {
            let request = self
                .client
                .post(&url, self.headers, self.body.clone(), self.http2);
            let response = match tokio::time::timeout(self.timeouts.request, request).await {
                Err(_) => {
                    return Err(ProviderError::Transport(format!(
                        "no response within {:?}",
                        self.timeouts.request
                    )))
                }
                Ok(Err(SendError::Connect(err))) if out_of_files(&*err) => {
                    return Err(ProviderError::OutOfFiles {
                        url: scrub(without_credentials(self.base_url)),
                        why: scrub(connect_failure(&*err)),
                    })
                }
                Ok(Err(SendError::Connect(err))) => {
                    return Err(ProviderError::Unreachable {
                        url: scrub(without_credentials(self.base_url)),
                        why: scrub(connect_failure(&*err)),
                    })
                }
                Ok(Err(err)) => {
                    return Err(ProviderError::Transport(scrub(pod_llm::error_chain(&err))))
                }
                Ok(Ok(response)) => response,
            };
            // A redirect that keeps the method (307, 308) is followed here,
            // to the same server only (whose key it was given); any other
            // is an error status (a POST answered by a GET elsewhere is not
            // a model's answer).
            let keeps_method = matches!(
                response.status(),
                http::StatusCode::TEMPORARY_REDIRECT | http::StatusCode::PERMANENT_REDIRECT
            );
            if keeps_method && hops < MAX_REDIRECTS {
                if let Some(next) = same_server_location(&url, response.headers()) {
                    url = next;
                    hops += 1;
                    continue;
                }
            }
            break response;
        };
        let status = response.status();
        if !status.is_success() {
            let retry_after = retry_after(response.headers());
            let body = read_capped(response, self.timeouts.idle).await;
            return Err(ProviderError::Http {
                status: status.as_u16(),
                message: scrub(error_message(&body, status.canonical_reason())),
                retry_after,
            });
        }
        Ok(sse_events(
            crate::transport::data(response.into_body()),
            self.timeouts.idle,
        )
        .boxed())
    }
}

/// Redirects followed for one request (as many as browsers and curl's
/// default allow at most, give or take).
const MAX_REDIRECTS: usize = 10;

/// Where a redirect from `url` points, when that is on the same server
/// (scheme, host and port).
fn same_server_location(url: &url::Url, headers: &HeaderMap) -> Option<url::Url> {
    let location = headers.get(http::header::LOCATION)?.to_str().ok()?;
    let next = url.join(location).ok()?;
    (next.origin() == url.origin()).then_some(next)
}

/// `url` without a user name or password in it, for messages.
fn without_credentials(url: &str) -> String {
    match url::Url::parse(url) {
        Ok(mut parsed) if parsed.has_authority() && !parsed.username().is_empty() => {
            // Both only fail for URLs that cannot have credentials.
            let _ = parsed.set_username("");
            let _ = parsed.set_password(None);
            parsed.to_string().trim_end_matches('/').to_string()
        }
        _ => url.to_string(),
    }
}

/// Why no connection was made, in a few words: the socket's error for a
/// refused or timed out connection, else the innermost cause (a resolver's
/// "failed to lookup address information: …", a TLS handshake's error).
fn connect_failure(err: &(dyn std::error::Error + 'static)) -> String {
    let mut innermost: &dyn std::error::Error = err;
    while let Some(source) = innermost.source() {
        if let Some(io) = source.downcast_ref::<std::io::Error>() {
            match io.kind() {
                std::io::ErrorKind::ConnectionRefused => return "connection refused".into(),
                std::io::ErrorKind::TimedOut => return "the connection timed out".into(),
                _ => {}
            }
        }
        innermost = source;
    }
    innermost.to_string()
}

/// Whether the connection failed for want of a file descriptor: this
/// process's limit (`EMFILE`) or the system's (`ENFILE`), met when the
/// socket was made (or a resolver opened its files).
pub(crate) fn out_of_files(err: &(dyn std::error::Error + 'static)) -> bool {
    let mut next = Some(err);
    while let Some(error) = next {
        let errno = error
            .downcast_ref::<std::io::Error>()
            .and_then(std::io::Error::raw_os_error);
        if matches!(errno, Some(libc::EMFILE | libc::ENFILE)) {
            return true;
        }
        next = error.source();
    }
    false
}

/// The message of an error body: `error.message` of the JSON both APIs send,
/// or the text itself.
pub(crate) fn error_message(body: &[u8], fallback: Option<&str>) -> String {
    #[derive(serde::Deserialize)]
    struct Envelope {
        error: Option<Inner>,
        message: Option<String>,
    }
    #[derive(serde::Deserialize)]
    #[serde(untagged)]
    enum Inner {
        Object {
            message: Option<String>,
            #[serde(rename = "type")]
            kind: Option<String>,
        },
        Text(String),
    }
    let parsed = serde_json::from_slice::<Envelope>(body).ok();
    let message = match parsed {
        Some(Envelope {
            error:
                Some(Inner::Object {
                    message: Some(m),
                    kind,
                }),
            ..
        }) => match kind {
            Some(kind) => format!("{kind}: {m}"),
            None => m,
        },
        Some(Envelope {
            error: Some(Inner::Text(m)),
            ..
        }) => m,
        Some(Envelope {
            message: Some(m), ..
        }) => m,
        _ => String::from_utf8_lossy(body).trim().to_string(),
    };
    let message = if message.is_empty() {
        fallback.unwrap_or("no message").to_string()
    } else {
        message
    };
    truncate(message)
}

fn truncate(mut text: String) -> String {
    if let Some((cut, _)) = text.char_indices().nth(MAX_MESSAGE_CHARS) {
        text.truncate(cut);
        text.push('…');
    }
    text
}

/// `retry-after-ms` (milliseconds) wins over `retry-after` (seconds or an
/// HTTP date), as OpenAI's own clients do.
pub(crate) fn retry_after(headers: &HeaderMap) -> Option<Duration> {
    let text = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    if let Some(ms) = text("retry-after-ms").and_then(|v| v.trim().parse::<f64>().ok()) {
        if ms.is_finite() && ms >= 0.0 {
            return Some(Duration::from_secs_f64(ms / 1000.0));
        }
    }
    let value = text("retry-after")?.trim();
    if let Ok(secs) = value.parse::<f64>() {
        return (secs.is_finite() && secs >= 0.0).then(|| Duration::from_secs_f64(secs));
    }
    let date = chrono::DateTime::parse_from_rfc2822(value).ok()?;
    let wait = date.with_timezone(&chrono::Utc) - chrono::Utc::now();
    Some(wait.to_std().unwrap_or(Duration::ZERO))
}

async fn read_capped(
    response: http::Response<crate::transport::ResponseBody>,
    idle: Duration,
) -> Vec<u8> {
    let mut body = Vec::new();
    let mut stream = crate::transport::data(response.into_body());
    while let Ok(Some(Ok(chunk))) = tokio::time::timeout(idle, stream.next()).await {
        body.extend_from_slice(&chunk);
        if body.len() >= MAX_ERROR_BODY {
            body.truncate(MAX_ERROR_BODY);
            break;
        }
    }
    body
}

struct BodyState<S> {
    body: S,
    decoder: SseDecoder,
    ready: VecDeque<SseEvent>,
    idle: Duration,
    /// When the silence becomes too long: one timer per response, moved on
    /// by every chunk (not a timer made and dropped per chunk).
    deadline: std::pin::Pin<Box<tokio::time::Sleep>>,
    ended: bool,
}

/// Decodes a body into SSE events, failing with
/// [`ProviderError::IdleTimeout`] after `idle` without bytes.
pub(crate) fn sse_events<S, E>(
    body: S,
    idle: Duration,
) -> impl Stream<Item = Result<SseEvent, ProviderError>> + Send + 'static
where
    S: Stream<Item = Result<bytes::Bytes, E>> + Send + Unpin + 'static,
    E: std::error::Error + Send + 'static,
{
    let state = BodyState {
        body,
        decoder: SseDecoder::new(),
        ready: VecDeque::new(),
        idle,
        deadline: Box::pin(tokio::time::sleep(idle)),
        ended: false,
    };
    futures_util::stream::unfold(state, |mut state| async move {
        loop {
            if let Some(event) = state.ready.pop_front() {
                return Some((Ok(event), state));
            }
            if state.ended {
                return None;
            }
            let next = tokio::select! {
                // The body first: data that is there wins over a deadline
                // passing at the same moment.
                biased;
                next = state.body.next() => Some(next),
                () = state.deadline.as_mut() => None,
            };
            let failure = match next {
                None => ProviderError::IdleTimeout(state.idle),
                Some(Some(Ok(bytes))) => {
                    let idle = state.idle;
                    state
                        .deadline
                        .as_mut()
                        .reset(tokio::time::Instant::now() + idle);
                    match state.decoder.feed(&bytes) {
                        Ok(events) => {
                            state.ready.extend(events);
                            continue;
                        }
                        Err(err) => ProviderError::Malformed(err.to_string()),
                    }
                }
                Some(Some(Err(err))) => ProviderError::Transport(pod_llm::error_chain(&err)),
                Some(None) => {
                    state.ended = true;
                    state.ready.extend(state.decoder.finish());
                    continue;
                }
            };
            state.ended = true;
            return Some((Err(failure), state));
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::header::HeaderValue;

    #[test]
    fn retry_after_prefers_milliseconds() {
        let mut headers = HeaderMap::new();
        headers.insert("retry-after", HeaderValue::from_static("7"));
        assert_eq!(retry_after(&headers), Some(Duration::from_secs(7)));
        headers.insert("retry-after-ms", HeaderValue::from_static("1500"));
        assert_eq!(retry_after(&headers), Some(Duration::from_millis(1500)));
        let mut dated = HeaderMap::new();
        dated.insert(
            "retry-after",
            HeaderValue::from_static("Wed, 21 Oct 2015 07:28:00 GMT"),
        );
        assert_eq!(retry_after(&dated), Some(Duration::ZERO));
        assert_eq!(retry_after(&HeaderMap::new()), None);
    }

    #[test]
    fn only_a_want_of_descriptors_is_out_of_files() {
        #[derive(Debug, thiserror::Error)]
        #[error("tcp open error")]
        struct Wrapped(#[source] std::io::Error);
        let emfile = Wrapped(std::io::Error::from_raw_os_error(libc::EMFILE));
        let enfile = Wrapped(std::io::Error::from_raw_os_error(libc::ENFILE));
        let refused = Wrapped(std::io::Error::from_raw_os_error(libc::ECONNREFUSED));
        assert!(out_of_files(&emfile));
        assert!(out_of_files(&enfile));
        assert!(out_of_files(&std::io::Error::from_raw_os_error(
            libc::EMFILE
        )));
        assert!(!out_of_files(&refused));
        assert!(!out_of_files(&std::io::Error::other("too many open files")));
    }

    #[test]
    fn error_messages_come_from_the_body() {
        let openai = br#"{"error":{"message":"Incorrect API key provided","type":"invalid_request_error","code":"invalid_api_key"}}"#;
        assert_eq!(
            error_message(openai, None),
            "invalid_request_error: Incorrect API key provided"
        );
        let anthropic =
            br#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#;
        assert_eq!(
            error_message(anthropic, None),
            "overloaded_error: Overloaded"
        );
        assert_eq!(
            error_message(b"{\"error\":\"model not found\"}", None),
            "model not found"
        );
        assert_eq!(error_message(b"  plain  ", None), "plain");
        assert_eq!(error_message(b"", Some("Not Found")), "Not Found");
    }
}
