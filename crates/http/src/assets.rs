//! The dashboard's files, compiled in: no build step, nothing to install.
//! They hold no data; every datum comes from the API with the token.

use axum::extract::Path;
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};

const INDEX: &str = include_str!("assets/index.html");
const APP_JS: &str = include_str!("assets/app.js");
const APP_CSS: &str = include_str!("assets/app.css");

/// `GET /`.
pub async fn index() -> Response {
    ([(header::CONTENT_TYPE, "text/html; charset=utf-8")], INDEX).into_response()
}

/// `GET /assets/{file}`.
pub async fn file(Path(file): Path<String>) -> Response {
    match file.as_str() {
        "app.js" => (
            [(header::CONTENT_TYPE, "text/javascript; charset=utf-8")],
            APP_JS,
        )
            .into_response(),
        "app.css" => ([(header::CONTENT_TYPE, "text/css; charset=utf-8")], APP_CSS).into_response(),
        _ => (StatusCode::NOT_FOUND, "no such file").into_response(),
    }
}
