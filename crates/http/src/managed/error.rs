//! The Managed Agents API's error envelope:
//! `{"type": "error", "error": {"type": KIND, "message": ...}}`, with the
//! HTTP statuses the SDKs map to their exception types (400
//! `BadRequestError`, 401, 403, 404 `NotFoundError`, 409, 500).

use crate::error::ApiError;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;

/// A failed Managed Agents request.
#[derive(Debug)]
pub(crate) struct Error {
    status: StatusCode,
    message: String,
}

impl Error {
    fn new(status: StatusCode, message: impl Into<String>) -> Self {
        Self {
            status,
            message: message.into(),
        }
    }

    /// 400: the request is malformed, or asks for what pod does not do.
    pub fn invalid(message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, message)
    }

    /// 400: a feature pod does not support yet, named.
    pub fn unsupported(feature: &str) -> Self {
        Self::invalid(format!(
            "pod does not support {feature} yet (docs/managed-agents.md lists what it serves)"
        ))
    }

    /// 401: no or a wrong key.
    pub fn unauthorized(message: impl Into<String>) -> Self {
        Self::new(StatusCode::UNAUTHORIZED, message)
    }

    /// 404: no such agent, environment, session or endpoint.
    pub fn not_found(message: impl Into<String>) -> Self {
        Self::new(StatusCode::NOT_FOUND, message)
    }

    /// 409: the session is not in a state that allows it.
    pub fn conflict(message: impl Into<String>) -> Self {
        Self::new(StatusCode::CONFLICT, message)
    }

    /// 500: the server failed (a file it keeps could not be written).
    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(StatusCode::INTERNAL_SERVER_ERROR, message)
    }

    /// Whether it is a 400.
    /// Its HTTP status.
    pub fn status(&self) -> StatusCode {
        self.status
    }

    pub fn is_bad_request(&self) -> bool {
        self.status == StatusCode::BAD_REQUEST
    }

    /// The envelope's `error.type` for the status.
    fn kind(&self) -> &'static str {
        match self.status.as_u16() {
            400 | 409 | 422 => "invalid_request_error",
            401 => "authentication_error",
            403 => "permission_error",
            404 => "not_found_error",
            413 => "request_too_large",
            429 => "rate_limit_error",
            503 | 529 => "overloaded_error",
            _ => "api_error",
        }
    }
}

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

/// The native API's errors (the runner's, the ceiling's) keep their
/// status and message.
impl From<ApiError> for Error {
    fn from(err: ApiError) -> Self {
        Self::new(err.status(), err.message())
    }
}

impl IntoResponse for Error {
    fn into_response(self) -> Response {
        if self.status.is_server_error() {
            tracing::warn!(status = %self.status, error = %self.message, "Managed Agents request failed");
        }
        let body = serde_json::json!({
            "type": "error",
            "error": {"type": self.kind(), "message": self.message},
        });
        (self.status, Json(body)).into_response()
    }
}

/// Parses a JSON body into `T`: a malformed one is a 400 saying why.
pub(crate) fn parse<T: serde::de::DeserializeOwned>(body: &[u8]) -> Result<T, Error> {
    serde_json::from_slice(body).map_err(|err| Error::invalid(format!("invalid JSON body: {err}")))
}
