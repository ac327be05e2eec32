//! The Claude Managed Agents API (beta `managed-agents-2026-04-01`) over
//! pod's own sessions, so the official SDKs (`client.beta.agents`,
//! `environments`, `sessions`, `sessions.events`) drive `pod serve`
//! unchanged: agents and environments are small JSON documents (files
//! under `POD_HOME/managed/`, or a fleet's PostgreSQL), a session is an ordinary pod session started by the
//! runner (the ceiling applies; it shows in `pod sessions` and the
//! dashboard), and its events are its log, translated ([`events`]).
//!
//! It must not know the command line; it knows the runner, the store and
//! the tails only through what the native API already uses.
//! docs/managed-agents.md has the mapping and what is not supported yet.

mod agents;
mod answers;
mod environments;
mod error;
mod events;
mod files;
mod mcp;
mod outcomes;
mod request;
mod sessions;
mod stream;

use super::api::AppState;
use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::Response;
use axum::routing::{get, post};
use axum::Router;
use error::Error;
use std::sync::Arc;

/// What the Managed Agents handlers share.
#[derive(Clone)]
pub(crate) struct Managed {
    app: AppState,
    files: files::Files,
    // Starting a session's first turn is one at a time, so two first
    // messages cannot both create its pod session.
    starting: Arc<tokio::sync::Mutex<()>>,
    // Wakes the event streams of sessions whose log did not exist yet.
    started: Arc<tokio::sync::Notify>,
}

impl Managed {
    /// Tells the webhooks of `change` to resource `id`, once it is kept
    /// (the API's `agent.created`, `session.archived`, …).
    fn changed(&self, change: &str, id: &str) {
        self.app.runner.launcher().notify_resource(change, id);
    }
}

/// The `/v1` routes, behind the server's token as an API key.
pub(crate) fn router(app: AppState, token: Arc<str>) -> Router {
    let files = files::Files::new(app.runner.documents());
    let managed = Managed {
        app,
        files,
        starting: Arc::default(),
        started: Arc::default(),
    };
    let v1 = Router::new()
        .route("/agents", get(agents::list).post(agents::create))
        .route("/agents/{id}", get(agents::retrieve).post(agents::update))
        .route("/agents/{id}/archive", post(agents::archive))
        .route("/agents/{id}/versions", get(agents::versions))
        .route(
            "/environments",
            get(environments::list).post(environments::create),
        )
        .route(
            "/environments/{id}",
            get(environments::retrieve)
                .post(environments::update)
                .delete(environments::delete),
        )
        .route("/environments/{id}/archive", post(environments::archive))
        .route("/sessions", get(sessions::list).post(sessions::create))
        .route(
            "/sessions/{id}",
            get(sessions::retrieve)
                .post(sessions::update)
                .delete(sessions::delete),
        )
        .route("/sessions/{id}/archive", post(sessions::archive))
        .route(
            "/sessions/{id}/events",
            get(events::list).post(events::send),
        )
        .route("/sessions/{id}/events/stream", get(stream::stream))
        .fallback(unsupported)
        .method_not_allowed_fallback(|| async {
            Error::not_found("this Managed Agents endpoint does not take that method")
        })
        .layer(axum::middleware::from_fn_with_state(token, require_key))
        .with_state(managed);
    Router::new().nest("/v1", v1)
}

/// Applies a `metadata` patch of an update to `metadata`: a string
/// upserts its key, `null` deletes it (and so does `""` when
/// `empty_deletes`, as environments take it).
pub(crate) fn patch_metadata(
    metadata: &mut std::collections::BTreeMap<String, String>,
    patch: &serde_json::Map<String, serde_json::Value>,
    empty_deletes: bool,
) -> Result<(), Error> {
    use serde_json::Value;
    for (key, value) in patch {
        match value {
            Value::Null => {
                metadata.remove(key);
            }
            Value::String(text) if empty_deletes && text.is_empty() => {
                metadata.remove(key);
            }
            Value::String(text) => {
                metadata.insert(key.clone(), text.clone());
            }
            _ => return Err(Error::invalid("`metadata` values must be strings or null")),
        }
    }
    Ok(())
}

/// What pod does not serve yet: updates, archives, deletes, vaults,
/// memory stores, skills, threads…
async fn unsupported(request: Request) -> Error {
    Error::not_found(format!(
        "pod does not support {} {} yet (docs/managed-agents.md lists what it serves)",
        request.method(),
        request.uri().path()
    ))
}

