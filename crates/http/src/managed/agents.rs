//! `/v1/agents`: create, retrieve (any version), list, update, archive,
//! and list versions. An agent is a name, a model (a profile of the
//! server's config, or `default` for the server's model), a system prompt,
//! the default toolset and the client's custom tools; kept as
//! `POD_HOME/managed/agents/<id>.json` (its latest version) and every
//! version as `POD_HOME/managed/agent-versions/<id>-v<n>.json`, since a
//! session pins the version it was created with.

use super::error::{parse, Error};
use super::mcp::{self, McpServer, Toolset};
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
const VERSIONS: &str = "agent-versions";

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
    /// Tools its client runs (`{"type": "custom"}`): a call parks the
    /// session until a `user.custom_tool_result` answers it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub custom_tools: Vec<pod::ClientToolSpec>,
    /// MCP servers its sessions connect to, each with its toolset.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub mcp_servers: Vec<McpServer>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub mcp_toolsets: Vec<Toolset>,
    pub version: u32,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    /// When it was archived: no new session may use it.
    #[serde(default)]
    pub archived_at: Option<DateTime<Utc>>,
}

impl Agent {
    /// The profile its model maps to: `None` for the server's model.
    pub fn profile(&self, runner: &Runner) -> Option<String> {
        profile_for(runner, &self.model)
    }

