//! pod's HTTP API and live web dashboard (`pod serve --http ADDR`): the
//! sessions of a store listed, created, prompted, cancelled and watched
//! over HTTP, their approvals answered, by the operator and their scripts.
//!
//! Every `/api` request needs the bearer token ([`auth`]). The API lists,
//! creates and reads sessions (history page by page), sends prompts,
//! notifications and cancels to the sessions this server runs ([`Runner`]),
//! lists and answers their approvals, and streams events (Server-Sent
//! Events). The dashboard is three static files in this crate (no build
//! step); it talks to the same API. No secret (API keys, the token) is ever
//! served.
//!
//! A client gets at most what the server was started with ([`ceiling`]);
//! connections are bounded in number, time and size, and a loopback
//! server answers only for its own names. Sessions start through
//! `pod-launch`, like every front end's.
//!
//! It must not know the command line or the terminal: the `pod` binary
//! parses `pod serve`'s flags into [`ServeOptions`] and prints
//! [`Bound::banner`].

#![deny(missing_docs)]

mod admission;
mod api;
mod assets;
pub mod auth;
pub mod ceiling;
pub mod config;
pub mod documents;
mod error;
mod failure;
mod guard;
mod limits;
mod listing;
mod managed;
pub mod metrics;
pub mod runner;
mod server;
mod sse;
mod state;
mod summaries;
mod tail;
mod timeouts;
mod trigger_api;
mod triggers;

use axum::routing::{get, post};
use axum::Router;
use pod::CancellationToken;
use pod_launch::Launcher;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

pub use documents::{DocumentError, Documents, FileDocuments};
pub use failure::ServeError;
pub use runner::{Queue, Runner, ScheduleFiles};

/// How `pod serve --http` was started.
#[derive(Debug, Clone)]
pub struct ServeOptions {
    /// Where to listen (port 0 picks one).
    pub addr: SocketAddr,
    /// The token's file (else `POD_HOME/http-token`, made when missing).
    pub token_file: Option<PathBuf>,
    /// Where API clients may put workspaces (with `[http] workspace_roots`;
    /// none: the directory the server runs in).
    pub workspace_roots: Vec<PathBuf>,
    /// The model of sessions created without a profile.
    pub model: pod_launch::ModelFlags,
    /// The approval flags sessions start from, and the most they may get.
    pub approval: pod::ApprovalFlags,
    /// The sandbox sessions start from, and the widest allowed.
    pub sandbox: pod_launch::SandboxFlags,
}

/// A bound listener with its token, ready to serve: binding first means a
/// taken port or a refused address fails `pod serve` at once, before any
/// worker starts.
pub struct Bound {
    listener: tokio::net::TcpListener,
    token: auth::Token,
    launcher: Launcher,
    guard: guard::Guard,
    triggers: Arc<triggers::Triggers>,
}

