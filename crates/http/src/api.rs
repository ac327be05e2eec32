//! The API's handlers: JSON in, JSON out, a clear 4xx for bad input.

use super::error::{parse, ApiError};
use super::runner::{CreateSession, PendingApproval};
use super::state::{logged_questions, question_of, with_live, Row, Shared};
use axum::body::Bytes;
use axum::extract::rejection::QueryRejection;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use pod::{ApprovalDecision, PodError};
use pod_launch::sessions::Summary;
use serde::Deserialize;
use serde_json::json;
use uuid::Uuid;

/// What every handler reads: what the server shares ([`Shared`]) and the
/// readers and triggers made from it.
#[derive(Clone)]
pub struct AppState {
    /// The runner, the store, the summaries, who serves, the stop.
    pub shared: Shared,
    /// The readers of watched sessions, one each, shared by their streams.
    pub tails: super::tail::Tails,
    /// The reader of the session list, shared by its streams.
    pub listing: super::listing::Listing,
    /// The webhook triggers (`[triggers.NAME]`).
    pub triggers: std::sync::Arc<super::triggers::Triggers>,
}

impl std::ops::Deref for AppState {
    type Target = Shared;
    fn deref(&self) -> &Shared {
        &self.shared
    }
}

/// `GET /api/sessions`: every session, most recently updated first.
pub async fn list(State(app): State<AppState>) -> Result<Json<serde_json::Value>, ApiError> {
    let entries = app
        .summaries
        .all(app.store.as_ref())
        .await
        .map_err(|e| ApiError::internal(format!("{e:#}")))?;
    let rows: Vec<Row> = entries
        .into_iter()
        .map(|entry| Row {
            live: app.runner.is_live(entry.summary.id),
            summary: entry.summary,
        })
        .collect();
    Ok(Json(json!({ "server": app.server, "sessions": rows })))
}

/// `POST /api/sessions`: creates a session and starts its task.
pub async fn create(State(app): State<AppState>, body: Bytes) -> Result<Response, ApiError> {
    let request: CreateSession = parse(&body)?;
    let id = app.runner.create(request).await?;
    Ok((StatusCode::CREATED, Json(json!({ "session_id": id }))).into_response())
}

/// `POST /api/sessions/batch`: queues many sessions for the fleet, all or
/// none; 202 with their ids in order.
pub async fn create_batch(State(app): State<AppState>, body: Bytes) -> Result<Response, ApiError> {
    let request: crate::runner::CreateBatch = parse(&body)?;
    let ids = app.runner.create_batch(request.sessions).await?;
    Ok((StatusCode::ACCEPTED, Json(json!({ "session_ids": ids }))).into_response())
}

/// `GET /api/sessions/{id}`: one session, its plan, children and questions.
pub async fn get(
    State(app): State<AppState>,
    Path(id): Path<String>,
) -> Result<Json<serde_json::Value>, ApiError> {
    let id = resolve(&app, &id).await?;
    let entry = entry(&app, id).await?;
    let mut children: Vec<Summary> = Vec::new();
    for candidate in app
        .summaries
        .all(app.store.as_ref())
        .await
        .map_err(|e| ApiError::internal(format!("{e:#}")))?
    {
        if candidate.summary.parent.as_ref().map(|p| p.session_id) == Some(id) {
            children.push(candidate.summary);
        }
    }
    let approvals = waiting(&app, Some(id)).await?;
    Ok(Json(json!({
        "session": entry.summary,
        "records": entry.records,
        "todos": entry.todos,
        "live": app.runner.is_live(id),
        "children": children,
        "approvals": approvals,
    })))
}

/// Paging of `GET /api/sessions/{id}/history`.
#[derive(Deserialize)]
pub struct Page {
    /// The sequence number after which to start (0: from the first record).
    #[serde(default)]
    after: usize,
    /// At most this many records (default and cap 500).
    #[serde(default)]
    limit: Option<usize>,
}

