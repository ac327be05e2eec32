//! Notifications out: when an agent needs a person (a question waits), its
//! run stops at a budget, fails, or finishes, pod tells someone, by a
//! webhook and/or a command of the operator's.
//!
//! ```toml
//! [notify]
//! webhook = "https://hooks.example.com/pod"   # POSTed the event's JSON
//! secret_env = "POD_NOTIFY_SECRET"            # signs it (Standard Webhooks)
//! command = ["/usr/local/bin/page-me"]         # run with the JSON on stdin
//! events = ["question", "stopped", "failed", "finished"]
//! dashboard = "https://pod.example.com"        # links in the events
//! ```
//!
//! The body is a [Standard Webhooks](https://www.standardwebhooks.com/)
//! message: `{"type": "session.question", "timestamp": ..., "data": {...}}`
//! with the `webhook-id`, `webhook-timestamp` and `webhook-signature`
//! headers (`v1,` and the base64 HMAC-SHA256 of `id.timestamp.body`, keyed
//! with the secret: a `whsec_` secret is base64 after the prefix, any other
//! is taken as bytes), so a receiver verifies it with that project's
//! libraries.
//!
//! Delivery never blocks the agent: [`Notifier::send`] queues the event
//! for the session's delivery task and returns; a session's events go out
//! in order. A webhook is retried with back-off (1 s,
//! 2 s, 4 s, …) on a connection error, a timeout, a 408, a 429 or a 5xx;
//! the same message keeps its id across retries, so a receiver can drop
//! duplicates. A command runs once, killed after the timeout. Failures are
//! logged, never raised. A process about to exit waits a bounded time for
//! deliveries in flight ([`Outbox::flush`]).
//!
//! It knows nothing of sessions or Pods: front ends (through `pod-launch`)
//! turn session events into [`Event`]s.

#![deny(missing_docs)]

mod deliver;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{mpsc, Notify};
use uuid::Uuid;

/// The environment variable holding the signing secret, when `secret_env`
/// does not name another.
pub const DEFAULT_SECRET_ENV: &str = "POD_NOTIFY_SECRET";

/// Events of one session waiting for delivery; more are dropped (and
/// logged). A receiver that hangs holds each event for its whole retry
/// schedule: the cap bounds what a session can pile up behind it.
const QUEUE: usize = 64;

/// The `[notify]` table (and a profile's `notify` table): every key
/// optional, so a profile's keys replace the top-level ones.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NotifyConfig {
    /// Where events are POSTed (http or https).
    pub webhook: Option<String>,
    /// The environment variable holding the webhook's signing secret
    /// ([`DEFAULT_SECRET_ENV`] when unset; unsigned when that is unset too).
    pub secret_env: Option<String>,
    /// A program and its arguments, run with the event's JSON on stdin.
    pub command: Option<Vec<String>>,
    /// Which events go out (all when unset).
    pub events: Option<Vec<Kind>>,
    /// The dashboard's base URL, for links to the session.
    pub dashboard: Option<String>,
    /// How long one webhook attempt or the command may take (10 s).
    pub timeout_secs: Option<u64>,
    /// Webhook attempts after the first (5).
    pub retries: Option<u32>,
    /// The body's shape: pod's own (`pod`, the default), or the Claude
    /// Managed Agents API's webhook events (`managed-agents`), which that
    /// API's SDKs verify and parse (`client.beta.webhooks.unwrap`).
    pub format: Option<Format>,
}

/// The shape of a notification's body.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Format {
    /// `{"type": "session.stopped", "timestamp", "data": {...}}`.
    #[default]
    Pod,
    /// `{"type": "event", "id", "created_at", "data": {"type":
    /// "session.status_idled", "id": "sesn_…", ...}}`: a session's event
    /// named as the Managed Agents API names its webhooks, with the
    /// session's id as that API writes it.
    ManagedAgents,
}

