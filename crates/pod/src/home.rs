//! Where sessions live: `$POD_HOME/sessions/<id>/log.jsonl`.

use crate::error::PodError;
use std::path::{Path, PathBuf};
use uuid::Uuid;

/// The root directory of pod's data.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodHome(PathBuf);

/// What [`PodHome::secure`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HomeAccess {
    /// Only its owner may enter it.
    Private,
    /// Others could enter it (`mode`); now only its owner can.
    Tightened {
        /// The mode it had.
        mode: u32,
    },
    /// Others may enter it (`mode`), and it is the user's to change.
    Open {
        /// Its mode.
        mode: u32,
    },
}

/// File name of a session's log inside its directory.
pub const LOG_FILE: &str = "log.jsonl";

impl PodHome {
    /// A home at `path`.
    pub fn new(path: impl Into<PathBuf>) -> Self {
        Self(path.into())
    }

    /// `$POD_HOME`, else `$XDG_DATA_HOME/pod`, else `$HOME/.local/share/pod`.
    pub fn from_env() -> Result<Self, PodError> {
        let var = |name| std::env::var_os(name).filter(|v| !v.is_empty());
        if let Some(home) = var("POD_HOME") {
            return Ok(Self::new(home));
        }
        if let Some(data) = var("XDG_DATA_HOME") {
            return Ok(Self::new(PathBuf::from(data).join("pod")));
        }
        var("HOME")
            .map(|home| Self::new(PathBuf::from(home).join(".local/share/pod")))
            .ok_or(PodError::NoHome)
    }

    /// Makes the home private: one that others may enter is tightened to 0700 when `ours` (pod's default location,
    /// made by pod), else left as it is and reported, for the front end to
    /// warn about. What pod makes inside it is private either way
    /// (sessions 0700, logs 0600, the checkpoint store 0700 with files
    /// 0600), so an open home exposes names of directories, not contents.
    pub fn secure(&self, ours: bool) -> Result<HomeAccess, PodError> {
        let io = |source| PodError::Io {
            path: self.0.clone(),
            source,
        };
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = match std::fs::metadata(&self.0) {
                Ok(meta) => meta.permissions().mode() & 0o777,
                // Made 0700 by whatever first writes in it.
                Err(err) if err.kind() == std::io::ErrorKind::NotFound => {
                    return Ok(HomeAccess::Private)
                }
                Err(err) => return Err(io(err)),
            };
            if mode & 0o077 != 0 {
                if !ours {
                    return Ok(HomeAccess::Open { mode });
                }
                std::fs::set_permissions(&self.0, std::fs::Permissions::from_mode(0o700))
                    .map_err(io)?;
                return Ok(HomeAccess::Tightened { mode });
            }
        }
        Ok(HomeAccess::Private)
    }

    /// The root path.
    pub fn path(&self) -> &Path {
        &self.0
    }

    /// Directory holding every session.
    pub fn sessions_dir(&self) -> PathBuf {
        self.0.join("sessions")
    }

    /// Directory of one session.
    pub fn session_dir(&self, id: Uuid) -> PathBuf {
        self.sessions_dir().join(id.to_string())
    }

    /// Log file of one session.
    pub fn log_path(&self, id: Uuid) -> PathBuf {
        self.session_dir(id).join(LOG_FILE)
    }

    /// Creates the directory of a new session (mode 0700).
    pub fn create_session_dir(&self, id: Uuid) -> Result<PathBuf, PodError> {
        let dir = self.session_dir(id);
        let mut builder = std::fs::DirBuilder::new();
        builder.recursive(true);
        #[cfg(unix)]
        std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
        builder.create(&dir).map_err(|source| PodError::Io {
            path: dir.clone(),
            source,
        })?;
        Ok(dir)
    }

    /// Deletes session `id` (its whole directory). Refused with
    /// [`PodError::SessionBusy`] while a Pod has it open: the session's
    /// lock is taken first and held until the files are gone.
    pub fn remove_session(&self, id: Uuid) -> Result<(), PodError> {
        let log = self.log_path(id);
        let file = std::fs::File::open(&log).map_err(|source| match source.kind() {
            std::io::ErrorKind::NotFound => PodError::NoSuchSession {
                id: id.to_string(),
                store: self.path().display().to_string(),
            },
            _ => PodError::Io {
                path: log.clone(),
                source,
            },
        })?;
        crate::log::lock_exclusive(&file, &log)?;
        let dir = self.session_dir(id);
        std::fs::remove_dir_all(&dir).map_err(|source| PodError::Io { path: dir, source })
    }

    /// Ids of every session that has a log, unordered.
    pub fn session_ids(&self) -> Result<Vec<Uuid>, PodError> {
        let dir = self.sessions_dir();
        let entries = match std::fs::read_dir(&dir) {
            Ok(entries) => entries,
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(source) => return Err(PodError::Io { path: dir, source }),
        };
        Ok(entries
            .filter_map(Result::ok)
            .filter_map(|e| e.file_name().to_str().and_then(|n| Uuid::parse_str(n).ok()))
            .filter(|id| self.log_path(*id).is_file())
            .collect())
    }
}
