//! `/v1/sessions`: create, retrieve, list, archive, delete. A Managed
//! Agents session is a
//! pod session with the same id (`sesn_` and the uuid's 32 hex digits):
//! created here with its agent and environment (checked against the
//! server's ceiling at once), its pod session started by the runner with
//! the first `user.message` (`Runner::start_as`, as every API session
//! starts), so it shows in `pod sessions` and the dashboard from then on.
//! Its status is `running` while a process runs it, else `idle`.

use super::agents::{self, Agent};
use super::environments;
use super::error::{parse, Error};
use super::outcomes::Outcome;
use super::request::{message_text, request};
use super::{page, query_pairs, query_value, Managed};
use crate::runner::CreateSession;
use axum::body::Bytes;
use axum::extract::{Path, RawQuery, State};
use axum::Json;
use chrono::{DateTime, Utc};
use pod::log::LogRecord;
use pod::PodError;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use std::collections::BTreeMap;
use uuid::Uuid;

const KIND: &str = "sessions";

/// A session's Managed Agents settings, as pod keeps them (its history is
/// its pod session's log).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub(crate) struct Session {
    /// The pod session's id.
    pub id: Uuid,
    /// The agent as it was when the session was created.
    pub agent: Agent,
    pub environment_id: String,
    /// The environment's workspace and network, as they were.
    pub workspace: std::path::PathBuf,
    #[serde(default)]
    pub network: Option<bool>,
    #[serde(default)]
    pub title: Option<String>,
    #[serde(default)]
    pub metadata: BTreeMap<String, String>,
    /// Its spend ceiling (`budget.max_list_cost`): the governor's session
    /// money limit, recorded in its log when it starts.
    #[serde(default)]
    pub max_cost: Option<pod_llm::Cost>,
    pub created_at: DateTime<Utc>,
    /// When it was archived: it takes no more events.
    #[serde(default)]
    pub archived_at: Option<DateTime<Utc>>,
    /// The outcome it works toward (`user.define_outcome`), verified by a
    /// grader before a turn ends.
    #[serde(default)]
    pub outcome: Option<Outcome>,
}

impl Session {
    /// Its id in the API: `sesn_` and the pod session's uuid.
    pub fn public_id(&self) -> String {
        public_id(self.id)
    }

    /// The runner's request for its session, with `task` first: it runs
    /// as its agent (pod's prompt, then the agent's system prompt).
    fn request(&self, m: &Managed, task: &str) -> Result<CreateSession, Error> {
        let mut request = request(
            task,
            self.agent.profile(&m.app.runner),
            &self.workspace,
            self.network,
        )?;
        if let Some(outcome) = &self.outcome {
            // The agent's model grades (a profile of the server's config).
            let runner = &m.app.runner;
            let grader = self
                .agent
                .profile(runner)
                .or_else(|| runner.server_model().profile.clone())
                .ok_or_else(|| {
                    Error::invalid(
                        "a user.define_outcome needs a grader: the agent's model must name a \
                         profile of the server's config (or the server run with --profile)",
                    )
                })?;
            request.grader = Some(grader);
            request.rubric = Some(outcome.rubric.clone());
            request.max_verify = Some(outcome.max_iterations);
        }
        if let Some(max_cost) = self.max_cost {
            request.budget = Some(crate::runner::CreateBudget {
                max_cost: Some(max_cost),
                ..Default::default()
            });
        }
        let agent = &self.agent;
        if !agent.mcp_servers.is_empty() {
            if self.network == Some(false) {
                return Err(Error::invalid(format!(
                    "agent {} connects to MCP servers and environment {} limits networking: \
                     use an environment with `unrestricted` networking",
                    agent.id, self.environment_id
                )));
            }
            request.mcp_servers = agent.mcp_servers.iter().map(super::mcp::config).collect();
            for toolset in &agent.mcp_toolsets {
                for (tool, policy) in toolset.approvals() {
                    match policy {
                        pod::ToolPolicy::Allow => request.allow.push(tool),
                        pod::ToolPolicy::Ask => request.ask.push(tool),
                        pod::ToolPolicy::Deny => request.deny.push(tool),
                    }
                }
            }
        }
        request.as_agent = (agent.system.is_some() || !agent.custom_tools.is_empty()).then(|| {
            pod_launch::RecordedAgent {
                name: agent.name.clone(),
                description: agent.description.clone().unwrap_or_default(),
                prompt: agent.system.clone().unwrap_or_default(),
                tools: None,
                model: None,
                client_tools: agent.custom_tools.clone(),
                source: std::path::PathBuf::from(format!("managed/agents/{}.json", agent.id)),
            }
        });
        Ok(request)
    }
}