impl NotifyConfig {
    /// `self` with every key `over` sets replaced.
    pub fn merged(self, over: NotifyConfig) -> Self {
        Self {
            webhook: over.webhook.or(self.webhook),
            secret_env: over.secret_env.or(self.secret_env),
            command: over.command.or(self.command),
            events: over.events.or(self.events),
            dashboard: over.dashboard.or(self.dashboard),
            timeout_secs: over.timeout_secs.or(self.timeout_secs),
            retries: over.retries.or(self.retries),
            format: over.format.or(self.format),
        }
    }

    /// Whether anything would be sent.
    pub fn is_set(&self) -> bool {
        self.webhook.is_some() || self.command.is_some()
    }
}

/// What happened.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    /// A question waits for a person's answer.
    Question,
    /// A run stopped at a budget (or made no progress).
    Stopped,
    /// A run failed.
    Failed,
    /// A run finished.
    Finished,
    /// A run stopped because the operator's checks kept failing.
    Unverified,
    /// A fleet's database has been unreachable for longer than the
    /// worker's threshold (its sessions are paused).
    DatabaseDown,
    /// The database is back after a [`Kind::DatabaseDown`] went out.
    DatabaseBack,
    /// A schedule fired: it started a session, or continued a heartbeat's
    /// (not sent unless `events` lists it).
    ScheduleFired,
    /// A schedule skipped a fire time: its last session was still going
    /// (not sent unless `events` lists it).
    ScheduleSkipped,
    /// A session was created through the Managed Agents API (not sent in
    /// pod's format unless `events` lists it).
    Created,
    /// A run of a session started: a prompt, an answer it waited for, a
    /// continuation (not sent in pod's format unless `events` lists it).
    Started,
    /// A verification round ended (not sent in pod's format unless
    /// `events` lists it).
    Evaluated,
    /// An agent, environment or session of the Managed Agents API was
    /// created, updated, archived or deleted ([`ResourceEvent`]; not sent
    /// in pod's format unless `events` lists it).
    Resource,
}

impl Kind {
    /// The message's `type`.
    pub fn type_name(self) -> &'static str {
        match self {
            Kind::Question => "session.question",
            Kind::Stopped => "session.stopped",
            Kind::Failed => "session.failed",
            Kind::Finished => "session.finished",
            Kind::Unverified => "session.unverified",
            Kind::DatabaseDown => "fleet.database_unreachable",
            Kind::DatabaseBack => "fleet.database_back",
            Kind::ScheduleFired => "schedule.fired",
            Kind::ScheduleSkipped => "schedule.skipped",
            Kind::Created => "session.created",
            Kind::Started => "session.started",
            Kind::Evaluated => "session.evaluated",
            Kind::Resource => "resource",
        }
    }
}

/// One event about one session.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Event {
    /// What happened.
    #[serde(skip)]
    pub kind: Kind,
    /// When.
    #[serde(skip)]
    pub at: DateTime<Utc>,
    /// The session.
    pub session_id: Uuid,
    /// Its task: the first line of its first prompt.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// Its workspace.
    pub workspace: PathBuf,
    /// The question waiting (`question` events): its id, call, tool and
    /// summary, and when it times out.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub question: Option<serde_json::Value>,
    /// How a person answers it from any machine (`question` events).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub answer_with: Option<String>,
    /// Why the run stopped or failed, or how it ended.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// The session on the dashboard, when `dashboard` is set.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub link: Option<String>,
    /// Whether the operator's checks passed (`finished` and `unverified`
    /// events of a session that has checks).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub verified: Option<bool>,
    /// The limit that stopped the run (`stopped` events): its kind, as
    /// `pod_budget_stops_total` labels it (`money`, `loop`, …).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stopped_by: Option<String>,
    /// The schedule and fire time (`schedule.*` events): `name`,
    /// `fire_at`, `outcome` (`started`, `continued`, `skipped`), `missed`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub schedule: Option<serde_json::Value>,
}

