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
pub mod ceiling;
pub mod config;
mod error;
mod guard;
pub mod runner;
mod server;
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
    guard: guard::Guard,
}

/// Checks the address, loads (or makes) and checks the token, and binds
/// `addr`.
pub async fn bind(
    addr: SocketAddr,
    token_file: Option<PathBuf>,
    place: crate::commands::Place,
    http: &config::HttpConfig,
) -> Result<Bound> {
    if !addr.ip().is_loopback() && token_file.is_none() {
        bail!(crate::error::Failure::new(
            format!("refusing to serve {addr} without --token-file: it is reachable from other machines"),
            "make a token of at least 128 random bits in a file only you can read \
             ((umask 077; head -c 32 /dev/urandom | base64 > FILE)) and pass --token-file FILE, \
             or bind 127.0.0.1"
        ));
    }
    let token = auth::load(place.home.path(), token_file.as_deref())?;
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .with_context(|| format!("cannot listen on {addr}"))?;
    let bound = listener.local_addr().context("no local address")?;
    // A loopback server answers only for its own names (a page of another
    // site that rebinds its name to 127.0.0.1 is refused); a public one
    // for the names the operator lists, or any.
    let hosts = match (bound.ip().is_loopback(), http.allowed_hosts.is_empty()) {
        (true, _) => Some(guard::Guard::loopback_hosts(bound, &http.allowed_hosts)),
        (false, true) => None,
        (false, false) => Some(
            http.allowed_hosts
                .iter()
                .map(|h| h.to_ascii_lowercase())
                .collect(),
        ),
    };
    Ok(Bound {
        listener,
        token,
        place,
        guard: guard::Guard {
            limits: http.limits.clone(),
            hosts,
        },
    })
}

/// Resolves what the server allows (its flags and config file: the
/// defaults of the sessions it creates and the most any may get), checks
/// the token and binds `addr`.
pub async fn start(
    args: &crate::cli::ServeArgs,
    addr: SocketAddr,
    place: crate::commands::Place,
) -> Result<(Runner, Bound)> {
    let flags = pod_launch::Flags {
        model: args.model.flags(),
        approval: args.approval.flags(),
        sandbox: args.sandbox.flags(),
        ..Default::default()
    };
    let server = pod_launch::Resolved::resolve(&flags, None)?;
    let http = config::read(&server.file)?;
    let mut roots = Vec::new();
    for root in args.workspace_root.iter().chain(&http.workspace_roots) {
        roots.push(root.canonicalize().with_context(|| {
            format!("workspace root {} is not a directory here", root.display())
        })?);
    }
    if roots.is_empty() {
        roots.push(
            std::env::current_dir()
                .context("no working directory for the default workspace root")?,
        );
    }
    // Sessions' commands must not read the token file, wherever it is.
    let private: Vec<PathBuf> = args.token_file.iter().cloned().collect();
    let mut all_private = private.clone();
    all_private.push(place.home.path().to_path_buf());
    all_private.extend(server.file.path.parent().map(std::path::Path::to_path_buf));
    let allowed = runner::Allowed {
        model: args.model.clone(),
        approval: args.approval.clone(),
        sandbox: args.sandbox.clone(),
        ceiling: ceiling::Ceiling::new(&server, roots, &all_private),
        private,
    };
    let bound = bind(addr, args.token_file.clone(), place.clone(), &http).await?;
    Ok((Runner::new(place, allowed), bound))
}

impl Bound {
    /// Serves until `stop` fires; then every event stream ends, and the
    /// sessions running here are shut down.
    pub async fn serve(self, runner: Runner, stop: CancellationToken) -> Result<()> {
        let Bound {
            listener,
            token,
            place,
            guard,
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
        let limits = guard.limits.clone();
        let app = router(state, Arc::clone(&token.value), guard);
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
        server::serve(listener, app, stop, limits).await;
        runner.shutdown().await;
        Ok(())
    }
}

fn router(state: api::AppState, token: Arc<str>, guard: guard::Guard) -> Router {
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
        .fallback(|| async { error::ApiError::not_found("no such page") })
        .layer(axum::middleware::from_fn_with_state(
            Arc::new(guard),
            guard::check,
        ))
}