/// `sesn_` and the 32 hex digits of `id`.
pub(crate) fn public_id(id: Uuid) -> String {
    format!("sesn_{}", id.simple())
}

/// The pod session a public id names (`sesn_…`, or a pod uuid).
fn pod_id(text: &str) -> Option<Uuid> {
    Uuid::parse_str(text.strip_prefix("sesn_").unwrap_or(text)).ok()
}

/// What `POST /v1/sessions` takes.
#[derive(Deserialize)]
struct Create {
    agent: Value,
    environment_id: String,
    #[serde(default)]
    title: Option<String>,
    #[serde(default)]
    metadata: BTreeMap<String, String>,
    #[serde(default)]
    initial_events: Vec<Value>,
    #[serde(default)]
    resources: Vec<Value>,
    #[serde(default)]
    vault_ids: Vec<String>,
    #[serde(default)]
    budget: Option<Value>,
}

/// `POST /v1/sessions`.
pub(crate) async fn create(State(m): State<Managed>, body: Bytes) -> Result<Json<Value>, Error> {
    let create: Create = parse(&body)?;
    if !create.resources.is_empty() {
        return Err(Error::unsupported(
            "session resources (files, repositories, memory stores)",
        ));
    }
    if !create.vault_ids.is_empty() {
        return Err(Error::unsupported("vaults"));
    }
    let max_cost = match &create.budget {
        None | Some(Value::Null) => None,
        Some(budget) => Some(budget_limit(budget)?),
    };
    let (agent_id, version) = match &create.agent {
        Value::String(id) => (id.clone(), None),
        Value::Object(agent) => match agent.get("id").and_then(Value::as_str) {
            Some(id) => (id.to_string(), agent.get("version").and_then(Value::as_u64)),
            None => return Err(Error::invalid("`agent.id` must be a string")),
        },
        _ => {
            return Err(Error::invalid(
                "`agent` must be an agent id or {\"id\": ...}",
            ))
        }
    };
    let agent = match version {
        Some(version) => {
            let version = u32::try_from(version)
                .map_err(|_| Error::invalid("`agent.version` is too large"))?;
            agents::get_version(&m, &agent_id, version).await?
        }
        None => agents::get(&m, &agent_id).await?,
    };
    if agents::get(&m, &agent_id).await?.archived_at.is_some() {
        return Err(Error::invalid(format!(
            "agent {agent_id} is archived: a new session needs an agent that is not"
        )));
    }
    let environment = environments::get(&m, &create.environment_id).await?;
    if environment.archived_at.is_some() {
        return Err(Error::invalid(format!(
            "environment {} is archived: a new session needs one that is not",
            environment.id
        )));
    }
    let mut first = Vec::new();
    let mut outcome = None;
    for event in &create.initial_events {
        match event.get("type").and_then(Value::as_str) {
            Some("user.message") => first.push(message_text(event)?),
            Some("user.define_outcome") if outcome.is_none() => {
                let defined = Outcome::parse(event)?;
                first.push(defined.description.clone());
                outcome = Some(defined);
            }
            Some("user.define_outcome") => {
                return Err(Error::unsupported("more than one outcome in a session"))
            }
            other => {
                return Err(Error::invalid(format!(
                    "initial_events take user.message events, not {}",
                    other.unwrap_or("(no type)")
                )))
            }
        }
    }
    let session = Session {
        id: Uuid::new_v4(),
        agent,
        environment_id: environment.id.clone(),
        workspace: environment.workspace.clone(),
        network: environment.network(),
        title: create.title,
        metadata: create.metadata,
        max_cost,
        created_at: Utc::now(),
        archived_at: None,
        outcome,
    };
    // What the server allows is checked now, not at the first message.
    m.app
        .runner
        .check(&session.request(&m, "(checking the session)")?)?;
    m.files.put(KIND, &session.public_id(), &session).await?;
    m.app
        .runner
        .launcher()
        .notify_created(session.id, &session.workspace, session.title.clone());
    if !first.is_empty() {
        deliver(&m, &session, first.join("\n\n")).await?;
    }
    Ok(Json(to_json(&m, &session).await?))
}