/// Records per history page, at most: a 10,000-item session is read in
/// twenty pages, each a few hundred KB.
const PAGE: usize = 500;

/// `GET /api/schedules`: the fleet's schedules (or the file store's), when each fires next and
/// its last session (docs/schedules.md).
pub async fn schedules(State(app): State<AppState>) -> Result<Json<serde_json::Value>, ApiError> {
    let schedules = app.runner.schedules().await?;
    Ok(Json(json!({ "schedules": schedules })))
}

/// `POST /api/schedules`: adds a schedule to the fleet; what each fire
/// starts is held to the server's ceiling as `POST /api/sessions` is.
pub async fn add_schedule(State(app): State<AppState>, body: Bytes) -> Result<Response, ApiError> {
    let request: crate::runner::CreateSchedule = parse(&body)?;
    let added = app.runner.add_schedule(request).await?;
    Ok((StatusCode::CREATED, Json(added)).into_response())
}

/// What `PATCH /api/schedules/{name}` takes.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PatchSchedule {
    /// Pause (`true`) or resume (`false`) it.
    paused: bool,
}

/// `PATCH /api/schedules/{name}`: pauses or resumes a schedule.
pub async fn patch_schedule(
    State(app): State<AppState>,
    Path(name): Path<String>,
    body: Bytes,
) -> Result<Json<serde_json::Value>, ApiError> {
    let patch: PatchSchedule = parse(&body)?;
    Ok(Json(app.runner.pause_schedule(&name, patch.paused).await?))
}

