//! `/v1/agents`: create, retrieve, list. An agent is a name, a model (a
//! profile of the server's config, or `default` for the server's model),
//! a system prompt and the default toolset; kept as
//! `POD_HOME/managed/agents/<id>.json`.

use super::error::{parse, Error};
use super::{page, query_pairs, query_value, Managed};
use crate::runner::Runner;
use axum::body::Bytes;
use axum::extract::{Path, RawQuery, State};
use axum::Json;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use std::collections::BTreeMap;

const KIND: &str = "agents";

/// The model string that means the server's own model.
pub(crate) const DEFAULT_MODEL: &str = "default";

/// An agent as pod keeps it.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub(crate) struct Agent {
    pub id: String,
    pub name: String,
    #[serde(default)]
    pub description: Option<String>,
    /// The model string the client gave.
    pub model: String,
    #[serde(default)]
    pub system: Option<String>,
    #[serde(default)]
    pub metadata: BTreeMap<String, String>,
    pub version: u32,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

impl Agent {
    /// The profile its model maps to: `None` for the server's model.
    pub fn profile(&self, runner: &Runner) -> Option<String> {
        profile_for(runner, &self.model)
    }

    /// The fields an agent and a session's copy of it share.
    pub fn common_json(&self) -> Value {
        json!({
            "id": self.id,
            "type": "agent",
            "name": self.name,
            "description": self.description,
            "model": {"id": self.model, "speed": "standard"},
            "system": self.system,
            "tools": [{
                "type": "agent_toolset_20260401",
                "configs": [],
                // pod's approval policy (the server's, within its
                // ceiling) decides which calls ask.
                "default_config": {"enabled": true, "permission_policy": {"type": "always_ask"}},
            }],
            "mcp_servers": [],
            "skills": [],
            "multiagent": null,
            "execution_identity": {"type": "service_account"},
            "version": self.version,
        })
    }

    /// Its JSON in the API's shape.
    pub fn to_json(&self) -> Value {
        let mut value = self.common_json();
        if let Some(object) = value.as_object_mut() {
            object.insert("metadata".into(), json!(self.metadata));
            object.insert("created_at".into(), json!(self.created_at));
            object.insert("updated_at".into(), json!(self.updated_at));
            object.insert("archived_at".into(), Value::Null);
        }
        value
    }
}

/// The profile `model` maps to: `None` (the server's model) for
/// `default` and for the server's own profile or model name.
fn profile_for(runner: &Runner, model: &str) -> Option<String> {
    let server = runner.server_model();
    let is_server = model == DEFAULT_MODEL
        || server.profile.as_deref() == Some(model)
        || server.model.as_deref() == Some(model);
    (!is_server).then(|| model.to_string())
}

/// What `POST /v1/agents` takes (the fields pod acts on; the rest are
/// checked for what it cannot do).
#[derive(Deserialize)]
struct Create {
    name: String,
    model: Value,
    #[serde(default)]
    description: Option<String>,
    #[serde(default)]
    system: Option<String>,
    #[serde(default)]
    metadata: BTreeMap<String, String>,
    #[serde(default)]
    tools: Vec<Value>,
    #[serde(default)]
    mcp_servers: Vec<Value>,
    #[serde(default)]
    skills: Vec<Value>,
    #[serde(default)]
    multiagent: Option<Value>,
    #[serde(default)]
    callable_agents: Vec<Value>,
}

/// `POST /v1/agents`.
pub(crate) async fn create(State(m): State<Managed>, body: Bytes) -> Result<Json<Value>, Error> {
    let create: Create = parse(&body)?;
    if create.name.trim().is_empty() {
        return Err(Error::invalid("`name` is empty"));
    }
    let model = match &create.model {
        Value::String(id) => id.clone(),
        Value::Object(config) => match config.get("id") {
            Some(Value::String(id)) => id.clone(),
            _ => return Err(Error::invalid("`model.id` must be a string")),
        },
        _ => return Err(Error::invalid("`model` must be a string or {\"id\": ...}")),
    };
    for tool in &create.tools {
        match tool.get("type").and_then(Value::as_str) {
            Some("agent_toolset_20260401") => {}
            Some("mcp_toolset") => return Err(Error::unsupported("MCP toolsets on agents")),
            Some("custom") => return Err(Error::unsupported("custom tools")),
            other => {
                return Err(Error::invalid(format!(
                    "unknown tool type {}",
                    other.unwrap_or("(none)")
                )))
            }
        }
    }
    if !create.mcp_servers.is_empty() {
        return Err(Error::unsupported("MCP servers on agents"));
    }
    if !create.skills.is_empty() {
        return Err(Error::unsupported("skills"));
    }
    if create.multiagent.as_ref().is_some_and(|v| !v.is_null())
        || !create.callable_agents.is_empty()
    {
        return Err(Error::unsupported("multiagent agents"));
    }
    check_model(&m, &model)?;
    let now = Utc::now();
    let agent = Agent {
        id: format!("agent_{}", uuid::Uuid::new_v4().simple()),
        name: create.name,
        description: create.description,
        model,
        system: create.system.filter(|s| !s.is_empty()),
        metadata: create.metadata,
        version: 1,
        created_at: now,
        updated_at: now,
    };
    m.files.put(KIND, &agent.id, &agent)?;
    Ok(Json(agent.to_json()))
}

/// Whether the server would start a session on `model`: a profile of its
/// config within its ceiling, or its own model.
fn check_model(m: &Managed, model: &str) -> Result<(), Error> {
    let runner = &m.app.runner;
    let Some(profile) = profile_for(runner, model) else {
        return Ok(());
    };
    let Some(root) = runner.workspace_roots().first() else {
        return Ok(());
    };
    let request = super::request::request("(checking the model)", Some(profile), root, None)?;
    runner.check(&request).map_err(|err| {
        let err = Error::from(err);
        match err.is_bad_request() {
            true => Error::invalid(format!(
                "model {model:?} is neither a profile of this server's config nor \
                 `{DEFAULT_MODEL}` (the server's model): {err}"
            )),
            false => err,
        }
    })
}

/// `GET /v1/agents/{id}`.
pub(crate) async fn retrieve(
    State(m): State<Managed>,
    Path(id): Path<String>,
) -> Result<Json<Value>, Error> {
    Ok(Json(get(&m, &id)?.to_json()))
}

/// Agent `id`, or a 404.
pub(crate) fn get(m: &Managed, id: &str) -> Result<Agent, Error> {
    m.files
        .get(KIND, id)?
        .ok_or_else(|| Error::not_found(format!("no agent {id}")))
}

/// `GET /v1/agents`: newest first, in pages.
pub(crate) async fn list(
    State(m): State<Managed>,
    RawQuery(query): RawQuery,
) -> Result<Json<Value>, Error> {
    let pairs = query_pairs(query.as_deref());
    let mut agents: Vec<Agent> = m.files.all(KIND)?;
    agents.sort_by(|a, b| b.created_at.cmp(&a.created_at).then(a.id.cmp(&b.id)));
    let (data, next) = page(
        &agents,
        query_value(&pairs, "limit"),
        query_value(&pairs, "page"),
    )?;
    let data: Vec<Value> = data.iter().map(Agent::to_json).collect();
    Ok(Json(json!({"data": data, "next_page": next})))
}
