//! A workspace's snapshots in the shadow store: taken, compared, restored.

use crate::{create_dir, git, ignore, restore, tighten, write_file, Change, CheckpointError};
use crate::{TreeId, SIZE_LIMIT};
use std::collections::BTreeSet;
use std::ffi::OsString;
use std::path::{Path, PathBuf};

/// The store's attributes file, written last when a store is made: its
/// presence says the store is complete.
const ATTRIBUTES: &str = "info/attributes";

/// Where the seed indexes live in the store (see [`Shadow::warm`]).
const SEEDS: &str = "pod-seeds";

/// How many times a snapshot lists and adds again when git refused a
/// path it had listed (a file gone since, a name git cannot store).
const ADD_ATTEMPTS: usize = 4;

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
    /// per session: only the session's process writes it). The files
    /// beside the index (same name, other extensions) are the session's
    /// too: its pinned ignore rules, the paths left out.
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
        let rules = self.pinned_rules().await?;
        for _ in 0..ADD_ATTEMPTS {
            let paths = self.changed_paths(&rules).await?;
            if paths.is_empty() || self.add(&paths).await? {
                let tree = self.git(&["write-tree"], &self.index).await?;
                return Ok(tree.trim().to_string());
            }
        }
        Err(CheckpointError::Git {
            what: "add".into(),
            stderr: format!("the workspace kept changing over {ADD_ATTEMPTS} attempts"),
        })
    }

    /// Stages `paths` (listed by [`Self::changed_paths`]): `true` when
    /// done, `false` when git refused some (they are left out from now on
    /// when git cannot store their names; the caller lists again).
    async fn add(&self, paths: &[String]) -> Result<bool, CheckpointError> {
        let list = self.index.with_extension("paths");
        let mut text = paths.join("\0");
        text.push('\0');
        write_file(&list, text).await?;
        let from = format!("--pathspec-from-file={}", list.display());
        // Forced: the listing applied the pinned rules, not the live ones.
        let named = [
            "--literal-pathspecs",
            "add",
            "--all",
            "--force",
            "--ignore-errors",
            from.as_str(),
            "--pathspec-file-nul",
        ];
        match self.git(&named, &self.index).await {
            Ok(_) => Ok(true),
            Err(CheckpointError::Git { stderr, .. }) => {
                let invalid = invalid_paths(&stderr);
                if !invalid.is_empty() {
                    self.leave_out(invalid).await?;
                }
                Ok(false)
            }
            Err(err) => Err(err),
        }
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
        read_list(&self.skip_list()).await
    }

    /// The paths left out of the snapshots because git cannot store their
    /// names (`.GIT/…`, say): a directory is named with a trailing `/`.
    pub async fn unindexed(&self) -> Vec<String> {
        read_list(&self.index.with_extension("unindexed")).await
    }

    fn skip_list(&self) -> PathBuf {
        self.index.with_extension("skipped")
    }

    /// The session's ignore rules: pinned by its first snapshot, from the
    /// workspace's `.gitignore` files as they were then ([`ignore`]).
    async fn pinned_rules(&self) -> Result<String, CheckpointError> {
        let path = self.index.with_extension("ignore");
        if let Ok(rules) = tokio::fs::read_to_string(&path).await {
            return Ok(rules);
        }
        let listed = self
            .git(
                &[
                    "ls-files",
                    "-z",
                    "--cached",
                    "--others",
                    "--exclude-standard",
                    "--",
                    ":(glob)**/.gitignore",
                ],
                &self.index,
            )
            .await?;
        let files: Vec<String> = listed
            .split('\0')
            .filter(|p| !p.is_empty())
            .map(String::from)
            .collect();
        let workspace = self.workspace.clone();
        let rules = tokio::task::spawn_blocking(move || ignore::pin(&workspace, &files))
            .await
            .unwrap_or_default();
        write_file(&path, &rules).await?;
        Ok(rules)
    }

    /// The files to stage: new, changed or deleted since the index, and
    /// those that shrank back under [`SIZE_LIMIT`]. The ones over it, and
    /// paths git cannot store, are left out (and leave the index if they
    /// were in it); the session's pinned rules, not the workspace's live
    /// `.gitignore` files, say what is ignored.
    async fn changed_paths(&self, rules: &str) -> Result<Vec<String>, CheckpointError> {
        let skip_list = self.skip_list();
        let before = read_list(&skip_list).await;
        let mut unindexed: BTreeSet<String> = self.unindexed().await.into_iter().collect();
        let excludes = self.index.with_extension("exclude");
        write_file(&excludes, exclude_text(rules, &before, &unindexed)).await?;
        let exclude_from = format!("--exclude-from={}", excludes.display());
        let listed = self
            .git(
                &[
                    "ls-files",
                    "-z",
                    "--others",
                    "--modified",
                    "--deleted",
                    &exclude_from,
                ],
                &self.index,
            )
            .await?;
        let too_large = |path: &str| {
            std::fs::symlink_metadata(self.workspace.join(path))
                .is_ok_and(|meta| meta.is_file() && meta.len() > SIZE_LIMIT)
        };
        let mut skipped: BTreeSet<String> =
            before.iter().filter(|p| too_large(p)).cloned().collect();
        let mut paths: BTreeSet<String> = before
            .iter()
            .filter(|p| !skipped.contains(*p) && self.workspace.join(p).exists())
            .cloned()
            .collect();
        let mut leaving = Vec::new();
        let unindexed_before = unindexed.len();
        for path in listed.split('\0').filter(|p| !p.is_empty()) {
            if let Some(bad) = unstorable(path) {
                unindexed.insert(bad);
            } else if too_large(path) {
                if skipped.insert(path.to_string()) {
                    leaving.push(path.to_string());
                }
            } else {
                paths.insert(path.to_string());
            }
        }
        let text: String = skipped
            .iter()
            .map(|path| format!("/{}\n", ignore::escape(path)))
            .collect();
        write_file(&skip_list, text).await?;
        if unindexed.len() != unindexed_before {
            self.leave_out(unindexed.into_iter().collect()).await?;
        }
        if !leaving.is_empty() {
            let mut args = vec![
                "--literal-pathspecs",
                "rm",
                "--cached",
                "-f",
                "-q",
                "--ignore-unmatch",
                "--",
            ];
            args.extend(leaving.iter().map(String::as_str));
            self.git(&args, &self.index).await?;
        }
        Ok(paths.into_iter().collect())
    }

    /// Adds `paths` to the ones git cannot store, kept out from now on.
    async fn leave_out(&self, paths: Vec<String>) -> Result<(), CheckpointError> {
        let path = self.index.with_extension("unindexed");
        let mut all: BTreeSet<String> = read_list(&path).await.into_iter().collect();
        all.extend(paths);
        let text: String = all
            .iter()
            .map(|p| format!("/{}\n", ignore::escape(p)))
            .collect();
        write_file(&path, text).await
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
    /// or never captured) are left alone. No symbolic link is followed
    /// ([`restore`]): a path the workspace now routes through one that
    /// `from` does not hold is refused with [`CheckpointError::Blocked`].
    pub async fn restore(&self, from: &str, to: &str) -> Result<(), CheckpointError> {
        self.ensure_store().await?;
        let entries = self
            .git(
                &["diff-tree", "-r", "-z", "--raw", "--no-renames", from, to],
                &self.index,
            )
            .await?;
        let blobs = restore::Blobs::start(self.command(&["cat-file", "--batch"], &self.index))?;
        restore::restore(&self.workspace, &entries, blobs).await
    }

    /// Writes the files of tree `tree` into `dir` (an empty or new
    /// directory of the caller's, not the agent's), as a checkout would: a
    /// copy of the workspace as it was.
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

    /// Makes the store when it is missing (private: 0700, files 0600),
    /// and tightens one an older pod made open to others.
    pub(crate) async fn ensure_store(&self) -> Result<(), CheckpointError> {
        if tokio::fs::try_exists(self.store.join(ATTRIBUTES))
            .await
            .unwrap_or(false)
        {
            return tighten(&self.store).map_err(|source| CheckpointError::Io {
                what: format!("cannot make {} private", self.store.display()),
                source,
            });
        }
        // A new store knows none of the objects an old index names.
        let _ = tokio::fs::remove_file(&self.index).await;
        make_store(&self.store, &self.workspace).await
    }

    /// `git ARGS` on the store, the workspace and `index`.
    fn command(&self, args: &[&str], index: &Path) -> tokio::process::Command {
        let mut all: Vec<OsString> = git::os_args(&[
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
        ]);
        all.extend(args.iter().map(OsString::from));
        let mut command = git::command(&self.workspace, &all);
        command
            .env("GIT_DIR", &self.store)
            .env("GIT_WORK_TREE", &self.workspace)
            .env("GIT_INDEX_FILE", index);
        command
    }

    async fn git(&self, args: &[&str], index: &Path) -> Result<String, CheckpointError> {
        let what = args.first().copied().unwrap_or("git");
        git::output(self.command(args, index), what).await
    }
}

