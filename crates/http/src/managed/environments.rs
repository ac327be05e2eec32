//! `/v1/environments`: create, retrieve, list, archive, delete. An
//! environment is where a
//! session's agent works: a workspace directory inside the server's
//! workspace roots (`metadata["pod.workspace"]`, else the first root), and
//! whether `bash` may use the network under the sandbox (`networking`:
//! `unrestricted` keeps the server's setting, `limited` with no hosts
//! turns it off). Kept as `POD_HOME/managed/environments/<id>.json`.

use super::error::{parse, Error};
use super::{page, query_pairs, query_value, Managed};
use axum::body::Bytes;
use axum::extract::{Path, RawQuery, State};
use axum::Json;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::path::PathBuf;

const KIND: &str = "environments";

/// The metadata key naming an environment's workspace directory.
pub(crate) const WORKSPACE_KEY: &str = "pod.workspace";

/// An environment as pod keeps it.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub(crate) struct Environment {
    pub id: String,
    pub name: String,
    #[serde(default)]
    pub description: Option<String>,
    #[serde(default)]
    pub metadata: BTreeMap<String, String>,
    /// `cloud` or `self_hosted`, as the client gave it.
    pub config_type: String,
    /// Whether the networking was `limited` (no network for `bash`).
    pub limited: bool,
    /// The session's workspace (canonical).
    pub workspace: PathBuf,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    /// When it was archived: no new session may use it.
    #[serde(default)]
    pub archived_at: Option<DateTime<Utc>>,
}

impl Environment {
    /// `bash`'s network under the sandbox: off when limited, else the
    /// server's.
    pub fn network(&self) -> Option<bool> {
        self.limited.then_some(false)
    }

    /// Its JSON in the API's shape.
    pub fn to_json(&self) -> Value {
        let config = match self.config_type.as_str() {
            "self_hosted" => json!({"type": "self_hosted"}),
            _ => {
                let networking = match self.limited {
                    true => json!({
                        "type": "limited",
                        "allowed_hosts": [],
                        "allow_mcp_servers": false,
                        "allow_package_managers": false,
                    }),
                    false => json!({"type": "unrestricted"}),
                };
                let none: [&str; 0] = [];
                json!({
                    "type": "cloud",
                    "networking": networking,
                    "packages": {"type": "packages", "apt": none, "cargo": none, "gem": none,
                                 "go": none, "npm": none, "pip": none},
                })
            }
        };
        json!({
            "id": self.id,
            "type": "environment",
            "name": self.name,
            "description": self.description,
            "metadata": self.metadata,
            "config": config,
            "scope": "account",
            "created_at": self.created_at,
            "updated_at": self.updated_at,
            "archived_at": self.archived_at,
        })
    }
}

/// What `POST /v1/environments` takes.
#[derive(Deserialize)]
struct Create {
    name: String,
    #[serde(default)]
    description: Option<String>,
    #[serde(default)]
    metadata: BTreeMap<String, String>,
    #[serde(default)]
    config: Option<Value>,
}

/// `POST /v1/environments`.
pub(crate) async fn create(State(m): State<Managed>, body: Bytes) -> Result<Json<Value>, Error> {
    let create: Create = parse(&body)?;
    if create.name.trim().is_empty() {
        return Err(Error::invalid("`name` is empty"));
    }
    let (config_type, limited) = config(create.config.as_ref())?;
    let workspace = place(&m, &create.metadata, limited)?;
    let now = Utc::now();
    let environment = Environment {
        id: format!("env_{}", uuid::Uuid::new_v4().simple()),
        name: create.name,
        description: create.description,
        metadata: create.metadata,
        config_type,
        limited,
        workspace,
        created_at: now,
        updated_at: now,
        archived_at: None,
    };
    m.files.put(KIND, &environment.id, &environment).await?;
    m.changed("environment.created", &environment.id);
    Ok(Json(environment.to_json()))
}

/// The workspace `metadata` names (else the server's first root),
/// canonical, and checked within the server's roots with that network
/// setting, as any session it starts.
fn place(
    m: &Managed,
    metadata: &BTreeMap<String, String>,
    limited: bool,
) -> Result<PathBuf, Error> {
    let runner = &m.app.runner;
    let workspace = match metadata.get(WORKSPACE_KEY) {
        Some(dir) => PathBuf::from(dir),
        None => runner
            .workspace_roots()
            .first()
            .cloned()
            .ok_or_else(|| Error::internal("the server has no workspace root"))?,
    };
    let workspace = workspace.canonicalize().map_err(|e| {
        Error::invalid(format!(
            "metadata[{WORKSPACE_KEY:?}]: {}: {e}",
            workspace.display()
        ))
    })?;
    let probe = super::request::request(
        "(checking the environment)",
        None,
        &workspace,
        limited.then_some(false),
    )?;
    runner.check(&probe)?;
    Ok(workspace)
}