impl Event {
    /// An event of `kind` about session `session_id` in `workspace`, now.
    pub fn new(kind: Kind, session_id: Uuid, workspace: PathBuf) -> Self {
        Self {
            kind,
            at: Utc::now(),
            session_id,
            title: None,
            workspace,
            question: None,
            answer_with: None,
            reason: None,
            link: None,
            verified: None,
            stopped_by: None,
            schedule: None,
        }
    }

    /// The Managed Agents API's webhook event for this one, if it has one:
    /// a question is `session.requires_action`, a stop at a money, token,
    /// request or time limit `session.budget_reached`, and any other end
    /// of a run `session.status_idled`; a session created
    /// `session.created`, a run's start `session.status_run_started`, a
    /// verification round's end `session.outcome_evaluation_ended`.
    pub fn managed_body(&self) -> Option<Result<Vec<u8>, serde_json::Error>> {
        let kind = match self.kind {
            Kind::Created => "session.created",
            Kind::Started => "session.status_run_started",
            Kind::Evaluated => "session.outcome_evaluation_ended",
            Kind::Question => "session.requires_action",
            Kind::Stopped
                if self
                    .stopped_by
                    .as_deref()
                    .is_some_and(|by| by != "loop" && by != "continuations") =>
            {
                "session.budget_reached"
            }
            Kind::Stopped | Kind::Failed | Kind::Finished | Kind::Unverified => {
                "session.status_idled"
            }
            _ => return None,
        };
        Some(serde_json::to_vec(&serde_json::json!({
            "type": "event",
            "id": format!("wevt_{}", Uuid::new_v4().simple()),
            "created_at": self.at.to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
            "data": {
                "type": kind,
                "id": format!("sesn_{}", self.session_id.simple()),
                "organization_id": "pod",
                "workspace_id": "default",
            },
        })))
    }

    /// The message body: Standard Webhooks' `type`, `timestamp`, `data`.
    pub fn body(&self) -> Result<Vec<u8>, serde_json::Error> {
        serde_json::to_vec(&serde_json::json!({
            "type": self.kind.type_name(),
            "timestamp": self.at.to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
            "data": self,
        }))
    }
}

/// An event about a fleet worker's database, not about one session.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FleetEvent {
    /// [`Kind::DatabaseDown`] or [`Kind::DatabaseBack`].
    #[serde(skip)]
    pub kind: Kind,
    /// When.
    #[serde(skip)]
    pub at: DateTime<Utc>,
    /// The database, as the worker names it (no password).
    pub database: String,
    /// The worker that saw it (each worker of a fleet sends its own).
    pub worker: String,
    /// Since when the database has been unreachable.
    pub since: DateTime<Utc>,
    /// How long it was (or has been, so far) unreachable, in seconds.
    pub down_secs: f64,
}

impl FleetEvent {
    /// The message body: Standard Webhooks' `type`, `timestamp`, `data`.
    pub fn body(&self) -> Result<Vec<u8>, serde_json::Error> {
        serde_json::to_vec(&serde_json::json!({
            "type": self.kind.type_name(),
            "timestamp": self.at.to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
            "data": self,
        }))
    }
}

/// A change to a resource of the Managed Agents API served by `pod serve`:
/// `agent.created`, `environment.archived`, `session.deleted`, … with the
/// resource's id as that API writes it (`agent_…`, `env_…`, `sesn_…`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResourceEvent {
    /// When.
    pub at: DateTime<Utc>,
    /// The API's name of the change (`agent.updated`).
    pub change: String,
    /// The resource's id.
    pub id: String,
}

impl ResourceEvent {
    /// `change` of resource `id`, now.
    pub fn new(change: impl Into<String>, id: impl Into<String>) -> Self {
        Self {
            at: Utc::now(),
            change: change.into(),
            id: id.into(),
        }
    }