    /// The fields an agent and a session's copy of it share.
    pub fn common_json(&self) -> Value {
        let mut tools = vec![json!({
            "type": "agent_toolset_20260401",
            "configs": [],
            // pod's approval policy (the server's, within its ceiling)
            // decides which calls ask.
            "default_config": {"enabled": true, "permission_policy": {"type": "always_ask"}},
        })];
        tools.extend(self.mcp_toolsets.iter().map(Toolset::to_json));
        tools.extend(self.custom_tools.iter().map(|tool| {
            json!({
                "type": "custom",
                "name": tool.name,
                "description": tool.description,
                "input_schema": tool.input_schema,
            })
        }));
        json!({
            "id": self.id,
            "type": "agent",
            "name": self.name,
            "description": self.description,
            "model": {"id": self.model, "speed": "standard"},
            "system": self.system,
            "tools": tools,
            "mcp_servers": self.mcp_servers.iter().map(|server| json!({
                "type": "url", "name": server.name, "url": server.url,
            })).collect::<Vec<_>>(),
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
            object.insert("archived_at".into(), json!(self.archived_at));
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
    let model = model_id(&create.model)?;
    let tools = check_capabilities(
        &create.tools,
        &create.skills,
        create.multiagent.as_ref(),
        &create.callable_agents,
    )?;
    let mcp_servers = mcp::servers(&create.mcp_servers)?;
    mcp::check(&mcp_servers, &tools.mcp_toolsets)?;
    check_mcp_urls(&m, &mcp_servers)?;
    check_model(&m, &model)?;
    let now = Utc::now();
    let agent = Agent {
        id: format!("agent_{}", uuid::Uuid::new_v4().simple()),
        name: create.name,
        description: create.description,
        model,
        system: create.system.filter(|s| !s.is_empty()),
        metadata: create.metadata,
        custom_tools: tools.custom,
        mcp_servers,
        mcp_toolsets: tools.mcp_toolsets,
        version: 1,
        created_at: now,
        updated_at: now,
        archived_at: None,
    };
    save(&m, &agent).await?;
    m.changed("agent.created", &agent.id);
    Ok(Json(agent.to_json()))
}

/// Keeps `agent` as its latest version and as that version.
async fn save(m: &Managed, agent: &Agent) -> Result<(), Error> {
    m.files
        .put(VERSIONS, &version_key(&agent.id, agent.version), agent)
        .await?;
    m.files.put(KIND, &agent.id, agent).await
}

fn version_key(id: &str, version: u32) -> String {
    format!("{id}-v{version}")
}

/// What an agent's `tools` give it besides the default toolset.
struct Tools {
    custom: Vec<pod::ClientToolSpec>,
    mcp_toolsets: Vec<Toolset>,
}

/// The custom tools and MCP toolsets of `tools`; what pod cannot give an
/// agent (skills, other agents to call) is refused by name, never
/// ignored.
fn check_capabilities(
    tools: &[Value],
    skills: &[Value],
    multiagent: Option<&Value>,
    callable_agents: &[Value],
) -> Result<Tools, Error> {
    let mut custom: Vec<pod::ClientToolSpec> = Vec::new();
    let mut mcp_toolsets = Vec::new();
    for tool in tools {
        match tool.get("type").and_then(Value::as_str) {
            Some("agent_toolset_20260401") => {}
            Some("mcp_toolset") => mcp_toolsets.push(mcp::toolset(tool)?),
            Some("custom") => {
                let spec = custom_tool(tool)?;
                if custom.iter().any(|t| t.name == spec.name) {
                    return Err(Error::invalid(format!(
                        "two custom tools are named {:?}",
                        spec.name
                    )));
                }
                custom.push(spec);
            }
            other => {
                return Err(Error::invalid(format!(
                    "unknown tool type {}",
                    other.unwrap_or("(none)")
                )))
            }
        }
    }
    if !skills.is_empty() {
        return Err(Error::unsupported("skills"));
    }
    if multiagent.is_some_and(|v| !v.is_null()) || !callable_agents.is_empty() {
        return Err(Error::unsupported("multiagent agents"));
    }
    Ok(Tools {
        custom,
        mcp_toolsets,
    })
}

/// Each server's URL is one the operator lets API clients reach
/// (`[http] mcp_server_urls`).
pub(crate) fn check_mcp_urls(m: &Managed, servers: &[McpServer]) -> Result<(), Error> {
    let ceiling = &m.app.runner.allowed().ceiling;
    for server in servers {
        ceiling
            .check_mcp_url(&server.url)
            .map_err(|widening| Error::from(crate::error::ApiError::forbidden(widening)))?;
    }
    Ok(())
}

/// A `{"type": "custom", name, description, input_schema}` tool.
fn custom_tool(tool: &Value) -> Result<pod::ClientToolSpec, Error> {
    let text = |key: &str| match tool.get(key) {
        Some(Value::String(text)) => Ok(text.clone()),
        _ => Err(Error::invalid(format!(
            "a custom tool needs `{key}` (a string)"
        ))),
    };
    let spec = pod::ClientToolSpec {
        name: text("name")?,
        description: text("description")?,
        input_schema: tool
            .get("input_schema")
            .cloned()
            .ok_or_else(|| Error::invalid("a custom tool needs `input_schema`"))?,
    };
    spec.check().map_err(Error::invalid)?;
    Ok(spec)
}

/// The model string of a `model` field: a string or `{"id": ...}`.
fn model_id(model: &Value) -> Result<String, Error> {
    match model {
        Value::String(id) => Ok(id.clone()),
        Value::Object(config) => match config.get("id") {
            Some(Value::String(id)) => Ok(id.clone()),
            _ => Err(Error::invalid("`model.id` must be a string")),
        },
        _ => Err(Error::invalid("`model` must be a string or {\"id\": ...}")),
    }
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

/// `GET /v1/agents/{id}` (`?version=N` for an earlier one).
pub(crate) async fn retrieve(
    State(m): State<Managed>,
    Path(id): Path<String>,
    RawQuery(query): RawQuery,
) -> Result<Json<Value>, Error> {
    let pairs = query_pairs(query.as_deref());
    let agent = match query_value(&pairs, "version") {
        Some(version) => {
            let version = version
                .parse()
                .map_err(|_| Error::invalid("`version` must be a number of 1 or more"))?;
            get_version(&m, &id, version).await?
        }
        None => get(&m, &id).await?,
    };
    Ok(Json(agent.to_json()))
}

/// Version `version` of agent `id`, or a 404.
pub(crate) async fn get_version(m: &Managed, id: &str, version: u32) -> Result<Agent, Error> {
    let latest = get(m, id).await?;
    if version == latest.version {
        return Ok(latest);
    }
    m.files
        .get(VERSIONS, &version_key(id, version))
        .await?
        .ok_or_else(|| {
            Error::not_found(format!(
                "agent {id} has no version {version} (its versions are 1 to {})",
                latest.version
            ))
        })
}

/// `POST /v1/agents/{id}`: a field omitted is kept, `null` (or an empty
/// string or list) clears what may be cleared; `metadata` is a patch
/// (`null` deletes a key). A change makes a new version; an update that
/// changes nothing returns the agent as it is. With `version`, the update
/// applies only to that version (409 otherwise): two clients editing at
/// once do not overwrite each other.
pub(crate) async fn update(
    State(m): State<Managed>,
    Path(id): Path<String>,
    body: Bytes,
) -> Result<Json<Value>, Error> {
    let fields: serde_json::Map<String, Value> = parse(&body)?;
    // One update at a time: two would both read version N and write N+1.
    let _one = m.starting.lock().await;
    let current = get(&m, &id).await?;
    if current.archived_at.is_some() {
        return Err(Error::invalid(format!("agent {id} is archived")));
    }
    if let Some(expected) = fields.get("version").filter(|v| !v.is_null()) {
        if expected.as_u64() != Some(u64::from(current.version)) {
            return Err(Error::conflict(format!(
                "agent {id} is at version {}, not {expected}: retrieve it and apply the change \
                 again",
                current.version
            )));
        }
    }
    let list = |key: &str| -> Result<Vec<Value>, Error> {
        match fields.get(key) {
            None | Some(Value::Null) => Ok(Vec::new()),
            Some(Value::Array(items)) => Ok(items.clone()),
            Some(_) => Err(Error::invalid(format!("`{key}` must be a list"))),
        }
    };
    let tools = check_capabilities(
        &list("tools")?,
        &list("skills")?,
        fields.get("multiagent"),
        &[],
    )?;
    let text = |key: &str, keep: Option<String>| -> Result<Option<String>, Error> {
        match fields.get(key) {
            None => Ok(keep),
            Some(Value::Null) => Ok(None),
            Some(Value::String(text)) => Ok(Some(text.clone()).filter(|t| !t.is_empty())),
            Some(_) => Err(Error::invalid(format!("`{key}` must be a string or null"))),
        }
    };
    let mut next = current.clone();
    match fields.get("name") {
        None => {}
        Some(Value::String(name)) if !name.trim().is_empty() => next.name = name.clone(),
        Some(_) => return Err(Error::invalid("`name` must be a non-empty string")),
    }
    if let Some(model) = fields.get("model") {
        let model = model_id(model)?;
        if model != current.model {
            check_model(&m, &model)?;
        }
        next.model = model;
    }
    next.description = text("description", current.description.clone())?;
    next.system = text("system", current.system.clone())?;
    // `tools` replaces the list when given.
    if fields.contains_key("tools") {
        next.custom_tools = tools.custom;
        next.mcp_toolsets = tools.mcp_toolsets;
    }
    if fields.contains_key("mcp_servers") {
        next.mcp_servers = mcp::servers(&list("mcp_servers")?)?;
    }
    mcp::check(&next.mcp_servers, &next.mcp_toolsets)?;
    if next.mcp_servers != current.mcp_servers {
        check_mcp_urls(&m, &next.mcp_servers)?;
    }
    match fields.get("metadata") {
        None | Some(Value::Null) => {}
        Some(Value::Object(patch)) => super::patch_metadata(&mut next.metadata, patch, false)?,
        Some(_) => return Err(Error::invalid("`metadata` must be an object")),
    }
    let unchanged = next.name == current.name
        && next.model == current.model
        && next.description == current.description
        && next.system == current.system
        && next.metadata == current.metadata
        && next.custom_tools == current.custom_tools
        && next.mcp_servers == current.mcp_servers
        && next.mcp_toolsets == current.mcp_toolsets;
    if unchanged {
        return Ok(Json(current.to_json()));
    }
    next.version = current.version + 1;
    next.updated_at = Utc::now();
    save(&m, &next).await?;
    m.changed("agent.updated", &next.id);
    Ok(Json(next.to_json()))
}

/// `POST /v1/agents/{id}/archive`: no new session may use it (those that
/// did keep running); it leaves the list unless `include_archived`.
pub(crate) async fn archive(
    State(m): State<Managed>,
    Path(id): Path<String>,
) -> Result<Json<Value>, Error> {
    let _one = m.starting.lock().await;
    let mut agent = get(&m, &id).await?;
    if agent.archived_at.is_none() {
        agent.archived_at = Some(Utc::now());
        m.files.put(KIND, &agent.id, &agent).await?;
        m.changed("agent.archived", &agent.id);
    }
    Ok(Json(agent.to_json()))
}

/// `GET /v1/agents/{id}/versions`: newest first, in pages.
pub(crate) async fn versions(
    State(m): State<Managed>,
    Path(id): Path<String>,
    RawQuery(query): RawQuery,
) -> Result<Json<Value>, Error> {
    let pairs = query_pairs(query.as_deref());
    let latest = get(&m, &id).await?;
    let mut all = Vec::with_capacity(latest.version as usize);
    for version in (1..=latest.version).rev() {
        // An agent from before versions were kept has only its latest.
        match get_version(&m, &id, version).await {
            Ok(agent) => all.push(agent),
            Err(err) if err.status() == axum::http::StatusCode::NOT_FOUND => {}
            Err(err) => return Err(err),
        }
    }
    let (data, next) = page(
        &all,
        query_value(&pairs, "limit"),
        query_value(&pairs, "page"),
    )?;
    let data: Vec<Value> = data.iter().map(Agent::to_json).collect();
    Ok(Json(json!({"data": data, "next_page": next})))
}

/// Agent `id`, or a 404.
pub(crate) async fn get(m: &Managed, id: &str) -> Result<Agent, Error> {
    m.files
        .get(KIND, id)
        .await?
        .ok_or_else(|| Error::not_found(format!("no agent {id}")))
}

/// `GET /v1/agents`: newest first, in pages.
pub(crate) async fn list(
    State(m): State<Managed>,
    RawQuery(query): RawQuery,
) -> Result<Json<Value>, Error> {
    let pairs = query_pairs(query.as_deref());
    let mut agents: Vec<Agent> = m.files.all(KIND).await?;
    if query_value(&pairs, "include_archived") != Some("true") {
        agents.retain(|a| a.archived_at.is_none());
    }
    agents.sort_by(|a, b| b.created_at.cmp(&a.created_at).then(a.id.cmp(&b.id)));
    let (data, next) = page(
        &agents,
        query_value(&pairs, "limit"),
        query_value(&pairs, "page"),
    )?;
    let data: Vec<Value> = data.iter().map(Agent::to_json).collect();
    Ok(Json(json!({"data": data, "next_page": next})))
}
