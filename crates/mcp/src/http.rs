//! rmcp's streamable-HTTP client trait over reqwest.
//!
//! A POST carries each client message; the server answers `202 Accepted`
//! (notifications and responses), a JSON message, or an SSE stream of
//! messages. A GET opens the server's stream for its own requests and
//! notifications; a DELETE ends the session. The `Mcp-Session-Id` the
//! server assigns travels on every later request.

use futures_util::{StreamExt, TryStreamExt};
use http::{HeaderName, HeaderValue};
use rmcp::model::{ClientJsonRpcMessage, ServerJsonRpcMessage};
use rmcp::transport::streamable_http_client::{
    StreamableHttpClient, StreamableHttpError, StreamableHttpPostResponse,
};
use sse_stream::{Sse, SseStream};
use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::Arc;

const SESSION_ID: &str = "Mcp-Session-Id";
const LAST_EVENT_ID: &str = "Last-Event-ID";
const EVENT_STREAM: &str = "text/event-stream";
const JSON: &str = "application/json";

/// A reqwest client speaking MCP's streamable HTTP.
#[derive(Clone, Debug)]
pub struct HttpClient(pub reqwest::Client);

type HttpError = StreamableHttpError<reqwest::Error>;

fn with_headers(
    mut request: reqwest::RequestBuilder,
    session_id: Option<&str>,
    auth: Option<String>,
    headers: HashMap<HeaderName, HeaderValue>,
) -> reqwest::RequestBuilder {
    if let Some(token) = auth {
        request = request.bearer_auth(token);
    }
    for (name, value) in headers {
        request = request.header(name, value);
    }
    if let Some(id) = session_id {
        request = request.header(SESSION_ID, id);
    }
    request
}

fn content_type(response: &reqwest::Response) -> Option<String> {
    response
        .headers()
        .get(reqwest::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .map(|v| v.to_ascii_lowercase())
}

async fn status_error(response: reqwest::Response) -> HttpError {
    let status = response.status();
    let body = response.text().await.unwrap_or_default();
    let body: String = body.chars().take(300).collect();
    StreamableHttpError::UnexpectedServerResponse(Cow::Owned(format!("HTTP {status}: {body}")))
}

fn sse_of(
    response: reqwest::Response,
) -> futures_util::stream::BoxStream<'static, Result<Sse, sse_stream::Error>> {
    SseStream::from_bytes_stream(response.bytes_stream().map_err(std::io::Error::other)).boxed()
}

impl StreamableHttpClient for HttpClient {
    type Error = reqwest::Error;

    async fn post_message(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<StreamableHttpPostResponse, HttpError> {
        let body = serde_json::to_vec(&message)?;
        let request = self
            .0
            .post(uri.as_ref())
            .header(reqwest::header::ACCEPT, format!("{EVENT_STREAM}, {JSON}"))
            .header(reqwest::header::CONTENT_TYPE, JSON)
            .body(body);
        let request = with_headers(request, session_id.as_deref(), auth_header, custom_headers);
        let response = request.send().await.map_err(StreamableHttpError::Client)?;
        let status = response.status();
        if matches!(
            status,
            reqwest::StatusCode::ACCEPTED | reqwest::StatusCode::NO_CONTENT
        ) {
            return Ok(StreamableHttpPostResponse::Accepted);
        }
        if status == reqwest::StatusCode::NOT_FOUND && session_id.is_some() {
            return Err(StreamableHttpError::SessionExpired);
        }
        if !status.is_success() {
            return Err(status_error(response).await);
        }
        let new_session = response
            .headers()
            .get(SESSION_ID)
            .and_then(|v| v.to_str().ok())
            .map(String::from);
        match content_type(&response) {
            Some(kind) if kind.starts_with(EVENT_STREAM) => Ok(StreamableHttpPostResponse::Sse(
                sse_of(response),
                new_session,
            )),
            Some(kind) if kind.starts_with(JSON) => {
                let bytes = response
                    .bytes()
                    .await
                    .map_err(StreamableHttpError::Client)?;
                let message: ServerJsonRpcMessage = serde_json::from_slice(&bytes)?;
                Ok(StreamableHttpPostResponse::Json(message, new_session))
            }
            other => Err(StreamableHttpError::UnexpectedContentType(other)),
        }
    }

    async fn delete_session(
        &self,
        uri: Arc<str>,
        session_id: Arc<str>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<(), HttpError> {
        let request = with_headers(
            self.0.delete(uri.as_ref()),
            Some(&session_id),
            auth_header,
            custom_headers,
        );
        let response = request.send().await.map_err(StreamableHttpError::Client)?;
        match response.status() {
            status if status.is_success() => Ok(()),
            reqwest::StatusCode::METHOD_NOT_ALLOWED => {
                Err(StreamableHttpError::ServerDoesNotSupportDeleteSession)
            }
            _ => Err(status_error(response).await),
        }
    }

    async fn get_stream(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<futures_util::stream::BoxStream<'static, Result<Sse, sse_stream::Error>>, HttpError>
    {
        let mut request = self
            .0
            .get(uri.as_ref())
            .header(reqwest::header::ACCEPT, EVENT_STREAM);
        if let Some(id) = last_event_id {
            request = request.header(LAST_EVENT_ID, id);
        }
        let request = with_headers(request, session_id.as_deref(), auth_header, custom_headers);
        let response = request.send().await.map_err(StreamableHttpError::Client)?;
        let status = response.status();
        if status == reqwest::StatusCode::METHOD_NOT_ALLOWED {
            return Err(StreamableHttpError::ServerDoesNotSupportSse);
        }
        if !status.is_success() {
            return Err(status_error(response).await);
        }
        match content_type(&response) {
            Some(kind) if kind.starts_with(EVENT_STREAM) => Ok(sse_of(response)),
            _ => Err(StreamableHttpError::ServerDoesNotSupportSse),
        }
    }
}