/// The money limit of a `budget` (`{"type": "limit", "max_list_cost":
/// {"amount": "2500", "currency": "USD"}}`: minor units, so $25.00). pod
/// prices requests with the profile's prices (`[profiles.*.prices]`), in
/// the config's currency, taken to be US dollars.
fn budget_limit(budget: &Value) -> Result<pod_llm::Cost, Error> {
    if budget.get("type").and_then(Value::as_str) != Some("limit") {
        return Err(Error::invalid("`budget.type` must be \"limit\""));
    }
    let cost = budget
        .get("max_list_cost")
        .ok_or_else(|| Error::invalid("`budget.max_list_cost` is missing"))?;
    match cost.get("currency").and_then(Value::as_str) {
        Some("USD") => {}
        other => {
            return Err(Error::invalid(format!(
                "`budget.max_list_cost.currency` must be \"USD\", not {}",
                other.unwrap_or("(none)")
            )))
        }
    }
    let cents: u64 = cost
        .get("amount")
        .and_then(Value::as_str)
        .and_then(|amount| amount.parse().ok())
        .filter(|cents| *cents > 0)
        .ok_or_else(|| {
            Error::invalid(
                "`budget.max_list_cost.amount` must be a positive whole number of cents as a \
                 string (\"2500\" is $25.00)",
            )
        })?;
    cents
        .checked_mul(10_000)
        .map(pod_llm::Cost::from_micros)
        .ok_or_else(|| Error::invalid("`budget.max_list_cost.amount` is too large"))
}

/// Sends `text` to the session: its first message starts its pod
/// session, later ones prompt it (running it here again when it is idle).
pub(crate) async fn deliver(m: &Managed, session: &Session, text: String) -> Result<(), Error> {
    // One at a time: two first messages must not both start it.
    let _one = m.starting.lock().await;
    let runner = &m.app.runner;
    match m.app.store.stat(session.id).await {
        Ok(_) => runner.prompt(session.id, text).await?,
        Err(PodError::NoSuchSession { .. }) => {
            runner
                .start_as(session.request(m, &text)?, session.id, None)
                .await?;
            m.started.notify_waiters();
        }
        Err(err) => return Err(Error::internal(pod_llm::error_chain(&err))),
    }
    Ok(())
}

/// The session's records (none before its first message).
pub(crate) async fn records(m: &Managed, id: Uuid) -> Result<Vec<LogRecord>, Error> {
    match m.app.store.read(id).await {
        Ok(contents) => Ok(contents.records),
        Err(PodError::NoSuchSession { .. }) => Ok(Vec::new()),
        Err(err) => Err(Error::internal(pod_llm::error_chain(&err))),
    }
}

/// Whether a process runs the session now (this server, or a fleet
/// worker holding or about to claim it).
pub(crate) async fn running(m: &Managed, id: Uuid) -> bool {
    if m.app.runner.is_live(id) {
        return true;
    }
    matches!(m.app.store.stat(id).await, Ok(stat) if stat.holder.is_some() || stat.queued)
}

/// Session `text` (`sesn_…`), or a 404.
pub(crate) async fn get(m: &Managed, text: &str) -> Result<Session, Error> {
    let missing = || Error::not_found(format!("no session {text}"));
    let id = pod_id(text).ok_or_else(missing)?;
    m.files.get(KIND, &public_id(id)).await?.ok_or_else(missing)
}

