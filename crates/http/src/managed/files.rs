//! The Managed Agents API's resources as typed documents: agents,
//! environments and sessions' settings, encoded as JSON and kept in the
//! server's [`Documents`] (files under `POD_HOME/managed/`, or a fleet's
//! PostgreSQL). An id that could name anything but one document (a `/`,
//! a `..`) names no resource.

use super::error::Error;
use crate::documents::Documents;
use serde::de::DeserializeOwned;
use serde::Serialize;
use std::sync::Arc;

/// Where the resources are kept.
#[derive(Clone)]
pub(crate) struct Files {
    documents: Arc<dyn Documents>,
}

/// Whether `id` can name a document: the API's ids are a prefix, `_`,
/// letters and digits.
fn valid_id(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= 128
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

fn failed(err: crate::documents::DocumentError) -> Error {
    Error::internal(pod_llm::error_chain(&err))
}

impl Files {
    pub fn new(documents: Arc<dyn Documents>) -> Self {
        Self { documents }
    }

    /// Writes resource `id` of `kind`.
    pub async fn put<T: Serialize>(&self, kind: &str, id: &str, value: &T) -> Result<(), Error> {
        if !valid_id(id) {
            return Err(Error::invalid(format!("{id:?} is not an id")));
        }
        let body = serde_json::to_vec_pretty(value)
            .map_err(|e| Error::internal(format!("cannot encode {id}: {e}")))?;
        self.documents.put(kind, id, &body).await.map_err(failed)
    }

    /// Reads resource `id` of `kind`, if there is one.
    pub async fn get<T: DeserializeOwned>(&self, kind: &str, id: &str) -> Result<Option<T>, Error> {
        if !valid_id(id) {
            return Ok(None);
        }
        match self.documents.get(kind, id).await.map_err(failed)? {
            Some(body) => decode(kind, &body).map(Some),
            None => Ok(None),
        }
    }

    /// Removes resource `id` of `kind` (nothing when there is none).
    pub async fn remove(&self, kind: &str, id: &str) -> Result<(), Error> {
        if !valid_id(id) {
            return Ok(());
        }
        self.documents.remove(kind, id).await.map_err(failed)
    }

    /// Every resource of `kind` (none when nothing was made yet).
    pub async fn all<T: DeserializeOwned>(&self, kind: &str) -> Result<Vec<T>, Error> {
        let bodies = self.documents.all(kind).await.map_err(failed)?;
        bodies.iter().map(|body| decode(kind, body)).collect()
    }
}

fn decode<T: DeserializeOwned>(kind: &str, body: &[u8]) -> Result<T, Error> {
    serde_json::from_slice(body)
        .map_err(|e| Error::internal(format!("a document of {kind} is not what pod wrote: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::documents::FileDocuments;

    #[tokio::test]
    async fn resources_round_trip_privately_and_paths_cannot_escape() {
        let dir = tempfile::tempdir().unwrap();
        let files = Files::new(Arc::new(FileDocuments::new(dir.path().join("managed"))));
        files
            .put("agents", "agent_1", &serde_json::json!({"a": 1}))
            .await
            .unwrap();
        let back: Option<serde_json::Value> = files.get("agents", "agent_1").await.unwrap();
        assert_eq!(back, Some(serde_json::json!({"a": 1})));
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(dir.path().join("managed/agents/agent_1.json"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
        assert!(files.put("agents", "../x", &1).await.is_err());
        let none: Option<serde_json::Value> =
            files.get("agents", "../agents/agent_1").await.unwrap();
        assert_eq!(none, None);
        let all: Vec<serde_json::Value> = files.all("agents").await.unwrap();
        assert_eq!(all.len(), 1);
        let empty: Vec<serde_json::Value> = files.all("sessions").await.unwrap();
        assert!(empty.is_empty());
        files.remove("agents", "agent_1").await.unwrap();
        let gone: Vec<serde_json::Value> = files.all("agents").await.unwrap();
        assert!(gone.is_empty());
    }
}
