//! Checkpoints of a workspace: its files as a git tree in a shadow object
//! store that lives in pod's home, never in the workspace (whose own
//! `.git`, if any, is neither read nor written).
//!
//! The `git` binary does the work ([`Shadow`]): `git add` with the shadow
//! store as `GIT_DIR`, the workspace as the work tree and an index file of
//! the session's own, then `git write-tree`. The index keeps each file's
//! stat data, so a snapshot rehashes only what changed since the last one;
//! the object store is content-addressed and shared by every session, so
//! unchanged files cost nothing and a fork sees its source's objects.
//!
//! A workspace is the agent's, so nothing in it is trusted ([`git`] says
//! how git is run): its ignore rules are those it had when the session's
//! first snapshot was taken ([`ignore`]), a path git cannot store is left
//! out and named rather than failing the snapshot, restoring never
//! follows a symbolic link ([`restore`]), and a worktree is made without
//! running anything the repository configures ([`worktree`]). The store is
//! private to its user (0700, files 0600) whatever the umask.
//!
//! This crate knows nothing of sessions: where the store and a session's
//! index live is the caller's.

use std::path::{Path, PathBuf};

mod git;
mod ignore;
mod restore;
mod shadow;
pub mod worktree;

pub use shadow::{Shadow, Warmed};

/// Files larger than this are left out of snapshots (and said so): a
/// model's data set or a build artefact would fill the store for nothing
/// an undo needs.
pub const SIZE_LIMIT: u64 = 50 * 1024 * 1024;

/// A workspace state: a git tree id (40 hex digits).
pub type TreeId = String;

/// Why a checkpoint operation failed.
#[derive(Debug, thiserror::Error)]
pub enum CheckpointError {
    /// `git` could not be run.
    #[error("cannot run git ({source}); checkpoints need the git binary on PATH")]
    Spawn {
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// `git` ran and failed.
    #[error("git {what} failed: {stderr}")]
    Git {
        /// Which command.
        what: String,
        /// What it said.
        stderr: String,
    },
    /// A file operation of ours failed.
    #[error("{what}")]
    Io {
        /// What was being done.
        what: String,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// A restore would have to pass through a symbolic link or a file
    /// that the snapshot being left does not hold (the workspace changed
    /// since), or replace a directory: those paths were not written.
    #[error(
        "{} would pass through a symbolic link, a file or a directory the checkpoint does not \
         hold: {}{}{}",
        if paths.len() == 1 { "a path" } else { "paths" },
        paths.iter().take(10).cloned().collect::<Vec<_>>().join(", "),
        if paths.len() > 10 { format!(" and {} more", paths.len() - 10) } else { String::new() },
        if *done { " (everything else was restored)" } else { " (nothing was changed)" }
    )]
    Blocked {
        /// The paths, relative to the workspace.
        paths: Vec<String>,
        /// Whether the rest was restored (the workspace changed during the
        /// restore) or nothing was touched (found before starting).
        done: bool,
    },
    /// Pod refuses to make a worktree of this repository.
    #[error("{0}")]
    Refused(String),
}

/// One file a range of work changed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Change {
    /// `A`dded, `D`eleted, `M`odified, `T` (type or mode changed).
    pub status: char,
    /// Its path in the workspace.
    pub path: String,
}

/// Creates `dir` and the directories above it, each new one private to
/// its user (0700) whatever the umask.
pub(crate) async fn create_dir(dir: &Path) -> Result<(), CheckpointError> {
    let dir = dir.to_path_buf();
    let made = tokio::task::spawn_blocking(move || private_dir(&dir).map(|()| dir)).await;
    match made {
        Ok(Ok(_)) => Ok(()),
        Ok(Err((path, source))) => Err(CheckpointError::Io {
            what: format!("cannot create {}", path.display()),
            source,
        }),
        Err(join) => Err(CheckpointError::Io {
            what: "cannot create a directory".into(),
            source: std::io::Error::other(join),
        }),
    }
}

fn private_dir(dir: &Path) -> Result<(), (PathBuf, std::io::Error)> {
    let mut builder = std::fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
    builder.create(dir).map_err(|err| (dir.to_path_buf(), err))
}

/// Makes `dir`, which must be ours, private (0700) if others may enter it.
pub(crate) fn tighten(dir: &Path) -> std::io::Result<()> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let meta = std::fs::symlink_metadata(dir)?;
        if meta.is_dir() && meta.permissions().mode() & 0o077 != 0 {
            std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))?;
        }
    }
    Ok(())
}

/// Writes `contents` to the file at `path` (0600 when new).
pub(crate) async fn write_file(
    path: &Path,
    contents: impl AsRef<[u8]>,
) -> Result<(), CheckpointError> {
    let path_buf = path.to_path_buf();
    let contents = contents.as_ref().to_vec();
    let written = tokio::task::spawn_blocking(move || {
        use std::io::Write;
        let mut options = std::fs::OpenOptions::new();
        options.write(true).create(true).truncate(true);
        #[cfg(unix)]
        std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
        options.open(&path_buf)?.write_all(&contents)
    })
    .await
    .unwrap_or_else(|join| Err(std::io::Error::other(join)));
    written.map_err(|source| CheckpointError::Io {
        what: format!("cannot write {}", path.display()),
        source,
    })
}
