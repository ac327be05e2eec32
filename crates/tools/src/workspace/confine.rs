//! Confinement: every path a workspace tool touches resolves inside the
//! workspace root.
//!
//! The check runs on the resolved path (symlinks followed, `..` applied) at
//! the moment of use, so a symlink created since the last call cannot lead
//! outside. A path that does not exist yet (a file about to be written) is
//! checked through its nearest existing ancestor; the missing rest may only
//! name plain components.

use std::io;
use std::path::{Component, Path, PathBuf};

/// Why a path was refused or could not be resolved. Each message says what
/// to do instead, since it goes back to the model.
#[derive(Debug, thiserror::Error)]
pub enum ConfineError {
    /// The path resolves outside the workspace.
    #[error(
        "`{path}` is outside the workspace ({root}); only paths inside the workspace can be used. \
         Use a path relative to the workspace root"
    )]
    Outside {
        /// The path as given.
        path: String,
        /// The workspace root.
        root: String,
    },
    /// A symlink on the way points outside the workspace.
    #[error(
        "`{path}` goes through a symlink that leads outside the workspace ({root}); \
         it cannot be used. Use the file's real path inside the workspace"
    )]
    SymlinkEscape {
        /// The path as given.
        path: String,
        /// The workspace root.
        root: String,
    },
    /// The path is a symlink whose target does not exist.
    #[error("`{path}` is a symlink to a missing target; write to a real path inside the workspace instead")]
    DanglingSymlink {
        /// The path as given.
        path: String,
    },
    /// The path does not exist.
    #[error("`{path}` does not exist. Check the name with list_dir or glob")]
    NotFound {
        /// The path as given.
        path: String,
    },
    /// The missing part of a path to create contains `..`.
    #[error("`{path}` climbs (`..`) out of a directory that does not exist; give a plain path inside the workspace")]
    ClimbsMissing {
        /// The path as given.
        path: String,
    },
    /// The path is inside pod's own data (its sessions' logs, its token,
    /// its config), which no tool may touch.
    #[error(
        "`{path}` is inside pod's own data ({private}), which tools may not read or change; \
         work with the other files of the workspace"
    )]
    Private {
        /// The path as given.
        path: String,
        /// The private directory it is in.
        private: String,
    },
    /// The path is empty.
    #[error("the path is empty; give a path relative to the workspace root")]
    Empty,
    /// The file system refused.
    #[error("cannot resolve `{path}`: {source}")]
    Io {
        /// The path as given.
        path: String,
        /// The cause.
        source: io::Error,
    },
}

/// The canonical workspace root that every tool path is confined to, and
/// the private directories inside it that no tool path may reach.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Root {
    canonical: PathBuf,
    private: Vec<PathBuf>,
}

impl Root {
    /// The root at `path`, which must exist; it is canonicalized once here.
    pub fn new(path: impl AsRef<Path>) -> io::Result<Self> {
        Ok(Self {
            canonical: path.as_ref().canonicalize()?,
            private: Vec::new(),
        })
    }

    /// The same root with `paths` off limits where they lie inside it (a
    /// workspace at `~` holds pod's home). A private path that holds the
    /// root itself changes nothing: the operator put the workspace there.
    /// Paths that do not exist yet are kept as given.
    pub fn with_private(mut self, paths: &[PathBuf]) -> Self {
        for path in paths {
            let path = path.canonicalize().unwrap_or_else(|_| path.clone());
            if path.starts_with(&self.canonical) && path != self.canonical {
                self.private.push(path);
            }
        }
        self
    }

    /// The private directory `path` (resolved) is in, if any.
    pub fn private_holding(&self, path: &Path) -> Option<&Path> {
        self.private
            .iter()
            .find(|p| path.starts_with(p))
            .map(PathBuf::as_path)
    }

    /// The canonical root directory.
    pub fn path(&self) -> &Path {
        &self.canonical
    }

