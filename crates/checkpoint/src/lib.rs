//! Checkpoints of a workspace: its files as a git tree in a shadow object
//! store that lives in pod's home, never in the workspace (whose own
//! `.git`, if any, is neither read nor written).
//!
//! The `git` binary does the work: `git add -A` with the shadow store as
//! `GIT_DIR`, the workspace as the work tree and an index file of the
//! session's own, then `git write-tree`. The index keeps each file's stat
//! data, so a snapshot rehashes only what changed since the last one; the
//! object store is content-addressed and shared by every session, so
//! unchanged files cost nothing and a fork sees its source's objects.
//! `.gitignore` files in the workspace are honoured; `.git` directories
//! are never captured.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use tokio::process::Command;

pub mod worktree;

/// The store's attributes file, written last when a store is made: its
/// presence says the store is complete.
const ATTRIBUTES: &str = "info/attributes";

/// Files larger than this are left out of snapshots (and said so): a
/// model's data set or a build artefact would fill the store for nothing
/// an undo needs.
pub const SIZE_LIMIT: u64 = 50 * 1024 * 1024;

/// Where the seed indexes live in the store (see [`Shadow::warm`]).
const SEEDS: &str = "pod-seeds";

/// How [`Shadow::warm`] made a session's index ready.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Warmed {
    /// The session had one already (a resume): nothing to do.
    Already,
    /// The workspace has a seed: the first snapshot starts from a copy of
    /// it. Nothing hashed, no git run, no file made.
    Seeded,
    /// No seed yet: a snapshot hashed the workspace and left one.
    Snapshot,
}

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
}

/// One file a range of work changed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Change {
    /// `A`dded, `D`eleted, `M`odified, `T` (type or mode changed).
    pub status: char,
    /// Its path in the workspace.
    pub path: String,
}

/// A workspace and where its checkpoints go.
#[derive(Debug, Clone)]
pub struct Shadow {
    store: PathBuf,
    index: PathBuf,
    workspace: PathBuf,
}

impl Shadow {
    /// Checkpoints of `workspace` in the object store `store` (a bare
    /// repository, made on first use), with the index file `index` (one
    /// per session: only the session's process writes it).
    pub fn new(store: PathBuf, index: PathBuf, workspace: PathBuf) -> Self {
        Self {
            store,
            index,
            workspace,
        }
    }

    /// The workspace's files now, as a tree in the store.
    pub async fn snapshot(&self) -> Result<TreeId, CheckpointError> {
        self.ensure_store().await?;
        // The index's directory (a session's) is made by the first
        // snapshot, not by whoever made the shadow: a session that takes
        // none makes no directory.
        if let Some(dir) = self.index.parent() {
            create_dir(dir).await?;
        }
        // A process killed while git held the index leaves its lock; only
        // this session's process uses this index, so it is stale.
        let lock = lock_path(&self.index);
        if tokio::fs::try_exists(&lock).await.unwrap_or(false) {
            let _ = tokio::fs::remove_file(&lock).await;
        }
        // A session's first snapshot starts from the workspace's seed when
        // there is one (see `warm`). Copied aside, then renamed: a process
        // killed mid-copy leaves no half index to trip on. Without it, the
        // snapshot hashes every file.
        if !tokio::fs::try_exists(&self.index).await.unwrap_or(true) {
            let _ = copy_atomically(&self.seed(), &self.index).await;
        }
        let (excludes, paths) = self.changed_paths().await?;
        let excludes = format!("core.excludesFile={}", excludes.display());
        if !paths.is_empty() {
            // Only what changed: git does not walk the workspace again.
            let list = self.index.with_extension("paths");
            let mut text = paths.join("\0");
            text.push('\0');
            write_file(&list, text).await?;
            let from = format!("--pathspec-from-file={}", list.display());
            let named = [
                "-c",
                excludes.as_str(),
                "--literal-pathspecs",
                "add",
                "--all",
                "--ignore-errors",
                from.as_str(),
                "--pathspec-file-nul",
            ];
            if self.git(&named, &self.index).await.is_err() {
                // A file gone since it was listed: take the whole tree.
                self.git(
                    &[
                        "-c",
                        &excludes,
                        "add",
                        "--all",
                        "--ignore-errors",
                        "--",
                        ".",
                    ],
                    &self.index,
                )
                .await?;
            }
        }
        let tree = self.git(&["write-tree"], &self.index).await?;
        Ok(tree.trim().to_string())
    }