/// The session in the API's shape: its status, and its usage summed from
/// its log.
async fn to_json(m: &Managed, session: &Session) -> Result<Value, Error> {
    // The status first: once it is idle, the records read next hold all
    // it did.
    let running = running(m, session.id).await;
    // The last verification round, for an outcome's evaluations: only
    // then is the log read; usage comes from the cached summary.
    let evaluations = match &session.outcome {
        Some(outcome) => {
            let records = records(m, session.id).await?;
            outcome.evaluations(records.iter().rev().find_map(|r| match r {
                LogRecord::Verify(round) => Some(round),
                _ => None,
            }))
        }
        None => json!([]),
    };
    let summary = match m.app.summaries.get(m.app.store.as_ref(), session.id).await {
        Ok(entry) => Some(entry.summary),
        // Not started yet: no log, nothing used.
        Err(err) if matches!(err.pod_error(), Some(PodError::NoSuchSession { .. })) => None,
        Err(err) => return Err(Error::internal(pod_llm::error_chain(&err))),
    };
    let usage = summary.as_ref().map(|s| s.usage).unwrap_or_default();
    let (input, output, cached) = (
        usage.prompt_tokens.saturating_sub(usage.cache_read_tokens),
        usage.completion_tokens,
        usage.cache_read_tokens,
    );
    let updated = summary
        .as_ref()
        .map_or(session.created_at, |s| s.updated_at.max(session.created_at));
    let mut agent = session.agent.common_json();
    if let Some(object) = agent.as_object_mut() {
        object.insert("id".into(), json!(session.agent.id));
    }
    let duration = (Utc::now() - session.created_at).num_milliseconds() as f64 / 1000.0;
    Ok(json!({
        "id": session.public_id(),
        "type": "session",
        "agent": agent,
        "environment_id": session.environment_id,
        "title": session.title,
        "metadata": session.metadata,
        "status": if running { "running" } else { "idle" },
        "resources": [],
        "vault_ids": [],
        "outcome_evaluations": evaluations,
        "budget": session.max_cost.map(|cost| json!({
            "type": "limit",
            "max_list_cost": {"amount": (cost.micros() / 10_000).to_string(), "currency": "USD"},
        })),
        "stats": {"duration_seconds": duration},
        "usage": {
            "input_tokens": input,
            "output_tokens": output,
            "cache_read_input_tokens": cached,
        },
        "created_at": session.created_at,
        "updated_at": updated,
        "archived_at": session.archived_at,
    }))
}

/// `GET /v1/sessions/{id}`.
pub(crate) async fn retrieve(
    State(m): State<Managed>,
    Path(id): Path<String>,
) -> Result<Json<Value>, Error> {
    let session = get(&m, &id).await?;
    Ok(Json(to_json(&m, &session).await?))
}

/// `POST /v1/sessions/{id}`: `title`, a `metadata` patch (`null` deletes
/// a key), and `budget`: a session created with one may have it changed,
/// recorded in its log as the governor's session money limit (a session
/// the old one had stopped goes on, as `pod budget` does it).
pub(crate) async fn update(
    State(m): State<Managed>,
    Path(id): Path<String>,
    body: Bytes,
) -> Result<Json<Value>, Error> {
    let fields: serde_json::Map<String, Value> = parse(&body)?;
    let mut session = get(&m, &id).await?;
    if session.archived_at.is_some() {
        return Err(Error::conflict(format!("session {id} is archived")));
    }
    for (key, value) in &fields {
        match (key.as_str(), value) {
            ("title", Value::Null) => session.title = None,
            ("title", Value::String(title)) => session.title = Some(title.clone()),
            ("metadata", Value::Null) => {}
            ("metadata", Value::Object(patch)) => {
                super::patch_metadata(&mut session.metadata, patch, false)?
            }
            // Its budget removed: no money limit of its own from now on (the
            // server's own settings still apply).
            ("budget", Value::Null) if session.max_cost.is_none() => {}
            ("budget", Value::Null) => {
                if !records(&m, session.id).await?.is_empty() {
                    m.app
                        .runner
                        .change_limits(session.id, pod::limits::Change::LiftCost)
                        .await?;
                }
                session.max_cost = None;
            }
            ("budget", budget) => {
                if session.max_cost.is_none() {
                    return Err(Error::invalid(
                        "budget_create_only: a budget cannot be added to a session created \
                         without one",
                    ));
                }
                let max_cost = budget_limit(budget)?;
                if records(&m, session.id).await?.is_empty() {
                    session.max_cost = Some(max_cost);
                } else {
                    let over = pod::SessionBudget {
                        cost: Some(max_cost),
                        ..Default::default()
                    };
                    m.app.runner.raise_limits(session.id, over).await?;
                    session.max_cost = Some(max_cost);
                }
            }
            ("agent", _) => return Err(Error::unsupported("changing a session's agent")),
            ("vault_ids", _) => return Err(Error::unsupported("vaults")),
            (other, _) => {
                return Err(Error::invalid(format!(
                    "`{other}` is not a field of a session update"
                )))
            }
        }
    }
    m.files.put(KIND, &session.public_id(), &session).await?;
    m.changed("session.updated", &session.public_id());
    Ok(Json(to_json(&m, &session).await?))
}