    /// The Managed Agents API's webhook event:
    /// `{"type": "event", "id", "created_at", "data": {"type", "id", ...}}`.
    pub fn managed_body(&self) -> Result<Vec<u8>, serde_json::Error> {
        serde_json::to_vec(&serde_json::json!({
            "type": "event",
            "id": format!("wevt_{}", Uuid::new_v4().simple()),
            "created_at": self.at.to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
            "data": {
                "type": self.change,
                "id": self.id,
                "organization_id": "pod",
                "workspace_id": "default",
            },
        }))
    }

    /// Pod's shape: Standard Webhooks' `type` (the change), `timestamp`,
    /// `data` (`{"id"}`).
    pub fn body(&self) -> Result<Vec<u8>, serde_json::Error> {
        serde_json::to_vec(&serde_json::json!({
            "type": self.change,
            "timestamp": self.at.to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
            "data": {"id": self.id},
        }))
    }
}

/// Why a `[notify]` table cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum NotifyError {
    /// The webhook is not an http(s) URL.
    #[error("[notify] webhook `{url}` is not an http:// or https:// URL")]
    Url {
        /// As written.
        url: String,
    },
    /// `secret_env` names a variable that is not set.
    #[error("[notify] secret_env names {name}, which is not set in the environment")]
    NoSecret {
        /// The variable.
        name: String,
    },
    /// A `whsec_` secret whose rest is not base64.
    #[error("the webhook secret in {name} starts with whsec_ but the rest is not base64")]
    BadSecret {
        /// The variable.
        name: String,
    },
    /// An empty `command`.
    #[error("[notify] command is empty: give the program and its arguments")]
    NoCommand,
    /// The HTTP client could not be built.
    #[error("cannot build the webhook's HTTP client")]
    Client(#[source] reqwest::Error),
}

/// The deliveries of a process, waited for before it exits.
#[derive(Clone, Debug, Default)]
pub struct Outbox {
    inner: Arc<OutboxInner>,
}

#[derive(Debug, Default)]
struct OutboxInner {
    in_flight: AtomicUsize,
    idle: Notify,
}

impl Outbox {
    /// Waits until every delivery in flight is done, at most `within`;
    /// whether they all are.
    pub async fn flush(&self, within: Duration) -> bool {
        let done = async {
            loop {
                let idle = self.inner.idle.notified();
                if self.inner.in_flight.load(Ordering::SeqCst) == 0 {
                    return;
                }
                idle.await;
            }
        };
        tokio::time::timeout(within, done).await.is_ok()
    }

    /// Deliveries not done yet.
    pub fn in_flight(&self) -> usize {
        self.inner.in_flight.load(Ordering::SeqCst)
    }

    fn started(&self) {
        self.inner.in_flight.fetch_add(1, Ordering::SeqCst);
    }

    fn done(&self) {
        if self.inner.in_flight.fetch_sub(1, Ordering::SeqCst) == 1 {
            self.inner.idle.notify_waiters();
        }
    }
}

/// One event's delivery, queued.
struct Job {
    kind: Kind,
    /// The session it is about; none for a [`FleetEvent`].
    session: Option<Uuid>,
    body: Vec<u8>,
}

/// Sends a session's events where its `[notify]` table says, one after
/// the other: a receiver sees them in the order they happened (a retried
/// event holds the later ones back).
#[derive(Clone, Debug)]
pub struct Notifier {
    queue: mpsc::Sender<Job>,
    format: Format,
    events: BTreeSet<Kind>,
    dashboard: Option<String>,
    outbox: Outbox,
}