    /// Makes sure the session's first snapshot will be quick, the
    /// cheapest way there is: an index the session already has (a
    /// resume) is ready; a session without one starts its first snapshot
    /// from a copy of the workspace's seed, the index of the last session
    /// that warmed up on the same workspace, and rehashes only what
    /// changed since; without a seed, this takes a snapshot, which hashes
    /// every file, and leaves its index as the seed.
    ///
    /// A seed is only a cache of stat data: git checks each entry against
    /// the file (an entry written in the same second as its file is
    /// already marked for a rehash), so a seed taken before any change is
    /// slower, never wrong.
    pub async fn warm(&self) -> Result<Warmed, CheckpointError> {
        if tokio::fs::try_exists(&self.index).await.unwrap_or(false) {
            return Ok(Warmed::Already);
        }
        self.ensure_store().await?;
        let seed = self.seed();
        // One warm-up per workspace at a time in this process: a fleet's
        // sessions start together, and each would otherwise miss the seed
        // and hash every file; the others wait, then find it.
        let gate = seed_gate(&seed);
        let _turn = gate.lock().await;
        // Copied by the first snapshot, if one is ever taken: a session
        // that changes no file makes no file of its own.
        if tokio::fs::try_exists(&seed).await.unwrap_or(false) {
            return Ok(Warmed::Seeded);
        }
        self.snapshot().await?;
        if let Some(dir) = seed.parent() {
            create_dir(dir).await?;
        }
        copy_atomically(&self.index, &seed)
            .await
            .map_err(|source| CheckpointError::Io {
                what: format!("cannot write {}", seed.display()),
                source,
            })?;
        Ok(Warmed::Snapshot)
    }

    /// The workspace's seed index in the store: one per workspace path,
    /// replaced by each session that warms up without one.
    fn seed(&self) -> PathBuf {
        use sha2::Digest;
        let digest = sha2::Sha256::digest(self.workspace.as_os_str().as_encoded_bytes());
        let name: String = digest.iter().map(|b| format!("{b:02x}")).collect();
        self.store.join(SEEDS).join(format!("{name}.index"))
    }

    /// The files left out of the snapshots for their size (over
    /// [`SIZE_LIMIT`]), as of the last snapshot.
    pub async fn skipped(&self) -> Vec<String> {
        read_skipped(&self.skip_list()).await
    }

    fn skip_list(&self) -> PathBuf {
        self.index.with_extension("skipped")
    }

    /// The files to stage: new, changed or deleted since the index, and
    /// those that shrank back under [`SIZE_LIMIT`]; the ones over it are
    /// listed in the session's excludes file (returned), and leave the
    /// index if they were in it.
    async fn changed_paths(&self) -> Result<(PathBuf, Vec<String>), CheckpointError> {
        let list = self.skip_list();
        let excludes = format!("core.excludesFile={}", list.display());
        let listed = self
            .git(
                &[
                    "-c",
                    &excludes,
                    "ls-files",
                    "-z",
                    "--others",
                    "--modified",
                    "--deleted",
                    "--exclude-standard",
                ],
                &self.index,
            )
            .await?;
        let before = read_skipped(&list).await;
        let too_large = |path: &str| {
            std::fs::symlink_metadata(self.workspace.join(path))
                .is_ok_and(|meta| meta.is_file() && meta.len() > SIZE_LIMIT)
        };
        let mut skipped: std::collections::BTreeSet<String> =
            before.iter().filter(|p| too_large(p)).cloned().collect();
        let mut paths: std::collections::BTreeSet<String> = before
            .iter()
            .filter(|p| !skipped.contains(*p) && self.workspace.join(p).exists())
            .cloned()
            .collect();
        let mut grew = Vec::new();
        for path in listed.split('\0').filter(|p| !p.is_empty()) {
            if too_large(path) {
                if skipped.insert(path.to_string()) {
                    grew.push(path.to_string());
                }
            } else {
                paths.insert(path.to_string());
            }
        }
        let text: String = skipped
            .iter()
            .map(|path| format!("/{}\n", escape(path)))
            .collect();
        write_file(&list, text).await?;
        if !grew.is_empty() {
            let mut args = vec![
                "--literal-pathspecs",
                "rm",
                "--cached",
                "-f",
                "-q",
                "--ignore-unmatch",
                "--",
            ];
            args.extend(grew.iter().map(String::as_str));
            self.git(&args, &self.index).await?;
        }
        Ok((list, paths.into_iter().collect()))
    }