/// `POST /v1/sessions/{id}/archive`: it takes no more events; its history
/// stays readable.
pub(crate) async fn archive(
    State(m): State<Managed>,
    Path(id): Path<String>,
) -> Result<Json<Value>, Error> {
    let _one = m.starting.lock().await;
    let mut session = get(&m, &id).await?;
    if running(&m, session.id).await {
        return Err(Error::conflict(format!(
            "session {id} is running: interrupt it first (a user.interrupt event)"
        )));
    }
    if session.archived_at.is_none() {
        session.archived_at = Some(Utc::now());
        m.files.put(KIND, &session.public_id(), &session).await?;
        m.changed("session.archived", &session.public_id());
    }
    Ok(Json(to_json(&m, &session).await?))
}

/// `DELETE /v1/sessions/{id}`: the session and its pod session's log, for
/// good (not while it runs).
pub(crate) async fn delete(
    State(m): State<Managed>,
    Path(id): Path<String>,
) -> Result<Json<Value>, Error> {
    let _one = m.starting.lock().await;
    let session = get(&m, &id).await?;
    if running(&m, session.id).await {
        return Err(Error::conflict(format!(
            "session {id} is running: interrupt it first (a user.interrupt event)"
        )));
    }
    match m.app.store.remove(session.id).await {
        Ok(()) | Err(PodError::NoSuchSession { .. }) => {}
        Err(err) => return Err(Error::internal(pod_llm::error_chain(&err))),
    }
    m.files.remove(KIND, &session.public_id()).await?;
    m.changed("session.deleted", &session.public_id());
    Ok(Json(
        json!({"id": session.public_id(), "type": "session_deleted"}),
    ))
}

/// `GET /v1/sessions`: newest first, in pages (`agent_id` filters).
pub(crate) async fn list(
    State(m): State<Managed>,
    RawQuery(query): RawQuery,
) -> Result<Json<Value>, Error> {
    let pairs = query_pairs(query.as_deref());
    let mut all: Vec<Session> = m.files.all(KIND).await?;
    if let Some(agent) = query_value(&pairs, "agent_id") {
        all.retain(|s| s.agent.id == agent);
    }
    match query_value(&pairs, "order") {
        Some("asc") => all.sort_by(|a, b| a.created_at.cmp(&b.created_at).then(a.id.cmp(&b.id))),
        _ => all.sort_by(|a, b| b.created_at.cmp(&a.created_at).then(a.id.cmp(&b.id))),
    }
    let (sessions, next) = page(
        &all,
        query_value(&pairs, "limit"),
        query_value(&pairs, "page"),
    )?;
    let mut data = Vec::with_capacity(sessions.len());
    for session in &sessions {
        data.push(to_json(&m, session).await?);
    }
    Ok(Json(
        json!({"data": data, "next_page": next, "prev_page": null}),
    ))
}