impl Notifier {
    /// A notifier for `config` delivering through `outbox`, reading the
    /// secret with `env`; `None` when the table sends nothing. Its
    /// delivery task runs on the current tokio runtime until the last
    /// clone is dropped and the queue is empty.
    pub fn new(
        config: &NotifyConfig,
        outbox: &Outbox,
        env: impl Fn(&str) -> Option<String>,
    ) -> Result<Option<Self>, NotifyError> {
        if !config.is_set() {
            return Ok(None);
        }
        let target = deliver::Target::new(config, env)?;
        let (queue, mut jobs) = mpsc::channel::<Job>(QUEUE);
        let done = outbox.clone();
        tokio::spawn(async move {
            while let Some(job) = jobs.recv().await {
                target.deliver(job.kind, job.session, job.body).await;
                done.done();
            }
        });
        let format = config.format.unwrap_or_default();
        Ok(Some(Self {
            queue,
            format,
            events: config
                .events
                .clone()
                .map(|events| events.into_iter().collect())
                .unwrap_or_else(|| {
                    let mut events = vec![
                        Kind::Question,
                        Kind::Stopped,
                        Kind::Failed,
                        Kind::Finished,
                        Kind::DatabaseDown,
                        Kind::DatabaseBack,
                    ];
                    // What that API's webhooks say of a session's life.
                    if format == Format::ManagedAgents {
                        events.extend([
                            Kind::Created,
                            Kind::Started,
                            Kind::Evaluated,
                            Kind::Resource,
                        ]);
                    }
                    events.into_iter().collect()
                }),
            dashboard: config
                .dashboard
                .as_ref()
                .map(|d| d.trim_end_matches('/').to_string()),
            outbox: outbox.clone(),
        }))
    }

    /// Whether `kind` goes out.
    pub fn wants(&self, kind: Kind) -> bool {
        self.events.contains(&kind)
    }

    /// The dashboard's page of session `id`, if a dashboard is set.
    pub fn link(&self, id: Uuid) -> Option<String> {
        self.dashboard
            .as_ref()
            .map(|base| format!("{base}/#/s/{id}"))
    }

    /// Queues `event` for delivery (if its kind goes out); returns at once.
    pub fn send(&self, mut event: Event) {
        if !self.wants(event.kind) {
            return;
        }
        if event.link.is_none() {
            event.link = self.link(event.session_id);
        }
        let body = match self.format {
            Format::Pod => event.body(),
            Format::ManagedAgents => match event.managed_body() {
                Some(body) => body,
                // Not an event that API has.
                None => return,
            },
        };
        let body = match body {
            Ok(body) => body,
            Err(err) => {
                tracing::warn!(%err, "cannot encode a notification");
                return;
            }
        };
        self.queue_job(Job {
            kind: event.kind,
            session: Some(event.session_id),
            body,
        });
    }

    /// Queues a fleet `event` for delivery (if its kind goes out); returns
    /// at once.
    pub fn send_fleet(&self, event: FleetEvent) {
        // The Managed Agents API has no such event.
        if !self.wants(event.kind) || self.format != Format::Pod {
            return;
        }
        match event.body() {
            Ok(body) => self.queue_job(Job {
                kind: event.kind,
                session: None,
                body,
            }),
            Err(err) => tracing::warn!(%err, "cannot encode a notification"),
        }
    }

    /// Queues a resource's change (if [`Kind::Resource`] goes out).
    pub fn send_resource(&self, event: ResourceEvent) {
        if !self.wants(Kind::Resource) {
            return;
        }
        let body = match self.format {
            Format::Pod => event.body(),
            Format::ManagedAgents => event.managed_body(),
        };
        match body {
            Ok(body) => self.queue_job(Job {
                kind: Kind::Resource,
                session: None,
                body,
            }),
            Err(err) => tracing::warn!(%err, "cannot encode a notification"),
        }
    }

    fn queue_job(&self, job: Job) {
        let (kind, session) = (job.kind, job.session);
        self.outbox.started();
        if self.queue.try_send(job).is_err() {
            self.outbox.done();
            tracing::warn!(session = ?session, kind = kind.type_name(), "too many notifications waiting for a receiver; this one is dropped");
        }
    }
}

/// How long one attempt may take when `timeout_secs` is unset.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);

/// Webhook attempts after the first when `retries` is unset.
pub const DEFAULT_RETRIES: u32 = 5;
