//! `pod serve --http ADDR`: an HTTP API over the sessions of the store and
//! a live web dashboard, served by the same process.
//!
//! Every `/api` request needs the bearer token ([`auth`]). The API lists,
//! creates and reads sessions (history page by page), sends prompts,
//! notifications and cancels to the sessions this server runs ([`runner`]),
//! lists and answers their approvals, and streams events ([`sse`]). The
//! dashboard is three static files in this crate (no build step); it talks
//! to the same API. No secret (API keys, the token) is ever served.

mod api;
mod assets;
pub mod auth;
mod error;
pub mod runner;
mod sse;
mod summaries;

use anyhow::{bail, Context, Result};
use axum::routing::{get, post};
use axum::Router;
use pod::CancellationToken;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

pub use runner::Runner;

/// A bound listener with its token, ready to serve: binding first means a
/// taken port or a refused address fails `pod serve` at once, before any
/// worker starts.
pub struct Bound {
    listener: tokio::net::TcpListener,
    token: auth::Token,
    place: crate::commands::Place,
}

/// Checks the address, loads (or makes) the token and binds `addr`.
pub async fn bind(
    addr: SocketAddr,
    token_file: Option<PathBuf>,
    place: crate::commands::Place,
) -> Result<Bound> {
    if !addr.ip().is_loopback() && token_file.is_none() {
        bail!(crate::error::Failure::new(
            format!("refusing to serve {addr} without --token-file: it is reachable from other machines"),
            "make a token (at least 16 random characters) in a file only you can read and pass \
             --token-file FILE, or bind 127.0.0.1"
        ));
    }
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .with_context(|| format!("cannot listen on {addr}"))?;
    let token = auth::load(place.home.path(), token_file.as_deref())?;
    Ok(Bound {
        listener,
        token,
        place,
    })
}

impl Bound {
    /// Serves until `stop` fires; then every event stream ends, and the
    /// sessions running here are shut down.
    pub async fn serve(self, runner: Runner, stop: CancellationToken) -> Result<()> {
        let Bound {
            listener,
            token,
            place,
        } = self;
        let bound = listener.local_addr().context("no local address")?;
        let state = api::AppState {
            runner: runner.clone(),
            store: place.store.clone(),
            summaries: Default::default(),
            server: format!(
                "{} ({})",
                pod::SessionStore::location(place.store.as_ref()),
                std::process::id()
            ),
            stop: stop.clone(),
        };
        let app = router(state, Arc::clone(&token.value));
        let mut lines = vec![format!("pod serve: HTTP API on http://{bound}/api")];
        match token.created {
            // Printed once: later starts say where it is kept.
            true => lines.push(format!(
                "token (kept in {}, shown only now): {}",
                token.path.display(),
                token.value
            )),
            false => lines.push(format!("token in {}", token.path.display())),
        }
        lines.push(format!("dashboard: http://{bound}/#token=TOKEN"));
        crate::output::print(&format!("{}\n", lines.join("\n")))?;
        // Open event streams end when `stop` fires (see `sse`), so the
        // graceful shutdown does not wait for watchers to leave.
        axum::serve(listener, app)
            .with_graceful_shutdown(async move { stop.cancelled().await })
            .await
            .context("the HTTP server failed")?;
        runner.shutdown().await;
        Ok(())
    }
}

fn router(state: api::AppState, token: Arc<str>) -> Router {
    let api = Router::new()
        .route("/sessions", get(api::list).post(api::create))
        .route("/sessions/{id}", get(api::get))
        .route("/sessions/{id}/history", get(api::history))
        .route("/sessions/{id}/events", get(sse::session))
        .route("/sessions/{id}/prompt", post(api::prompt))
        .route("/sessions/{id}/notify", post(api::notify))
        .route("/sessions/{id}/cancel", post(api::cancel))
        .route("/approvals", get(api::approvals))
        .route("/approvals/{id}", post(api::answer))
        .route("/events", get(sse::all))
        .fallback(|| async { error::ApiError::not_found("no such API endpoint") })
        .method_not_allowed_fallback(|| async {
            error::ApiError::method_not_allowed("this endpoint does not take that method")
        })
        .layer(axum::middleware::from_fn_with_state(token, auth::require))
        .with_state(state);
    Router::new()
        .nest("/api", api)
        .route("/", get(assets::index))
        .route("/assets/{file}", get(assets::file))
}
