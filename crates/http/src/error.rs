//! API errors: a status and a JSON body `{"error": "..."}` saying what was
//! wrong and, where it helps, what to do.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;

/// A failed request.
#[derive(Debug)]
pub struct ApiError {
    status: StatusCode,
    message: String,
    // The setting a 403 refused, as the body's `setting`.
    setting: Option<String>,
}

impl ApiError {
    fn new(status: StatusCode, message: impl Into<String>) -> Self {
        Self {
            status,
            message: message.into(),
            setting: None,
        }
    }

    /// Its status.
    pub fn status(&self) -> StatusCode {
        self.status
    }

    /// What went wrong, for logs.
    pub fn message(&self) -> &str {
        &self.message
    }

    /// The same error, its message after `prefix` (which item of a batch).
    pub fn prefixed(mut self, prefix: &str) -> Self {
        self.message = format!("{prefix}{}", self.message);
        self
    }

    /// Any status with a message (the request guard's 408, 413, 414, 421,
    /// 431, and error responses made JSON after the fact).
    pub fn with_status(status: StatusCode, message: impl Into<String>) -> Self {
        Self::new(status, message)
    }

    /// 403: the request asks for more than the server allows; `setting`
    /// names what would widen.
    pub fn forbidden(widening: super::ceiling::Widening) -> Self {
        Self {
            status: StatusCode::FORBIDDEN,
            message: widening.message,
            setting: Some(widening.setting),
        }
    }

    /// 400: the request is malformed.
    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, message)
    }

    /// 401: no or a wrong token.
    pub fn unauthorized(message: impl Into<String>) -> Self {
        Self::new(StatusCode::UNAUTHORIZED, message)
    }

    /// 404: no such session or approval.
    pub fn not_found(message: impl Into<String>) -> Self {
        Self::new(StatusCode::NOT_FOUND, message)
    }

    /// 405: the endpoint exists, not with this method.
    pub fn method_not_allowed(message: impl Into<String>) -> Self {
        Self::new(StatusCode::METHOD_NOT_ALLOWED, message)
    }

    /// 409: the session is not in a state that allows it (running
    /// elsewhere, not running here, already answered).
    pub fn conflict(message: impl Into<String>) -> Self {
        Self::new(StatusCode::CONFLICT, message)
    }

    /// 500: the server failed (a store error, say).
    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(StatusCode::INTERNAL_SERVER_ERROR, message)
    }
}

impl IntoResponse for ApiError {
    fn into_response(mut self) -> Response {
        // A store error while the database is unreachable is the outage,
        // not a fault of the server: 503, saying since when, and that
        // sessions wait for it.
        let down_since = pod::stats::store_down_since()
            .filter(|_| self.status == StatusCode::INTERNAL_SERVER_ERROR);
        if let Some(since) = down_since {
            self.status = StatusCode::SERVICE_UNAVAILABLE;
            self.message = format!(
                "the session database is unreachable since {} (sessions are paused and continue \
                 when it is back): {}",
                since.format("%Y-%m-%d %H:%M:%S UTC"),
                self.message
            );
        }
        if self.status.is_server_error() {
            tracing::warn!(status = %self.status, error = %self.message, "API request failed");
        }
        let body = match self.setting {
            Some(setting) => serde_json::json!({ "error": self.message, "setting": setting }),
            None => serde_json::json!({ "error": self.message }),
        };
        let mut response = (self.status, Json(body)).into_response();
        if down_since.is_some() {
            response.headers_mut().insert(
                axum::http::header::RETRY_AFTER,
                axum::http::HeaderValue::from_static("5"),
            );
        }
        response
    }
}

/// Parses a JSON body into `T`: a malformed body is a 400 saying why.
pub fn parse<T: serde::de::DeserializeOwned>(body: &[u8]) -> Result<T, ApiError> {
    serde_json::from_slice(body)
        .map_err(|err| ApiError::bad_request(format!("invalid JSON body: {err}")))
}
