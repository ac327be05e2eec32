//! Triggers through the API: `GET /api/triggers` lists them (the config
//! file's and the API's, never a secret), `POST /api/triggers` defines one
//! (`{"name", "secret", "signature", "task", …}`: a `[triggers.NAME]`
//! table as JSON, held to the server's ceiling like a session it would
//! start), `DELETE /api/triggers/{name}` removes one the API defined.

use super::api::AppState;
use super::error::{parse, ApiError};
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::{json, Value};

/// `GET /api/triggers`.
pub async fn list(State(app): State<AppState>) -> Json<Value> {
    let triggers: Vec<Value> = app.triggers.all().iter().map(|t| t.describe()).collect();
    Json(json!({ "triggers": triggers }))
}

/// `POST /api/triggers`: 201 with the trigger (no secret); 409 when the
/// name is taken, 403 beyond what the server allows, 400 for bad keys.
pub async fn define(State(app): State<AppState>, body: Bytes) -> Result<Response, ApiError> {
    let mut definition: Value = parse(&body)?;
    let Some(object) = definition.as_object_mut() else {
        return Err(ApiError::bad_request("a trigger is a JSON object"));
    };
    let name = match object.remove("name") {
        Some(Value::String(name)) => name,
        _ => {
            return Err(ApiError::bad_request(
                "`name` is missing: the trigger's name",
            ))
        }
    };
    let trigger = app.triggers.define(&name, &definition, |request| {
        app.runner.check(request).map(|_| ())
    })?;
    tracing::info!(trigger = %name, "a trigger was defined through the API");
    Ok((StatusCode::CREATED, Json(trigger.describe())).into_response())
}

/// `DELETE /api/triggers/{name}`: 204.
pub async fn remove(
    State(app): State<AppState>,
    Path(name): Path<String>,
) -> Result<StatusCode, ApiError> {
    app.triggers.remove(&name)?;
    tracing::info!(trigger = %name, "a trigger was removed through the API");
    Ok(StatusCode::NO_CONTENT)
}