/// `DELETE /api/schedules/{name}`: removes a schedule (not its sessions).
pub async fn delete_schedule(
    State(app): State<AppState>,
    Path(name): Path<String>,
) -> Result<StatusCode, ApiError> {
    app.runner.remove_schedule(&name).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// `GET /metrics`: the Prometheus text exposition ([`crate::metrics`]).
pub async fn metrics(State(app): State<AppState>) -> Result<Response, ApiError> {
    // During a database outage the store's gauges cannot be read, and
    // that is when /metrics matters most: it answers with this process's
    // own (pod_store_up 0 among them) and leaves out the session counts.
    let entries = match app.summaries.all(app.store.as_ref()).await {
        Ok(entries) => entries,
        Err(_) if pod::stats::store_down_since().is_some() => Vec::new(),
        Err(e) => return Err(ApiError::internal(format!("{e:#}"))),
    };
    let mut sessions = std::collections::BTreeMap::new();
    for entry in &entries {
        *sessions
            .entry(entry.summary.status.as_str().to_string())
            .or_insert(0u64) += 1;
    }
    let waiting = with_live(logged_questions(&entries), app.runner.approvals(), None);
    let now = chrono::Utc::now();
    let oldest = waiting
        .iter()
        .map(|a| (now - a.asked_at).num_milliseconds().max(0) as f64 / 1000.0)
        .fold(0.0, f64::max);
    let text = app.runner.metrics().render(&crate::metrics::Gauges {
        sessions,
        approvals_waiting: waiting.len() as u64,
        oldest_approval_seconds: oldest,
        live: app.runner.live_count() as u64,
    });
    Ok((
        [(
            axum::http::header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        text,
    )
        .into_response())
}

/// `GET /api/sessions/{id}/diff`: what the session changed in its
/// workspace, from its first checkpoint to its last: the files, the
/// unified patch, and the files left out for their size. A session
/// without checkpoints (or whose store is on another machine) has none.
pub async fn diff(
    State(app): State<AppState>,
    Path(id): Path<String>,
) -> Result<Json<serde_json::Value>, ApiError> {
    let id = resolve(&app, &id).await?;
    let contents = app.store.read(id).await.map_err(store_error)?;
    let timeline = pod::checkpoints::Timeline::of(&contents.records);
    let (Some(from), Some(to), Some(header)) = (
        timeline.after_items(0),
        timeline.after_items(usize::MAX),
        contents.header.as_ref(),
    ) else {
        return Ok(Json(
            json!({"files": [], "patch": "", "not_captured": [], "checkpoints": false}),
        ));
    };
    let shadow = pod::checkpoints::shadow(app.runner.home(), id, header.workspace.clone());
    let (changes, patch) = match (shadow.changes(from, to).await, shadow.diff(from, to).await) {
        (Ok(changes), Ok(patch)) => (changes, patch),
        (Err(err), _) | (_, Err(err)) => {
            return Err(ApiError::conflict(format!(
                "the session's checkpoints cannot be read here: {err}"
            )))
        }
    };
    let files: Vec<serde_json::Value> = changes
        .iter()
        .map(|c| json!({"path": c.path, "status": c.status.to_string()}))
        .collect();
    Ok(Json(json!({
        "files": files,
        "patch": patch,
        "not_captured": timeline.skipped(),
        "unindexed": timeline.unindexed(),
        "checkpoints": true,
    })))
}

/// `GET /api/sessions/{id}/history?after=SEQ&limit=N`: the log's records
/// with their sequence numbers (the header is 0, the first record 1).
pub async fn history(
    State(app): State<AppState>,
    Path(id): Path<String>,
    page: Result<Query<Page>, QueryRejection>,
) -> Result<Json<serde_json::Value>, ApiError> {
    let Query(page) = page.map_err(|e| ApiError::bad_request(format!("bad query: {e}")))?;
    let id = resolve(&app, &id).await?;
    let limit = page.limit.unwrap_or(PAGE).clamp(1, PAGE);
    let records = app
        .store
        .read_after(id, page.after)
        .await
        .map_err(store_error)?;
    let more = records.len() > limit;
    let records: Vec<serde_json::Value> = records
        .into_iter()
        .take(limit)
        .enumerate()
        .map(|(i, record)| json!({ "seq": page.after + i + 1, "record": record }))
        .collect();
    let next = more.then(|| page.after + records.len());
    Ok(Json(json!({ "records": records, "next": next })))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Text {
    text: String,
}

/// `POST /api/sessions/{id}/prompt`: a new turn (queued after a running one).
pub async fn prompt(
    State(app): State<AppState>,
    Path(id): Path<String>,
    body: Bytes,
) -> Result<Response, ApiError> {
    let text: Text = parse(&body)?;
    let id = resolve(&app, &id).await?;
    if let Some(question) = entry(&app, id).await?.summary.question {
        return Err(ApiError::conflict(format!(
            "session {id} waits for an answer to question {} ({}): answer it first \
             (POST /api/approvals/{})",
            question.id, question.request.summary, question.id
        )));
    }
    app.runner.prompt(id, text.text).await?;
    Ok(accepted())
}

/// `POST /api/sessions/{id}/notify`: a note the model reads before its
/// next request.
pub async fn notify(
    State(app): State<AppState>,
    Path(id): Path<String>,
    body: Bytes,
) -> Result<Response, ApiError> {
    let text: Text = parse(&body)?;
    let id = resolve(&app, &id).await?;
    app.runner.notify(id, text.text).await?;
    Ok(accepted())
}

/// `POST /api/sessions/{id}/cancel`: cancels the running turn.
pub async fn cancel(
    State(app): State<AppState>,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    let id = resolve(&app, &id).await?;
    app.runner.cancel(id).await?;
    Ok(accepted())
}

/// `GET /api/approvals`: every call waiting for an answer: the questions
/// parked sessions of the whole store wait on, and the subagents' questions
/// waiting in this process.
pub async fn approvals(State(app): State<AppState>) -> Result<Json<serde_json::Value>, ApiError> {
    Ok(Json(json!({ "approvals": waiting(&app, None).await? })))
}

/// `GET /api/server`: who serves, and what its event streams cost: the
/// readers they share (`readers.sessions`: one per watched session;
/// `readers.list`: the one reader of the list, 0 or 1) and the streams
/// open (`watchers.sessions`, `watchers.list`); `resynced`: how many
/// times a session's stream fell too far behind its reader and caught up
/// from the log.
pub async fn server(State(app): State<AppState>) -> Json<serde_json::Value> {
    Json(json!({
        "server": app.server,
        "readers": {
            "sessions": app.tails.readers(),
            "list": app.listing.readers(),
        },
        "watchers": {
            "sessions": app.tails.watchers(),
            "list": app.listing.watchers(),
        },
        "resynced": app.tails.resyncs(),
        // When the fleet's database became unreachable (null while it is
        // reachable, and on the file store): the dashboard's banner.
        "store_unreachable_since": pod::stats::store_down_since(),
    }))
}

/// The calls waiting for an answer (of session `only`, when given), oldest
/// first: questions the logs hold, and those waiting in this process.
pub async fn waiting(app: &AppState, only: Option<Uuid>) -> Result<Vec<PendingApproval>, ApiError> {
    let logged = match only {
        Some(id) => question_of(&entry(app, id).await?.summary)
            .into_iter()
            .collect(),
        None => logged_questions(
            &app.summaries
                .all(app.store.as_ref())
                .await
                .map_err(|e| ApiError::internal(pod_llm::error_chain(&e)))?,
        ),
    };
    Ok(with_live(logged, app.runner.approvals(), only))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Answer {
    decision: String,
    /// The session the answer is meant for (checked when given).
    #[serde(default)]
    session_id: Option<Uuid>,
    /// The call the answer is meant for (checked when given).
    #[serde(default)]
    call_id: Option<String>,
}

/// `POST /api/approvals/{id}`: `{"decision": "allow_once" | "allow_always"
/// | "reject_once" | "reject_always", "session_id": ..., "call_id": ...}`;
/// an answer whose session or call is not the question's, or to a question
/// no longer asked, is a 409 and answers nothing.
pub async fn answer(
    State(app): State<AppState>,
    Path(id): Path<String>,
    peer: Option<axum::Extension<super::server::Peer>>,
    body: Bytes,
) -> Result<Response, ApiError> {
    let id = Uuid::parse_str(&id)
        .map_err(|_| ApiError::bad_request(format!("approval id `{id}` is not a UUID")))?;
    let answer: Answer = parse(&body)?;
    let decision = match answer.decision.as_str() {
        "allow_once" => ApprovalDecision::AllowOnce,
        "allow_always" => ApprovalDecision::AllowAlways,
        "reject_once" => ApprovalDecision::RejectOnce,
        "reject_always" => ApprovalDecision::RejectAlways,
        other => {
            return Err(ApiError::bad_request(format!(
                "decision `{other}`: expected allow_once, allow_always, reject_once or \
                 reject_always"
            )))
        }
    };
    let bound = super::runner::Binding {
        session_id: answer.session_id,
        call_id: answer.call_id,
    };
    // A subagent's question waits in this process; a session's own is in
    // its log (the session is parked on it), wherever it was asked.
    if app.runner.has_live_approval(id) {
        app.runner.answer(id, &bound, decision)?;
        return Ok(Json(json!({})).into_response());
    }
    let parked = app
        .summaries
        .all(app.store.as_ref())
        .await
        .map_err(|e| ApiError::internal(pod_llm::error_chain(&e)))?
        .into_iter()
        .find_map(|entry| {
            let question = entry.summary.question.filter(|q| q.id == id)?;
            Some((entry.summary.id, question))
        });
    let Some((session, question)) = parked else {
        return Err(ApiError::conflict(format!(
            "approval {id} is not waiting: it was answered, withdrawn, or never asked"
        )));
    };
    let by = pod::questions::Answerer {
        via: "http".into(),
        by: None,
        from: peer.map(|axum::Extension(peer)| peer.0.to_string()),
    };
    app.runner
        .answer_parked(session, &question, &bound, decision, &by)
        .await?;
    Ok(Json(json!({})).into_response())
}

fn accepted() -> Response {
    (StatusCode::ACCEPTED, Json(json!({}))).into_response()
}

/// A session id or a unique prefix of one.
pub async fn resolve(app: &AppState, text: &str) -> Result<Uuid, ApiError> {
    if let Ok(id) = Uuid::parse_str(text) {
        return match app.store.stat(id).await {
            Ok(_) => Ok(id),
            Err(err) => Err(store_error(err)),
        };
    }
    pod_launch::sessions::resolve(app.store.as_ref(), text)
        .await
        .map_err(|e| ApiError::not_found(format!("{e:#}")))
}

async fn entry(app: &AppState, id: Uuid) -> Result<super::summaries::Entry, ApiError> {
    app.summaries
        .get(app.store.as_ref(), id)
        .await
        .map_err(|e| ApiError::internal(format!("{e:#}")))
}

/// A store error: 404 for a session that is not there.
pub fn store_error(err: PodError) -> ApiError {
    match err {
        PodError::NoSuchSession { id, .. } => ApiError::not_found(format!("no session {id}")),
        err => ApiError::internal(err.to_string()),
    }
}

/// `POST /api/triggers/{name}`: verifies the delivery and starts its
/// session (201), or finds the session an earlier delivery with the same
/// id started (200, `duplicate`).
pub async fn deliver(
    state: State<AppState>,
    name: Path<String>,
    headers: axum::http::HeaderMap,
    body: axum::body::Bytes,
) -> Result<Response, ApiError> {
    let delivered = start_delivery(state, name, headers, body).await;
    let counted = match &delivered {
        Ok(response) if response.status() == StatusCode::CREATED => {
            Some(pod::stats::Delivery::Started)
        }
        Ok(_) => Some(pod::stats::Delivery::Duplicate),
        Err(err) if err.status().is_client_error() => Some(pod::stats::Delivery::Refused),
        Err(_) => None,
    };
    if let Some(delivery) = counted {
        pod::stats::trigger_delivered(delivery);
    }
    delivered
}

async fn start_delivery(
    State(app): State<AppState>,
    Path(name): Path<String>,
    headers: axum::http::HeaderMap,
    body: axum::body::Bytes,
) -> Result<Response, ApiError> {
    let Some(trigger) = app.triggers.get(&name) else {
        return Err(ApiError::not_found(format!(
            "no trigger named {name} ([triggers.{name}] in the server's config file, or POST \
             /api/triggers)"
        )));
    };
    if body.len() > trigger.max_payload {
        return Err(ApiError::with_status(
            StatusCode::PAYLOAD_TOO_LARGE,
            format!(
                "the payload is {} bytes; trigger {name} takes at most {} (max_payload_bytes)",
                body.len(),
                trigger.max_payload
            ),
        ));
    }
    let delivery = trigger.verify(&headers, &body)?;
    let id = super::triggers::session_id(&name, &delivery);
    if app.store.stat(id).await.is_ok() {
        return Ok(duplicate(id));
    }
    trigger.admit()?;
    let payload = String::from_utf8_lossy(&body);
    let request = trigger
        .request(&payload)
        .map_err(|why| ApiError::internal(format!("trigger {name}: {why}")))?;
    let origin = pod::log::Origin::Trigger {
        name: name.clone(),
        delivery: delivery.clone(),
    };
    match app.runner.start_as(request, id, Some(origin)).await {
        Ok(id) => {
            tracing::info!(trigger = %name, %delivery, session = %id, "trigger started a session");
            Ok((
                StatusCode::CREATED,
                Json(json!({ "session_id": id, "trigger": name, "delivery": delivery })),
            )
                .into_response())
        }
        // Two deliveries of one id at once: the second finds the first's.
        Err(err) => match app.store.stat(id).await {
            Ok(_) => Ok(duplicate(id)),
            Err(_) => Err(err),
        },
    }
}

fn duplicate(id: Uuid) -> Response {
    (
        StatusCode::OK,
        Json(json!({ "session_id": id, "duplicate": true })),
    )
        .into_response()
}