    /// The files that differ between two trees.
    pub async fn changes(&self, from: &str, to: &str) -> Result<Vec<Change>, CheckpointError> {
        let out = self
            .git(
                &[
                    "diff-tree",
                    "-r",
                    "--no-renames",
                    "--name-status",
                    "-z",
                    from,
                    to,
                ],
                &self.index,
            )
            .await?;
        let mut fields = out.split('\0').filter(|f| !f.is_empty());
        let mut changes = Vec::new();
        while let (Some(status), Some(path)) = (fields.next(), fields.next()) {
            changes.push(Change {
                status: status.chars().next().unwrap_or('M'),
                path: path.to_string(),
            });
        }
        Ok(changes)
    }

    /// A unified diff from one tree to another (binary files named, not
    /// shown).
    pub async fn diff(&self, from: &str, to: &str) -> Result<String, CheckpointError> {
        self.git(
            &[
                "diff-tree",
                "-p",
                "--no-renames",
                "--no-color",
                "--full-index",
                from,
                to,
            ],
            &self.index,
        )
        .await
    }

    /// Makes the workspace hold tree `to` again, from `from`, the tree it
    /// holds now: files `to` lacks are deleted, the others written with
    /// their content and executable bit. Files neither tree has (ignored,
    /// or never captured) are left alone.
    pub async fn restore(&self, from: &str, to: &str) -> Result<(), CheckpointError> {
        self.ensure_store().await?;
        let scratch = self.index.with_extension("restore");
        let _ = tokio::fs::remove_file(&scratch).await;
        // Left by a restore that was killed: nothing else uses it.
        let _ = tokio::fs::remove_file(lock_path(&scratch)).await;
        self.git(&["read-tree", from], &scratch).await?;
        // The index learns the files' stat data (they hold `from`).
        let _ = self
            .git(&["update-index", "-q", "--refresh"], &scratch)
            .await;
        let done = self
            .git(&["read-tree", "-m", "-u", from, to], &scratch)
            .await;
        let _ = tokio::fs::remove_file(&scratch).await;
        done.map(|_| ())
    }

    /// Writes the files of tree `tree` into `dir` (an empty or new
    /// directory), as a checkout would: a copy of the workspace as it was.
    pub async fn export(&self, tree: &str, dir: &Path) -> Result<(), CheckpointError> {
        self.ensure_store().await?;
        create_dir(dir).await?;
        let copy = Shadow {
            store: self.store.clone(),
            index: self.index.with_extension("export"),
            workspace: dir.to_path_buf(),
        };
        let _ = tokio::fs::remove_file(&copy.index).await;
        copy.git(&["read-tree", tree], &copy.index).await?;
        let done = copy
            .git(&["checkout-index", "--all", "--force"], &copy.index)
            .await;
        let _ = tokio::fs::remove_file(&copy.index).await;
        done.map(|_| ())
    }

    async fn ensure_store(&self) -> Result<(), CheckpointError> {
        if tokio::fs::try_exists(self.store.join(ATTRIBUTES))
            .await
            .unwrap_or(false)
        {
            return Ok(());
        }
        // A new store knows none of the objects an old index names.
        let _ = tokio::fs::remove_file(&self.index).await;
        if let Some(parent) = self.store.parent() {
            create_dir(parent).await?;
        }
        let mut init: Vec<OsString> = vec!["init".into(), "--bare".into(), "-q".into()];
        init.push(self.store.clone().into_os_string());
        run(&init, None, &self.workspace, "init").await?;
        // Files are stored byte for byte: the workspace's .gitattributes
        // (line endings, filters) must not apply to snapshots.
        let attributes = self.store.join(ATTRIBUTES);
        if let Some(dir) = attributes.parent() {
            let _ = tokio::fs::create_dir_all(dir).await;
        }
        write_file(
            &attributes,
            "* -text -eol -ident -filter -working-tree-encoding\n",
        )
        .await
    }

    async fn git(&self, args: &[&str], index: &Path) -> Result<String, CheckpointError> {
        let mut all: Vec<OsString> = [
            "-c",
            "core.autocrlf=false",
            "-c",
            "core.fileMode=true",
            "-c",
            "core.symlinks=true",
            "-c",
            "core.quotePath=false",
            "-c",
            "advice.addEmbeddedRepo=false",
            "-c",
            "core.untrackedCache=true",
        ]
        .iter()
        .map(OsString::from)
        .collect();
        all.extend(args.iter().map(OsString::from));
        let what = args.first().copied().unwrap_or("git");
        run(&all, Some((&self.store, index)), &self.workspace, what).await
    }
}

