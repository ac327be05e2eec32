//! Where agents, environments and sessions' Managed Agents settings are
//! kept: one JSON file each under `POD_HOME/managed/<kind>/<id>.json`,
//! private (0700/0600), written whole (a temporary file renamed over it),
//! so a crash leaves the old file or the new one.

use super::error::Error;
use serde::de::DeserializeOwned;
use serde::Serialize;
use std::path::PathBuf;

/// The directory the resources are kept in.
#[derive(Clone)]
pub(crate) struct Files {
    dir: PathBuf,
}

/// Whether `id` can name a file: the API's ids are a prefix, `_`, letters
/// and digits; anything else (a `/`, a `..`) names no resource.
fn valid_id(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= 128
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

impl Files {
    pub fn new(dir: PathBuf) -> Self {
        Self { dir }
    }

    fn path(&self, kind: &str, id: &str) -> Option<PathBuf> {
        valid_id(id).then(|| self.dir.join(kind).join(format!("{id}.json")))
    }

    /// Writes resource `id` of `kind`.
    pub fn put<T: Serialize>(&self, kind: &str, id: &str, value: &T) -> Result<(), Error> {
        use std::io::Write;
        use std::os::unix::fs::OpenOptionsExt;
        let path = self
            .path(kind, id)
            .ok_or_else(|| Error::invalid(format!("{id:?} is not an id")))?;
        let dir = self.dir.join(kind);
        let mut builder = std::fs::DirBuilder::new();
        builder.recursive(true);
        std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
        let failed = |what: &str, err: std::io::Error| {
            Error::internal(format!("cannot {what} {}: {err}", dir.display()))
        };
        builder.create(&dir).map_err(|e| failed("create", e))?;
        let text = serde_json::to_vec_pretty(value)
            .map_err(|e| Error::internal(format!("cannot encode {id}: {e}")))?;
        let temporary = dir.join(format!(".{id}.json.{}", uuid::Uuid::new_v4().simple()));
        let written = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&temporary)
            .and_then(|mut file| {
                file.write_all(&text)?;
                file.sync_all()
            })
            .and_then(|()| std::fs::rename(&temporary, &path));
        if let Err(err) = written {
            let _ = std::fs::remove_file(&temporary);
            return Err(failed("write in", err));
        }
        Ok(())
    }

    /// Reads resource `id` of `kind`, if there is one.
    pub fn get<T: DeserializeOwned>(&self, kind: &str, id: &str) -> Result<Option<T>, Error> {
        let Some(path) = self.path(kind, id) else {
            return Ok(None);
        };
        match std::fs::read(&path) {
            Ok(bytes) => serde_json::from_slice(&bytes).map(Some).map_err(|e| {
                Error::internal(format!("{} is not what pod wrote: {e}", path.display()))
            }),
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(err) => Err(Error::internal(format!(
                "cannot read {}: {err}",
                path.display()
            ))),
        }
    }

    /// Removes resource `id` of `kind` (nothing when there is none).
    pub fn remove(&self, kind: &str, id: &str) -> Result<(), Error> {
        let Some(path) = self.path(kind, id) else {
            return Ok(());
        };
        match std::fs::remove_file(&path) {
            Ok(()) => Ok(()),
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(err) => Err(Error::internal(format!(
                "cannot remove {}: {err}",
                path.display()
            ))),
        }
    }

    /// Every resource of `kind` (none when nothing was made yet).
    pub fn all<T: DeserializeOwned>(&self, kind: &str) -> Result<Vec<T>, Error> {
        let dir = self.dir.join(kind);
        let entries = match std::fs::read_dir(&dir) {
            Ok(entries) => entries,
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(err) => {
                return Err(Error::internal(format!(
                    "cannot read {}: {err}",
                    dir.display()
                )))
            }
        };
        let mut all = Vec::new();
        for entry in entries.flatten() {
            let name = entry.file_name();
            let Some(id) = name.to_str().and_then(|n| n.strip_suffix(".json")) else {
                continue;
            };
            if let Some(value) = self.get(kind, id)? {
                all.push(value);
            }
        }
        Ok(all)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resources_round_trip_privately_and_paths_cannot_escape() {
        let dir = tempfile::tempdir().unwrap();
        let files = Files::new(dir.path().join("managed"));
        files
            .put("agents", "agent_1", &serde_json::json!({"a": 1}))
            .unwrap();
        let back: Option<serde_json::Value> = files.get("agents", "agent_1").unwrap();
        assert_eq!(back, Some(serde_json::json!({"a": 1})));
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(dir.path().join("managed/agents/agent_1.json"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
        assert!(files.put("agents", "../x", &1).is_err());
        let none: Option<serde_json::Value> = files.get("agents", "../agents/agent_1").unwrap();
        assert_eq!(none, None);
        let all: Vec<serde_json::Value> = files.all("agents").unwrap();
        assert_eq!(all.len(), 1);
        let empty: Vec<serde_json::Value> = files.all("sessions").unwrap();
        assert!(empty.is_empty());
    }
}