/// Makes the shadow store `store` (private: 0700, files 0600); git runs
/// in `dir`. Made beside it and renamed into place: processes starting
/// together each make one, the first rename wins and the others use it.
pub(crate) async fn make_store(store: &Path, dir: &Path) -> Result<(), CheckpointError> {
    use std::sync::atomic::{AtomicU64, Ordering};
    static MADE: AtomicU64 = AtomicU64::new(0);
    let mut aside = store.as_os_str().to_owned();
    aside.push(format!(
        ".{}.{}.new",
        std::process::id(),
        MADE.fetch_add(1, Ordering::Relaxed)
    ));
    let aside = PathBuf::from(aside);
    init_store(&aside, dir).await?;
    if tokio::fs::rename(&aside, store).await.is_ok() {
        return Ok(());
    }
    let _ = tokio::fs::remove_dir_all(&aside).await;
    if tokio::fs::try_exists(store.join(ATTRIBUTES))
        .await
        .unwrap_or(false)
    {
        return Ok(());
    }
    // A store left half made (a process killed while making it in place,
    // as older versions did): made again where it is.
    init_store(store, dir).await
}

/// `git init` of a store at `path`, without templates (no sample hooks),
/// then its attributes, written last: their presence says it is whole.
async fn init_store(path: &Path, dir: &Path) -> Result<(), CheckpointError> {
    create_dir(path).await?;
    let mut init: Vec<OsString> =
        git::os_args(&["init", "--bare", "-q", "--shared=0600", "--template="]);
    init.push(path.to_path_buf().into_os_string());
    git::output(git::command(dir, &init), "init").await?;
    // Files are stored byte for byte: the workspace's .gitattributes
    // (line endings, filters) must not apply to snapshots.
    let attributes = path.join(ATTRIBUTES);
    if let Some(dir) = attributes.parent() {
        create_dir(dir).await?;
    }
    write_file(
        &attributes,
        "* -text -eol -ident -filter -working-tree-encoding\n",
    )
    .await
}

