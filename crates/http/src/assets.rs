//! The dashboard's files, compiled in: no build step, nothing to install.
//! They hold no data; every datum comes from the API with the token.
//! The script is five plain files, loaded in order: `common.js` (safe
//! text, the API, streams and the connection indicator), `list.js` (the
//! sessions table), `session.js` (a session's page), `schedules.js` (the
//! fleet's schedules under the table) and `app.js` (routes).

use axum::extract::Path;
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};

const INDEX: &str = include_str!("assets/index.html");
const APP_CSS: &str = include_str!("assets/app.css");
const SCRIPTS: [(&str, &str); 5] = [
    ("common.js", include_str!("assets/common.js")),
    ("list.js", include_str!("assets/list.js")),
    ("session.js", include_str!("assets/session.js")),
    ("schedules.js", include_str!("assets/schedules.js")),
    ("app.js", include_str!("assets/app.js")),
];

/// `GET /`.
pub async fn index() -> Response {
    ([(header::CONTENT_TYPE, "text/html; charset=utf-8")], INDEX).into_response()
}

/// `GET /assets/{file}`.
pub async fn file(Path(file): Path<String>) -> Response {
    if file == "app.css" {
        return ([(header::CONTENT_TYPE, "text/css; charset=utf-8")], APP_CSS).into_response();
    }
    match SCRIPTS.iter().find(|(name, _)| *name == file) {
        Some((_, script)) => (
            [(header::CONTENT_TYPE, "text/javascript; charset=utf-8")],
            *script,
        )
            .into_response(),
        None => (StatusCode::NOT_FOUND, "no such file").into_response(),
    }
}
