//! A session in its own git worktree of the workspace's repository: its
//! own directory and branch, so agents working in parallel on one
//! repository never write into each other's files.
//!
//! The repository may be the agent's own work (a `git init` in its
//! workspace, hooks and config planted beside it), so making the worktree
//! runs nothing the repository configures, and writes nowhere else:
//!
//! - The repository is found by reading `.git` entries, not by asking git:
//!   a `.git` that is a symbolic link is refused, and a `.git` file (the
//!   workspace is itself a linked worktree) must name a worktree of a
//!   repository that names it back, so a forged one cannot point pod at
//!   another repository.
//! - In that repository git only resolves `HEAD` and runs `worktree add
//!   --no-checkout` (which writes the branch and the worktree's admin
//!   files and runs no checkout, so no `post-checkout` hook, no filter, no
//!   fsmonitor); the settings of [`crate::git`] switch off every hook and
//!   monitor on top.
//! - The files are checked out by pod's own shadow store, reading the
//!   repository's objects as alternates: its config and attributes are
//!   pod's (no filters, byte for byte), not the repository's. Git LFS
//!   pointers therefore stay pointers.
//! - Every one of those git processes runs under the confinement the
//!   caller gives ([`Confine`], the kernel sandbox in pod): it may write
//!   only in the repository's git directory and the new worktree, so a
//!   link planted inside `.git` leads nowhere.

use crate::{create_dir, git, CheckpointError};
use std::ffi::OsString;
use std::path::{Path, PathBuf};

/// Confines a git process to writing beneath the given directories (and
/// nothing else), before it starts.
pub type Confine =
    dyn Fn(&mut tokio::process::Command, &[PathBuf]) -> std::io::Result<()> + Send + Sync;

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

/// Where a repository keeps its files.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Repository {
    /// The work tree's top directory.
    top: PathBuf,
    /// The git directory of that work tree.
    git_dir: PathBuf,
    /// The directory with the objects and refs (the git directory, or for
    /// a linked worktree its repository's).
    common: PathBuf,
}

/// Makes a worktree of the repository `workspace` is in, at `path`, on a
/// new branch `branch` from the repository's `HEAD` (changes not committed
/// in `workspace` are not in it), checked out through the shadow store at
/// `store` (made if missing), each git confined by `confine`.
pub async fn add(
    workspace: &Path,
    path: &Path,
    branch: &str,
    store: &Path,
    confine: &Confine,
) -> Result<Worktree, CheckpointError> {
    let repo = locate(workspace)?;
    crate::shadow::ensure_store(store, workspace).await?;
    let in_repo = |args: &[&str]| {
        let mut all = git::os_args(&["-c", "core.logAllRefUpdates=false"]);
        all.push(OsString::from(format!(
            "--git-dir={}",
            repo.git_dir.display()
        )));
        all.extend(git::os_args(args));
        git::command(&repo.top, &all)
    };
    let mut resolve = in_repo(&["rev-parse", "--verify", "--end-of-options", "HEAD^{commit}"]);
    confined(&mut resolve, confine, &[])?;
    let commit = git::output(resolve, "rev-parse")
        .await
        .map_err(|err| match err {
            CheckpointError::Git { .. } => CheckpointError::Refused(format!(
                "the repository at {} has no commit to start a worktree from",
                repo.top.display()
            )),
            other => other,
        })?;
    let commit = commit.trim().to_string();
    create_dir(path).await?;
    let target = path.to_string_lossy().into_owned();
    let mut add = in_repo(&[
        "worktree",
        "add",
        "--no-checkout",
        "--quiet",
        "-b",
        branch,
        &target,
        &commit,
    ]);
    confined(
        &mut add,
        confine,
        &[repo.common.clone(), path.to_path_buf()],
    )?;
    git::output(add, "worktree add").await?;
    let admin = admin_dir(path)?;
    check_out(store, &repo.common, &admin, path, &commit, confine).await?;
    let prefix = workspace_prefix(workspace, &repo.top);
    Ok(Worktree {
        workspace: path.join(prefix),
        repo: repo.top,
        path: path.to_path_buf(),
        branch: branch.to_string(),
    })
}

