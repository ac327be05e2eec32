//! A session in its own git worktree of the workspace's repository: its
//! own directory and branch, so agents working in parallel on one
//! repository never write into each other's files.

use crate::{run_plain, CheckpointError};
use std::path::{Path, PathBuf};

/// A worktree made for a session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Worktree {
    /// The repository's top directory.
    pub repo: PathBuf,
    /// The worktree's directory.
    pub path: PathBuf,
    /// Its branch.
    pub branch: String,
    /// Where the session works in it: the worktree's directory, or the
    /// same subdirectory the workspace was of the repository.
    pub workspace: PathBuf,
}

/// Makes a worktree of the repository `workspace` is in, at `path`, on a
/// new branch `branch` from the repository's `HEAD` (changes not committed
/// in `workspace` are not in it).
pub async fn add(workspace: &Path, path: &Path, branch: &str) -> Result<Worktree, CheckpointError> {
    let top = run_plain(workspace, &["rev-parse", "--show-toplevel"], "rev-parse")
        .await
        .map_err(|err| match err {
            CheckpointError::Git { .. } => CheckpointError::Git {
                what: "worktree".into(),
                stderr: format!("{} is not in a git repository", workspace.display()),
            },
            other => other,
        })?;
    let repo = PathBuf::from(top.trim());
    let prefix = run_plain(workspace, &["rev-parse", "--show-prefix"], "rev-parse").await?;
    if let Some(parent) = path.parent() {
        crate::create_dir(parent).await?;
    }
    let target = path.to_string_lossy().into_owned();
    run_plain(
        &repo,
        &["worktree", "add", "--quiet", "-b", branch, &target, "HEAD"],
        "worktree add",
    )
    .await?;
    Ok(Worktree {
        workspace: path.join(prefix.trim()),
        repo,
        path: path.to_path_buf(),
        branch: branch.to_string(),
    })
}