/// `POST /v1/environments/{id}`: `name`, `description` (`null` clears it),
/// a `metadata` patch (`null` or `""` deletes a key; `pod.workspace` moves
/// it, checked again), `config` (replaced). Sessions made before keep the
/// environment as it was.
pub(crate) async fn update(
    State(m): State<Managed>,
    Path(id): Path<String>,
    body: Bytes,
) -> Result<Json<Value>, Error> {
    let fields: serde_json::Map<String, Value> = parse(&body)?;
    let _one = m.starting.lock().await;
    let mut environment = get(&m, &id).await?;
    if environment.archived_at.is_some() {
        return Err(Error::invalid(format!("environment {id} is archived")));
    }
    for (key, value) in &fields {
        match (key.as_str(), value) {
            ("name", Value::String(name)) if !name.trim().is_empty() => {
                environment.name = name.clone()
            }
            ("name", Value::Null) => {}
            ("name", _) => return Err(Error::invalid("`name` must be a non-empty string")),
            ("description", Value::Null) => environment.description = None,
            ("description", Value::String(text)) => environment.description = Some(text.clone()),
            ("metadata", Value::Object(patch)) => {
                super::patch_metadata(&mut environment.metadata, patch, true)?
            }
            ("config", config_value) => {
                let (config_type, limited) = config(Some(config_value))?;
                environment.config_type = config_type;
                environment.limited = limited;
            }
            ("scope", Value::Null | Value::String(_)) => {}
            (other, _) => {
                return Err(Error::invalid(format!(
                    "`{other}` is not a field of an environment update"
                )))
            }
        }
    }
    environment.workspace = place(&m, &environment.metadata, environment.limited)?;
    environment.updated_at = Utc::now();
    m.files.put(KIND, &environment.id, &environment).await?;
    m.changed("environment.updated", &environment.id);
    Ok(Json(environment.to_json()))
}

/// The config's type and whether its networking is limited; what pod
/// cannot do (packages to install, an allow-list of hosts) is refused.
fn config(config: Option<&Value>) -> Result<(String, bool), Error> {
    let Some(config) = config.filter(|c| !c.is_null()) else {
        return Ok(("cloud".into(), false));
    };
    let kind = config
        .get("type")
        .and_then(Value::as_str)
        .unwrap_or("cloud");
    match kind {
        "self_hosted" => return Ok((kind.into(), false)),
        "cloud" => {}
        other => return Err(Error::invalid(format!("unknown config type {other:?}"))),
    }
    if let Some(packages) = config.get("packages").filter(|p| !p.is_null()) {
        let any = packages.as_object().is_some_and(|p| {
            p.values()
                .any(|v| v.as_array().is_some_and(|a| !a.is_empty()))
        });
        if any {
            return Err(Error::unsupported(
                "packages in an environment (install them in the workspace's machine)",
            ));
        }
    }
    let limited = match config.get("networking").filter(|n| !n.is_null()) {
        None => false,
        Some(networking) => match networking.get("type").and_then(Value::as_str) {
            Some("unrestricted") => false,
            Some("limited") => {
                let hosts = networking
                    .get("allowed_hosts")
                    .and_then(Value::as_array)
                    .is_some_and(|h| !h.is_empty());
                if hosts {
                    return Err(Error::unsupported(
                        "an allow-list of hosts (pod's sandbox allows the network or not)",
                    ));
                }
                true
            }
            other => {
                return Err(Error::invalid(format!(
                    "unknown networking type {}",
                    other.unwrap_or("(none)")
                )))
            }
        },
    };
    Ok((kind.into(), limited))
}

/// `GET /v1/environments/{id}`.
pub(crate) async fn retrieve(
    State(m): State<Managed>,
    Path(id): Path<String>,
) -> Result<Json<Value>, Error> {
    Ok(Json(get(&m, &id).await?.to_json()))
}

/// Environment `id`, or a 404.
pub(crate) async fn get(m: &Managed, id: &str) -> Result<Environment, Error> {
    m.files
        .get(KIND, id)
        .await?
        .ok_or_else(|| Error::not_found(format!("no environment {id}")))
}

/// `GET /v1/environments`: newest first, in pages.
pub(crate) async fn list(
    State(m): State<Managed>,
    RawQuery(query): RawQuery,
) -> Result<Json<Value>, Error> {
    let pairs = query_pairs(query.as_deref());
    let mut all: Vec<Environment> = m.files.all(KIND).await?;
    if query_value(&pairs, "include_archived") != Some("true") {
        all.retain(|e| e.archived_at.is_none());
    }
    all.sort_by(|a, b| b.created_at.cmp(&a.created_at).then(a.id.cmp(&b.id)));
    let (data, next) = page(
        &all,
        query_value(&pairs, "limit"),
        query_value(&pairs, "page"),
    )?;
    let data: Vec<Value> = data.iter().map(Environment::to_json).collect();
    Ok(Json(json!({"data": data, "next_page": next})))
}

/// `POST /v1/environments/{id}/archive`: no new session may use it;
/// sessions that did keep their workspace.
pub(crate) async fn archive(
    State(m): State<Managed>,
    Path(id): Path<String>,
) -> Result<Json<Value>, Error> {
    let _one = m.starting.lock().await;
    let mut environment = get(&m, &id).await?;
    if environment.archived_at.is_none() {
        environment.archived_at = Some(Utc::now());
        m.files.put(KIND, &environment.id, &environment).await?;
        m.changed("environment.archived", &environment.id);
    }
    Ok(Json(environment.to_json()))
}

/// `DELETE /v1/environments/{id}`: forgotten; its workspace directory is
/// the operator's and stays, and sessions that used it keep it.
pub(crate) async fn delete(
    State(m): State<Managed>,
    Path(id): Path<String>,
) -> Result<Json<Value>, Error> {
    let _one = m.starting.lock().await;
    let environment = get(&m, &id).await?;
    m.files.remove(KIND, &environment.id).await?;
    m.changed("environment.deleted", &environment.id);
    Ok(Json(
        json!({"id": environment.id, "type": "environment_deleted"}),
    ))
}
