//! Where the Managed Agents API keeps its agents, environments and
//! sessions' settings: small JSON documents by kind and id. On the file
//! store they are files under `POD_HOME/managed/` ([`FileDocuments`]); a
//! front end whose store is shared (a fleet's PostgreSQL) gives its own
//! ([`Runner::with_documents`](crate::Runner::with_documents)), so every
//! server of the fleet sees the same ones.

use std::path::PathBuf;

/// Why a document could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum DocumentError {
    /// The file store failed.
    #[error("cannot {what} {}", path.display())]
    Io {
        /// What was being done.
        what: &'static str,
        /// Where.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The store the front end gave failed.
    #[error(transparent)]
    Store(#[from] pod::PodError),
}

/// Small JSON documents by kind (`agents`, `environments`, …) and id. An
/// id is checked by the caller (letters, digits, `_`, `-`).
#[async_trait::async_trait]
pub trait Documents: Send + Sync {
    /// Writes document `id` of `kind` whole (replacing it): a crash leaves
    /// the old one or the new one.
    async fn put(&self, kind: &str, id: &str, body: &[u8]) -> Result<(), DocumentError>;

    /// Document `id` of `kind`, if there is one.
    async fn get(&self, kind: &str, id: &str) -> Result<Option<Vec<u8>>, DocumentError>;

    /// Every document of `kind` (none when nothing was made yet).
    async fn all(&self, kind: &str) -> Result<Vec<Vec<u8>>, DocumentError>;

    /// Removes document `id` of `kind` (nothing when there is none).
    async fn remove(&self, kind: &str, id: &str) -> Result<(), DocumentError>;
}

/// Documents as files: `DIR/<kind>/<id>.json`, private (0700/0600),
/// written to a temporary file renamed over the old one.
pub struct FileDocuments {
    dir: PathBuf,
}

impl FileDocuments {
    /// Documents under `dir`.
    pub fn new(dir: PathBuf) -> Self {
        Self { dir }
    }

    fn path(&self, kind: &str, id: &str) -> PathBuf {
        self.dir.join(kind).join(format!("{id}.json"))
    }
}

#[async_trait::async_trait]
impl Documents for FileDocuments {
    async fn put(&self, kind: &str, id: &str, body: &[u8]) -> Result<(), DocumentError> {
        use std::io::Write;
        use std::os::unix::fs::OpenOptionsExt;
        let dir = self.dir.join(kind);
        let failed = |what, source| DocumentError::Io {
            what,
            path: dir.clone(),
            source,
        };
        let mut builder = std::fs::DirBuilder::new();
        builder.recursive(true);
        std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
        builder.create(&dir).map_err(|e| failed("create", e))?;
        let temporary = dir.join(format!(".{id}.json.{}", uuid::Uuid::new_v4().simple()));
        let written = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&temporary)
            .and_then(|mut file| {
                file.write_all(body)?;
                file.sync_all()
            })
            .and_then(|()| std::fs::rename(&temporary, self.path(kind, id)));
        if let Err(err) = written {
            let _ = std::fs::remove_file(&temporary);
            return Err(failed("write in", err));
        }
        Ok(())
    }

    async fn get(&self, kind: &str, id: &str) -> Result<Option<Vec<u8>>, DocumentError> {
        let path = self.path(kind, id);
        match std::fs::read(&path) {
            Ok(bytes) => Ok(Some(bytes)),
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(source) => Err(DocumentError::Io {
                what: "read",
                path,
                source,
            }),
        }
    }

    async fn all(&self, kind: &str) -> Result<Vec<Vec<u8>>, DocumentError> {
        let dir = self.dir.join(kind);
        let entries = match std::fs::read_dir(&dir) {
            Ok(entries) => entries,
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(source) => {
                return Err(DocumentError::Io {
                    what: "read",
                    path: dir,
                    source,
                })
            }
        };
        let mut all = Vec::new();
        for entry in entries.flatten() {
            let name = entry.file_name();
            // Temporary files start with a dot.
            let Some(id) = name
                .to_str()
                .filter(|n| !n.starts_with('.'))
                .and_then(|n| n.strip_suffix(".json"))
            else {
                continue;
            };
            if let Some(body) = self.get(kind, id).await? {
                all.push(body);
            }
        }
        Ok(all)
    }

    async fn remove(&self, kind: &str, id: &str) -> Result<(), DocumentError> {
        let path = self.path(kind, id);
        match std::fs::remove_file(&path) {
            Ok(()) => Ok(()),
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(source) => Err(DocumentError::Io {
                what: "remove",
                path,
                source,
            }),
        }
    }
}