/// Resolves what the server allows (its flags and config file: the
/// defaults of the sessions it creates and the most any may get), checks
/// the token and binds the address. The runner also takes the questions of
/// sessions a fleet worker of this process runs.
pub async fn start(
    options: ServeOptions,
    launcher: Launcher,
) -> Result<(Runner, Bound), ServeError> {
    let flags = pod_launch::Flags {
        model: options.model.clone(),
        approval: options.approval.clone(),
        sandbox: options.sandbox,
        ..Default::default()
    };
    let server = pod_launch::Resolved::resolve(&flags, None).map_err(ServeError::Settings)?;
    let http = config::read(&server.file)?;
    let mut roots = Vec::new();
    for root in options.workspace_roots.iter().chain(&http.workspace_roots) {
        roots.push(root.canonicalize().map_err(|err| {
            ServeError::io(
                format!("workspace root {} is not a directory here", root.display()),
                err,
            )
        })?);
    }
    if roots.is_empty() {
        roots.push(std::env::current_dir().map_err(|err| {
            ServeError::io("no working directory for the default workspace root", err)
        })?);
    }
    // Sessions' commands must not read the token file, wherever it is.
    let private: Vec<PathBuf> = options.token_file.iter().cloned().collect();
    let mut all_private = private.clone();
    all_private.push(launcher.place().home.path().to_path_buf());
    all_private.extend(server.file.path.parent().map(std::path::Path::to_path_buf));
    let mut ceiling = ceiling::Ceiling::new(&server, roots, &all_private);
    ceiling.mcp_urls = http.mcp_server_urls.clone();
    let allowed = runner::Allowed {
        model: options.model,
        approval: options.approval,
        sandbox: options.sandbox,
        ceiling,
        private,
    };
    let mut triggers = triggers::Triggers::read(&server.file)
        .map_err(|why| ServeError::refused(why, "docs/triggers.md lists a trigger's keys"))?;
    let trigger_dir = launcher.place().home.path().join("triggers");
    let mut bound = bind(options.addr, options.token_file, launcher.clone(), &http).await?;
    let runner = Runner::new(launcher, allowed);
    // A trigger cannot widen what the server allows: checked now, and at
    // each delivery.
    // Those defined through the API, kept under POD_HOME: one the server
    // would refuse now is left out (and said), not a reason not to start.
    for skipped in triggers.load_api(trigger_dir, |request| {
        runner
            .check(request)
            .map_err(|err| err.message().to_string())
    }) {
        tracing::error!("a trigger defined through the API is left out: {skipped}");
    }
    for (name, request) in triggers.templates() {
        runner.check(&request).map_err(|err| {
            ServeError::refused(
                format!("[triggers.{name}]: {}", err.message()),
                "a trigger's session settings must be within what the server allows",
            )
        })?;
    }
    bound.triggers = Arc::new(triggers);
    Ok((runner, bound))
}

/// Checks the address, loads (or makes) and checks the token, and binds
/// `addr`.
async fn bind(
    addr: SocketAddr,
    token_file: Option<PathBuf>,
    launcher: Launcher,
    http: &config::HttpConfig,
) -> Result<Bound, ServeError> {
    if !addr.ip().is_loopback() && token_file.is_none() {
        return Err(ServeError::refused(
            format!(
                "refusing to serve {addr} without --token-file: it is reachable from other \
                 machines"
            ),
            "make a token of at least 128 random bits in a file only you can read \
             ((umask 077; head -c 32 /dev/urandom | base64 > FILE)) and pass --token-file FILE, \
             or bind 127.0.0.1",
        ));
    }
    let token = auth::load(launcher.place().home.path(), token_file.as_deref())?;
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|err| ServeError::io(format!("cannot listen on {addr}"), err))?;
    let bound = listener
        .local_addr()
        .map_err(|err| ServeError::io("no local address", err))?;
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
        launcher,
        guard: guard::Guard {
            limits: http.limits.clone(),
            hosts,
        },
        triggers: Arc::default(),
    })
}

impl Bound {
    /// The most connections the API serves at once (`[http]
    /// max_connections`): files a fleet worker in the same process keeps
    /// off its sessions' share.
    pub fn max_connections(&self) -> usize {
        self.guard.limits.max_connections
    }

    /// What the server says when it starts: the API's address, the token
    /// (the first time only) or where it is kept, and the dashboard's URL.
    pub fn banner(&self) -> Vec<String> {
        let bound = match self.listener.local_addr() {
            Ok(addr) => addr.to_string(),
            Err(_) => "?".into(),
        };
        let mut lines = vec![format!("pod serve: HTTP API on http://{bound}/api")];
        match self.token.created {
            // Printed once: later starts say where it is kept.
            true => lines.push(format!(
                "token (kept in {}, shown only now): {}",
                self.token.path.display(),
                self.token.value
            )),
            false => lines.push(format!("token in {}", self.token.path.display())),
        }
        // The token is on screen only when it was just made: then the link
        // carries it; later, the dashboard's form asks for it.
        lines.push(match self.token.created {
            true => format!("dashboard: http://{bound}/#token={}", self.token.value),
            false => format!(
                "dashboard: http://{bound}/ (it asks for the token in {})",
                self.token.path.display()
            ),
        });
        lines
    }