/// Writes `commit`'s files into `path` and its index into `admin`, with
/// the shadow store's settings and the repository's objects.
async fn check_out(
    store: &Path,
    common: &Path,
    admin: &Path,
    path: &Path,
    commit: &str,
    confine: &Confine,
) -> Result<(), CheckpointError> {
    let steps: [&[&str]; 3] = [
        &["read-tree", commit],
        &["checkout-index", "--all", "--force"],
        &["update-index", "-q", "--refresh"],
    ];
    for step in steps {
        let mut args = git::os_args(&[
            "-c",
            "core.autocrlf=false",
            "-c",
            "core.symlinks=true",
            "-c",
            "core.fileMode=true",
        ]);
        args.extend(git::os_args(step));
        let mut command = git::command(path, &args);
        command
            .env("GIT_DIR", store)
            .env("GIT_WORK_TREE", path)
            .env("GIT_INDEX_FILE", admin.join("index"))
            .env("GIT_ALTERNATE_OBJECT_DIRECTORIES", common.join("objects"));
        confined(
            &mut command,
            confine,
            &[admin.to_path_buf(), path.to_path_buf()],
        )?;
        let what = step.first().copied().unwrap_or("git");
        git::output(command, what).await?;
    }
    Ok(())
}

fn confined(
    command: &mut tokio::process::Command,
    confine: &Confine,
    writable: &[PathBuf],
) -> Result<(), CheckpointError> {
    confine(command, writable).map_err(|source| CheckpointError::Io {
        what: "cannot confine git to the repository".into(),
        source,
    })
}

/// The new worktree's admin directory, from the `.git` file git wrote.
fn admin_dir(path: &Path) -> Result<PathBuf, CheckpointError> {
    let file = path.join(".git");
    gitfile_target(&file)?.ok_or_else(|| {
        CheckpointError::Refused(format!("git made no worktree at {}", path.display()))
    })
}

/// The repository `workspace` is in, found from the `.git` entries above
/// it (see the module's docs for what is refused).
fn locate(workspace: &Path) -> Result<Repository, CheckpointError> {
    let start = workspace
        .canonicalize()
        .map_err(|source| CheckpointError::Io {
            what: format!("cannot read {}", workspace.display()),
            source,
        })?;
    for dir in start.ancestors() {
        let entry = dir.join(".git");
        let meta = match std::fs::symlink_metadata(&entry) {
            Ok(meta) => meta,
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => continue,
            Err(source) => {
                return Err(CheckpointError::Io {
                    what: format!("cannot read {}", entry.display()),
                    source,
                })
            }
        };
        let top = dir.to_path_buf();
        if meta.file_type().is_symlink() {
            return Err(CheckpointError::Refused(format!(
                "{} is a symbolic link; pod makes worktrees only of a repository whose .git is \
                 its own directory",
                entry.display()
            )));
        }
        if meta.is_dir() {
            return Ok(Repository {
                top,
                git_dir: entry.clone(),
                common: entry,
            });
        }
        return linked(top, &entry);
    }
    Err(CheckpointError::Refused(format!(
        "{} is not in a git repository",
        workspace.display()
    )))
}

/// The repository of a linked worktree whose `.git` file is `entry`:
/// accepted only when the repository lists that worktree at that place.
fn linked(top: PathBuf, entry: &Path) -> Result<Repository, CheckpointError> {
    let refuse = |why: &str| {
        CheckpointError::Refused(format!(
            "{} {why}; pod makes worktrees only of a repository or of a linked worktree git made",
            entry.display()
        ))
    };
    let git_dir = gitfile_target(entry)?.ok_or_else(|| refuse("is not a gitdir file"))?;
    let common = std::fs::read_to_string(git_dir.join("commondir"))
        .map_err(|_| refuse("names no linked worktree (no commondir)"))?;
    let common = git_dir
        .join(common.trim())
        .canonicalize()
        .map_err(|_| refuse("names a worktree whose repository is gone"))?;
    let back = std::fs::read_to_string(git_dir.join("gitdir"))
        .map_err(|_| refuse("names a worktree that does not name it back"))?;
    let back = PathBuf::from(back.trim()).canonicalize().ok();
    if back.as_deref() != entry.canonicalize().ok().as_deref() {
        return Err(refuse("names a worktree that does not name it back"));
    }
    Ok(Repository {
        top,
        git_dir,
        common,
    })
}

/// The directory a `gitdir: …` file names, made absolute and resolved;
/// `None` when the file says something else.
fn gitfile_target(file: &Path) -> Result<Option<PathBuf>, CheckpointError> {
    let text = std::fs::read_to_string(file).map_err(|source| CheckpointError::Io {
        what: format!("cannot read {}", file.display()),
        source,
    })?;
    let Some(named) = text.trim_end().strip_prefix("gitdir: ") else {
        return Ok(None);
    };
    let base = file.parent().unwrap_or(Path::new("/"));
    Ok(base.join(named).canonicalize().ok())
}

/// Where `workspace` lies in the repository whose top is `top`.
fn workspace_prefix(workspace: &Path, top: &Path) -> PathBuf {
    workspace
        .canonicalize()
        .ok()
        .and_then(|w| w.strip_prefix(top).ok().map(Path::to_path_buf))
        .unwrap_or_default()
}

#[cfg(test)]
#[path = "worktree_tests.rs"]
mod tests;