/// The server's token as the API key: `x-api-key` (what the SDKs send) or
/// `Authorization: Bearer`. The `anthropic-beta` header is accepted, not
/// required.
async fn require_key(
    State(token): State<Arc<str>>,
    request: Request,
    next: Next,
) -> Result<Response, Error> {
    let headers = request.headers();
    let given = headers
        .get("x-api-key")
        .and_then(|value| value.to_str().ok())
        .or_else(|| {
            headers
                .get(axum::http::header::AUTHORIZATION)
                .and_then(|value| value.to_str().ok())
                .and_then(|value| value.strip_prefix("Bearer "))
        });
    match given {
        Some(given) if super::auth::same(given.trim().as_bytes(), token.as_bytes()) => {
            if let Some(ticket) = request.extensions().get::<Arc<crate::admission::Ticket>>() {
                ticket.promote();
            }
            Ok(next.run(request).await)
        }
        Some(_) => Err(Error::unauthorized(
            "wrong API key: use the token `pod serve --http` printed (kept in \
             POD_HOME/http-token)",
        )),
        None => Err(Error::unauthorized(
            "missing API key: send the token `pod serve --http` printed as `x-api-key` \
             (ANTHROPIC_API_KEY for the SDKs)",
        )),
    }
}

/// A list's page: `limit` items from the opaque cursor `page` (an offset),
/// and the cursor of the next page when there is one.
fn page<T: Clone>(
    items: &[T],
    limit: Option<&str>,
    page: Option<&str>,
) -> Result<(Vec<T>, Option<String>), Error> {
    let limit = match limit {
        None => 20,
        Some(text) => match text.parse::<usize>() {
            Ok(n) if (1..=1000).contains(&n) => n,
            _ => {
                return Err(Error::invalid(format!(
                    "limit must be 1 to 1000, not {text:?}"
                )))
            }
        },
    };
    let start = match page {
        None | Some("") => 0,
        Some(cursor) => cursor
            .strip_prefix("page_")
            .and_then(|n| n.parse::<usize>().ok())
            .ok_or_else(|| {
                Error::invalid(format!("page {cursor:?} is not a cursor this server gave"))
            })?,
    };
    let data: Vec<T> = items.iter().skip(start).take(limit).cloned().collect();
    let end = start + data.len();
    let next = (end < items.len()).then(|| format!("page_{end}"));
    Ok((data, next))
}

/// The query's pairs, in order (keys may repeat: `types[]=a&types[]=b`).
fn query_pairs(query: Option<&str>) -> Vec<(String, String)> {
    let decode = |text: &str| -> String {
        let bytes = text.replace('+', " ");
        let bytes = bytes.as_bytes();
        let mut out = Vec::with_capacity(bytes.len());
        let mut i = 0;
        while i < bytes.len() {
            let hex = bytes
                .get(i + 1..i + 3)
                .and_then(|h| std::str::from_utf8(h).ok());
            match (bytes[i], hex.and_then(|h| u8::from_str_radix(h, 16).ok())) {
                (b'%', Some(byte)) => {
                    out.push(byte);
                    i += 3;
                }
                (byte, _) => {
                    out.push(byte);
                    i += 1;
                }
            }
        }
        String::from_utf8_lossy(&out).into_owned()
    };
    query
        .unwrap_or_default()
        .split('&')
        .filter(|pair| !pair.is_empty())
        .map(|pair| match pair.split_once('=') {
            Some((key, value)) => (decode(key), decode(value)),
            None => (decode(pair), String::new()),
        })
        .collect()
}

/// The first value of `key` in `pairs`.
fn query_value<'a>(pairs: &'a [(String, String)], key: &str) -> Option<&'a str> {
    pairs
        .iter()
        .find(|(k, _)| k == key)
        .map(|(_, v)| v.as_str())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pages_follow_their_cursor_and_bad_ones_are_refused() {
        let items: Vec<u32> = (0..5).collect();
        let (first, next) = page(&items, Some("2"), None).unwrap();
        assert_eq!((first, next.as_deref()), (vec![0, 1], Some("page_2")));
        let (last, next) = page(&items, Some("3"), Some("page_2")).unwrap();
        assert_eq!((last, next), (vec![2, 3, 4], None));
        assert!(page(&items, Some("0"), None).is_err());
        assert!(page(&items, None, Some("elsewhere")).is_err());
    }

    #[test]
    fn queries_decode_and_keep_repeated_keys() {
        let pairs = query_pairs(Some(
            "types%5B%5D=agent.message&types[]=a+b&limit=3&beta=true",
        ));
        assert_eq!(pairs[0], ("types[]".into(), "agent.message".into()));
        assert_eq!(pairs[1], ("types[]".into(), "a b".into()));
        assert_eq!(query_value(&pairs, "limit"), Some("3"));
        assert_eq!(query_value(&pairs, "page"), None);
    }
}