/// Runs `git ARGS` in `dir` on the repository there (the user's: their
/// config applies), for what concerns that repository itself (worktrees).
pub(crate) async fn run_plain(
    dir: &Path,
    args: &[&str],
    what: &str,
) -> Result<String, CheckpointError> {
    let mut command = git_in(dir);
    command.args(args);
    output(command, what).await
}

/// `git` in `dir`, with no repository of the environment's, no input, and
/// killed if the caller gives up on it.
fn git_in(dir: &Path) -> Command {
    let mut command = Command::new("git");
    command
        .current_dir(dir)
        .env_remove("GIT_DIR")
        .env_remove("GIT_WORK_TREE")
        .env_remove("GIT_INDEX_FILE")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    command
}

/// Runs `command`; its stdout, or what it said on stderr.
async fn output(mut command: Command, what: &str) -> Result<String, CheckpointError> {
    let out = command
        .output()
        .await
        .map_err(|source| CheckpointError::Spawn { source })?;
    if !out.status.success() {
        return Err(CheckpointError::Git {
            what: what.to_string(),
            stderr: String::from_utf8_lossy(&out.stderr).trim().to_string(),
        });
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

async fn read_skipped(list: &Path) -> Vec<String> {
    tokio::fs::read_to_string(list)
        .await
        .unwrap_or_default()
        .lines()
        .filter_map(|line| line.strip_prefix('/'))
        .map(unescape)
        .collect()
}

/// `path` as a gitignore pattern that matches only itself.
fn escape(path: &str) -> String {
    let mut out = String::with_capacity(path.len());
    for c in path.chars() {
        if matches!(c, '\\' | '*' | '?' | '[' | '!' | '#' | ' ') {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

fn unescape(pattern: &str) -> String {
    let mut out = String::with_capacity(pattern.len());
    let mut chars = pattern.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => out.extend(chars.next()),
            c => out.push(c),
        }
    }
    out
}

/// Creates `dir` and the directories above it.
pub(crate) async fn create_dir(dir: &Path) -> Result<(), CheckpointError> {
    tokio::fs::create_dir_all(dir)
        .await
        .map_err(|source| CheckpointError::Io {
            what: format!("cannot create {}", dir.display()),
            source,
        })
}

/// Writes `contents` to the file at `path`.
async fn write_file(path: &Path, contents: impl AsRef<[u8]>) -> Result<(), CheckpointError> {
    tokio::fs::write(path, contents)
        .await
        .map_err(|source| CheckpointError::Io {
            what: format!("cannot write {}", path.display()),
            source,
        })
}

/// The lock of the warm-ups that would leave the seed `seed`, shared by
/// this process's sessions while any holds it.
fn seed_gate(seed: &Path) -> std::sync::Arc<tokio::sync::Mutex<()>> {
    use std::collections::HashMap;
    use std::sync::{Arc, LazyLock, Mutex, Weak};
    type Gates = Mutex<HashMap<PathBuf, Weak<tokio::sync::Mutex<()>>>>;
    // Held for a lookup and an insert (a sweep of unused gates now and then).
    static GATES: LazyLock<Gates> = LazyLock::new(Default::default);
    let mut gates = GATES
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    if let Some(gate) = gates.get(seed).and_then(Weak::upgrade) {
        return gate;
    }
    if gates.len() >= 64 {
        gates.retain(|_, gate| gate.strong_count() > 0);
    }
    let gate = Arc::new(tokio::sync::Mutex::new(()));
    gates.insert(seed.to_path_buf(), Arc::downgrade(&gate));
    gate
}

/// Copies `from` to a file beside `to`, then renames it to `to`: `to`
/// is the old file or the whole new one, whoever reads it or dies.
async fn copy_atomically(from: &Path, to: &Path) -> std::io::Result<()> {
    use std::sync::atomic::{AtomicU64, Ordering};
    static COPIES: AtomicU64 = AtomicU64::new(0);
    let mut aside = to.as_os_str().to_owned();
    aside.push(format!(
        ".{}.{}.tmp",
        std::process::id(),
        COPIES.fetch_add(1, Ordering::Relaxed)
    ));
    let aside = PathBuf::from(aside);
    let copied = match tokio::fs::copy(from, &aside).await {
        Ok(_) => tokio::fs::rename(&aside, to).await,
        Err(err) => Err(err),
    };
    if copied.is_err() {
        let _ = tokio::fs::remove_file(&aside).await;
    }
    copied
}

fn lock_path(index: &Path) -> PathBuf {
    let mut name = index.as_os_str().to_owned();
    name.push(".lock");
    PathBuf::from(name)
}

async fn run(
    args: &[OsString],
    repo: Option<(&Path, &Path)>,
    workspace: &Path,
    what: &str,
) -> Result<String, CheckpointError> {
    let mut command = git_in(workspace);
    command
        .args(args)
        // Neither the user's nor the system's git config applies.
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null");
    if let Some((store, index)) = repo {
        command
            .env("GIT_DIR", store)
            .env("GIT_WORK_TREE", workspace)
            .env("GIT_INDEX_FILE", index);
    }
    output(command, what).await
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    /// Checkpoints of `workspace` in a store and index under `home`.
    fn shadow(home: &Path, workspace: &Path) -> Shadow {
        Shadow::new(
            home.join("checkpoints.git"),
            home.join("s.index"),
            workspace.to_path_buf(),
        )
    }

    #[tokio::test]
    async fn snapshots_compare_and_restore_byte_for_byte() {
        let home = tempfile::tempdir().unwrap();
        let ws = tempfile::tempdir().unwrap();
        let w = ws.path();
        std::fs::write(w.join("keep.txt"), "one\n").unwrap();
        std::fs::write(w.join(".gitignore"), "ignored/\n").unwrap();
        std::fs::create_dir(w.join("ignored")).unwrap();
        std::fs::write(w.join("ignored/big.bin"), "x").unwrap();
        let shadow = shadow(home.path(), w);
        let before = shadow.snapshot().await.unwrap();
        std::fs::write(w.join("keep.txt"), "two\n").unwrap();
        std::fs::write(w.join("new.sh"), "echo hi\n").unwrap();
        std::fs::set_permissions(w.join("new.sh"), std::fs::Permissions::from_mode(0o755)).unwrap();
        let after = shadow.snapshot().await.unwrap();
        assert_ne!(before, after);
        let changes = shadow.changes(&before, &after).await.unwrap();
        assert_eq!(
            changes,
            [
                Change {
                    status: 'M',
                    path: "keep.txt".into()
                },
                Change {
                    status: 'A',
                    path: "new.sh".into()
                },
            ]
        );
        assert!(shadow
            .diff(&before, &after)
            .await
            .unwrap()
            .contains("-one\n+two\n"));
        shadow.restore(&after, &before).await.unwrap();
        assert_eq!(
            std::fs::read_to_string(w.join("keep.txt")).unwrap(),
            "one\n"
        );
        assert!(!w.join("new.sh").exists());
        // Ignored files are neither captured nor touched.
        assert!(w.join("ignored/big.bin").exists());
        assert_eq!(shadow.snapshot().await.unwrap(), before);
        shadow.restore(&before, &after).await.unwrap();
        let mode = std::fs::metadata(w.join("new.sh"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o111, 0o111);
    }

    #[tokio::test]
    async fn a_new_session_starts_from_the_workspaces_seed_and_sees_every_change() {
        let home = tempfile::tempdir().unwrap();
        let ws = tempfile::tempdir().unwrap();
        let w = ws.path();
        std::fs::write(w.join("a.txt"), "aaaa\n").unwrap();
        std::fs::write(w.join("b.txt"), "kept\n").unwrap();
        let big = std::fs::File::create(w.join("big.bin")).unwrap();
        big.set_len(SIZE_LIMIT + 1).unwrap();
        let session = |name: &str| {
            Shadow::new(
                home.path().join("checkpoints.git"),
                home.path().join(name),
                w.to_path_buf(),
            )
        };
        let first = session("one.index");
        assert_eq!(first.warm().await.unwrap(), Warmed::Snapshot);
        let seeded_state = first.snapshot().await.unwrap();
        // A session that has its index (a resume) is ready as it is.
        assert_eq!(first.warm().await.unwrap(), Warmed::Already);
        // Changed after the seed was written (same size, likely the same
        // second): the seeded session's snapshot must still see it.
        std::fs::write(w.join("a.txt"), "bbbb\n").unwrap();
        let second = session("two.index");
        assert_eq!(second.warm().await.unwrap(), Warmed::Seeded);
        // Nothing of its own until it takes a snapshot.
        assert!(!home.path().join("two.index").exists());
        let state = second.snapshot().await.unwrap();
        assert_ne!(state, seeded_state);
        // The same tree as a store that never saw the workspace makes.
        let elsewhere = tempfile::tempdir().unwrap();
        assert_eq!(shadow(elsewhere.path(), w).snapshot().await.unwrap(), state);
        assert_eq!(second.skipped().await, ["big.bin"]);
        assert_eq!(
            second.changes(&seeded_state, &state).await.unwrap(),
            [Change {
                status: 'M',
                path: "a.txt".into()
            }]
        );
        // Sessions of a new workspace warming up together: one hashes it,
        // the others wait for its seed.
        let fresh = tempfile::tempdir().unwrap();
        std::fs::write(fresh.path().join("d.txt"), "d\n").unwrap();
        let together: Vec<Shadow> = (0..4)
            .map(|n| {
                Shadow::new(
                    home.path().join("checkpoints.git"),
                    home.path().join(format!("together-{n}.index")),
                    fresh.path().to_path_buf(),
                )
            })
            .collect();
        let mut how = Vec::new();
        for warmed in futures_util::future::join_all(together.iter().map(Shadow::warm)).await {
            how.push(warmed.unwrap());
        }
        how.sort_by_key(|w| *w == Warmed::Seeded);
        assert_eq!(
            how,
            [
                Warmed::Snapshot,
                Warmed::Seeded,
                Warmed::Seeded,
                Warmed::Seeded
            ]
        );
        // Another workspace has its own seed.
        let other = tempfile::tempdir().unwrap();
        std::fs::write(other.path().join("c.txt"), "c\n").unwrap();
        let third = Shadow::new(
            home.path().join("checkpoints.git"),
            home.path().join("three.index"),
            other.path().to_path_buf(),
        );
        assert_eq!(third.warm().await.unwrap(), Warmed::Snapshot);
    }

    #[tokio::test]
    async fn the_workspaces_gitattributes_do_not_change_the_bytes() {
        let home = tempfile::tempdir().unwrap();
        let ws = tempfile::tempdir().unwrap();
        let w = ws.path();
        std::fs::write(w.join(".gitattributes"), "* text=auto eol=lf\n").unwrap();
        std::fs::write(w.join("dos.txt"), "one\r\ntwo\r\n").unwrap();
        let shadow = shadow(home.path(), w);
        let before = shadow.snapshot().await.unwrap();
        std::fs::write(w.join("dos.txt"), "changed\n").unwrap();
        let after = shadow.snapshot().await.unwrap();
        shadow.restore(&after, &before).await.unwrap();
        assert_eq!(std::fs::read(w.join("dos.txt")).unwrap(), b"one\r\ntwo\r\n");
        // A store deleted under an old index is made again and works.
        std::fs::remove_dir_all(home.path().join("checkpoints.git")).unwrap();
        assert_eq!(shadow.snapshot().await.unwrap(), before);
    }

    #[tokio::test]
    async fn files_over_the_size_limit_are_left_out_and_listed() {
        let home = tempfile::tempdir().unwrap();
        let ws = tempfile::tempdir().unwrap();
        let w = ws.path();
        std::fs::write(w.join("a.txt"), "small\n").unwrap();
        // Sparse: large without costing the disk.
        let big = std::fs::File::create(w.join("big *.bin")).unwrap();
        big.set_len(SIZE_LIMIT + 1).unwrap();
        let shadow = shadow(home.path(), w);
        let first = shadow.snapshot().await.unwrap();
        assert_eq!(shadow.skipped().await, ["big *.bin"]);
        // Shrunk below the limit, it is captured again.
        std::fs::write(w.join("big *.bin"), "now small\n").unwrap();
        let second = shadow.snapshot().await.unwrap();
        assert!(shadow.skipped().await.is_empty());
        assert_eq!(
            shadow.changes(&first, &second).await.unwrap(),
            [Change {
                status: 'A',
                path: "big *.bin".into()
            }]
        );
        // Grown past it, a captured file leaves the snapshots.
        let again = std::fs::OpenOptions::new()
            .write(true)
            .open(w.join("big *.bin"))
            .unwrap();
        again.set_len(SIZE_LIMIT + 1).unwrap();
        let third = shadow.snapshot().await.unwrap();
        assert_eq!(third, first);
        assert_eq!(shadow.skipped().await, ["big *.bin"]);
    }
}