    /// Serves until `stop` fires; then every event stream ends, and the
    /// sessions running here are shut down.
    pub async fn serve(self, runner: Runner, stop: CancellationToken) {
        let Bound {
            listener,
            token,
            launcher,
            guard,
            triggers,
        } = self;
        let state = api::AppState {
            shared: state::Shared {
                runner: runner.clone(),
                store: launcher.place().store.clone(),
                summaries: Default::default(),
                server: format!(
                    "{} ({})",
                    pod::SessionStore::location(launcher.place().store.as_ref()),
                    std::process::id()
                ),
                stop: stop.clone(),
            },
            tails: Default::default(),
            listing: Default::default(),
            triggers,
        };
        let limits = guard.limits.clone();
        let sweeper = tokio::spawn(timeouts::sweep(state.clone()));
        let app = router(state, Arc::clone(&token.value), guard);
        // Open event streams end when `stop` fires (see `sse`), so the
        // graceful shutdown does not wait for watchers to leave.
        server::serve(listener, app, stop, limits).await;
        sweeper.abort();
        runner.shutdown().await;
    }
}

fn router(state: api::AppState, token: Arc<str>, guard: guard::Guard) -> Router {
    // The Managed Agents API under /v1, with the token as its API key.
    let managed = managed::router(state.clone(), Arc::clone(&token));
    let api = Router::new()
        .route("/sessions", get(api::list).post(api::create))
        .route("/sessions/batch", post(api::create_batch))
        .route("/sessions/{id}", get(api::get).patch(limits::patch))
        .route("/sessions/{id}/history", get(api::history))
        .route("/sessions/{id}/diff", get(api::diff))
        .route("/sessions/{id}/events", get(sse::session))
        .route("/sessions/{id}/prompt", post(api::prompt))
        .route("/sessions/{id}/notify", post(api::notify))
        .route("/sessions/{id}/cancel", post(api::cancel))
        .route("/approvals", get(api::approvals))
        .route("/approvals/{id}", post(api::answer))
        .route("/events", get(sse::all))
        .route("/server", get(api::server))
        .route("/schedules", get(api::schedules).post(api::add_schedule))
        .route(
            "/triggers",
            get(trigger_api::list).post(trigger_api::define),
        )
        .route(
            "/schedules/{name}",
            axum::routing::patch(api::patch_schedule).delete(api::delete_schedule),
        )
        .fallback(|| async { error::ApiError::not_found("no such API endpoint") })
        .method_not_allowed_fallback(|| async {
            error::ApiError::method_not_allowed("this endpoint does not take that method")
        })
        .layer(axum::middleware::from_fn_with_state(
            Arc::clone(&token),
            auth::require,
        ))
        .with_state(state.clone());
    // Prometheus' scrape, with the same bearer token.
    let metrics = Router::new()
        .route("/metrics", get(api::metrics))
        .layer(axum::middleware::from_fn_with_state(
            Arc::clone(&token),
            auth::require,
        ))
        .with_state(state.clone());
    // Webhook deliveries carry a signature, not the token; removing a
    // trigger takes the token.
    let remove = axum::handler::Handler::layer(
        trigger_api::remove,
        axum::middleware::from_fn_with_state(token, auth::require),
    );
    let triggers = Router::new()
        .route("/api/triggers/{name}", post(api::deliver).delete(remove))
        .with_state(state);
    Router::new()
        .merge(managed)
        .merge(triggers)
        .nest("/api", api)
        .merge(metrics)
        .route("/", get(assets::index))
        .route("/assets/{file}", get(assets::file))
        .fallback(|| async { error::ApiError::not_found("no such page") })
        .layer(axum::middleware::from_fn_with_state(
            Arc::new(guard),
            guard::check,
        ))
}