    /// Resolves a path that must exist, following symlinks.
    pub fn resolve_existing(&self, given: &str) -> Result<PathBuf, ConfineError> {
        let joined = self.join(given)?;
        match joined.canonicalize() {
            Ok(real) => self.check(given, &joined, real),
            Err(err) if err.kind() == io::ErrorKind::NotFound => {
                // Report an escape before "missing": the model should learn
                // the path is off limits, not that it is absent.
                self.resolve_for_write(given)?;
                if joined.symlink_metadata().is_ok() {
                    return Err(ConfineError::DanglingSymlink { path: given.into() });
                }
                Err(ConfineError::NotFound { path: given.into() })
            }
            Err(source) => Err(ConfineError::Io {
                path: given.into(),
                source,
            }),
        }
    }

    /// Resolves a path that may not exist yet: its nearest existing ancestor
    /// is canonicalized and checked, and the missing rest appended.
    pub fn resolve_for_write(&self, given: &str) -> Result<PathBuf, ConfineError> {
        let joined = self.join(given)?;
        let mut existing = joined.as_path();
        let mut missing: Vec<Component<'_>> = Vec::new();
        loop {
            match existing.symlink_metadata() {
                Ok(_) => break,
                Err(err) if err.kind() == io::ErrorKind::NotFound => {}
                Err(source) => {
                    return Err(ConfineError::Io {
                        path: given.into(),
                        source,
                    })
                }
            }
            let (Some(parent), Some(last)) = (existing.parent(), existing.components().next_back())
            else {
                return Err(ConfineError::NotFound { path: given.into() });
            };
            missing.push(last);
            existing = parent;
        }
        let real = match existing.canonicalize() {
            Ok(real) => real,
            Err(err) if err.kind() == io::ErrorKind::NotFound => {
                // It exists as a link but its target does not.
                return Err(ConfineError::DanglingSymlink { path: given.into() });
            }
            Err(source) => {
                return Err(ConfineError::Io {
                    path: given.into(),
                    source,
                })
            }
        };
        let mut resolved = self.check(given, existing, real)?;
        for component in missing.into_iter().rev() {
            match component {
                Component::Normal(name) => resolved.push(name),
                Component::CurDir => {}
                _ => return Err(ConfineError::ClimbsMissing { path: given.into() }),
            }
        }
        Ok(resolved)
    }

    /// `path` (absolute, inside the root) relative to the root, with `/`
    /// separators; `.` for the root itself. Used in messages and replay data.
    pub fn relative(&self, path: &Path) -> String {
        match path.strip_prefix(&self.canonical) {
            Ok(rel) if rel.as_os_str().is_empty() => ".".to_string(),
            Ok(rel) => rel
                .components()
                .map(|c| c.as_os_str().to_string_lossy())
                .collect::<Vec<_>>()
                .join("/"),
            Err(_) => path.display().to_string(),
        }
    }

    fn join(&self, given: &str) -> Result<PathBuf, ConfineError> {
        if given.trim().is_empty() {
            return Err(ConfineError::Empty);
        }
        // An absolute path replaces the root in `join`; it is then checked
        // like any other.
        Ok(self.canonical.join(given))
    }

    /// Checks a resolved path; `lexical` tells a symlink escape from a plain
    /// one for the message.
    fn check(&self, given: &str, lexical: &Path, real: PathBuf) -> Result<PathBuf, ConfineError> {
        if let Some(private) = self.private_holding(&real) {
            return Err(ConfineError::Private {
                path: given.into(),
                private: private.display().to_string(),
            });
        }
        if real.starts_with(&self.canonical) {
            return Ok(real);
        }
        let root = self.canonical.display().to_string();
        if lexically_inside(&self.canonical, lexical) {
            Err(ConfineError::SymlinkEscape {
                path: given.into(),
                root,
            })
        } else {
            Err(ConfineError::Outside {
                path: given.into(),
                root,
            })
        }
    }
}

/// Whether `path` stays inside `root` with `..` applied but no symlinks
/// followed.
fn lexically_inside(root: &Path, path: &Path) -> bool {
    let mut normal = PathBuf::new();
    for component in path.components() {
        match component {
            Component::ParentDir => {
                normal.pop();
            }
            Component::CurDir => {}
            other => normal.push(other),
        }
    }
    normal.starts_with(root)
}