/// Makes sure the shadow store `store` exists (see [`make_store`]).
pub(crate) async fn ensure_store(store: &Path, dir: &Path) -> Result<(), CheckpointError> {
    match tokio::fs::try_exists(store.join(ATTRIBUTES)).await {
        Ok(true) => Ok(()),
        _ => make_store(store, dir).await,
    }
}

/// The session's exclude file: its pinned rules, then the paths left out
/// (last, so no rule of the workspace's brings them back).
fn exclude_text(rules: &str, skipped: &[String], unindexed: &BTreeSet<String>) -> String {
    let mut text = String::with_capacity(rules.len() + 64);
    text.push_str(rules);
    if !text.is_empty() && !text.ends_with('\n') {
        text.push('\n');
    }
    for path in skipped.iter().chain(unindexed) {
        text.push('/');
        text.push_str(&ignore::escape(path));
        text.push('\n');
    }
    text
}

/// The part of `path` git refuses to store, if any: a component that is
/// `.git` in any case (git's own directory), or `.`/`..`; returned with
/// a trailing `/` when it is a directory of the path.
fn unstorable(path: &str) -> Option<String> {
    let mut at = 0;
    for component in path.split('/') {
        let end = at + component.len();
        if component.eq_ignore_ascii_case(".git") || component == "." || component == ".." {
            return Some(match end < path.len() {
                true => format!("{}/", &path[..end]),
                false => path.to_string(),
            });
        }
        at = end + 1;
    }
    None
}

/// The paths git named as invalid in its complaints.
fn invalid_paths(stderr: &str) -> Vec<String> {
    stderr
        .lines()
        .filter_map(|line| line.strip_prefix("error: invalid path '"))
        .filter_map(|rest| rest.strip_suffix('\''))
        .map(String::from)
        .collect()
}

async fn read_list(list: &Path) -> Vec<String> {
    tokio::fs::read_to_string(list)
        .await
        .unwrap_or_default()
        .lines()
        .filter_map(|line| line.strip_prefix('/'))
        .map(ignore::unescape)
        .collect()
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

#[cfg(test)]
#[path = "shadow_tests.rs"]
mod tests;
