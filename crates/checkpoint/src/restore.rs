//! Making a workspace hold a snapshot again without ever following a
//! symbolic link: every directory on a path is opened relative to its
//! parent with `O_NOFOLLOW`, files are written beside their place and
//! renamed over it, and deletions unlink the entry itself.
//!
//! A workspace is the agent's, and so are the processes it left behind
//! (bash's children outlive their call): one of them may turn a directory
//! the restore is about to fill into a link to somewhere outside, at any
//! moment. A path-based checkout (git's, or `std::fs`) checks and then
//! writes, and writes through the link if it changed in between. Here the
//! check is the open: a directory opened without following links is the
//! one written into, whatever happens to its name afterwards.
//!
//! Before anything is touched, every path is checked: one that would pass
//! through a symbolic link the snapshot being left does not hold, or
//! through a file, refuses the whole restore, listing them. The same
//! condition met mid-way (the workspace changed under the restore) skips
//! that path and fails the restore at the end, listing what was not
//! restored.

use crate::CheckpointError;
use rustix::fs::{AtFlags, FileType, Mode, OFlags};
use rustix::io::Errno;
use std::collections::BTreeSet;
use std::io::Write;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};

/// What a git tree entry is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    File {
        executable: bool,
    },
    Link,
    /// A nested repository's commit: never written or deleted.
    Gitlink,
}

impl Kind {
    fn of(mode: &str) -> Option<Kind> {
        match mode {
            "100644" | "100664" => Some(Kind::File { executable: false }),
            "100755" => Some(Kind::File { executable: true }),
            "120000" => Some(Kind::Link),
            "160000" => Some(Kind::Gitlink),
            _ => None,
        }
    }
}

/// One path two trees disagree on.
#[derive(Debug, Clone)]
struct Entry {
    path: String,
    /// What the tree being left has there.
    old: Option<Kind>,
    /// What the tree being restored has there, and its blob.
    new: Option<(Kind, String)>,
}

/// Makes `workspace` hold what `entries_text` (`git diff-tree -r -z --raw
/// FROM TO`) says tree TO has, from tree FROM (what it holds now), reading
/// blobs through `cat`.
pub(crate) async fn restore(
    workspace: &Path,
    entries_text: &str,
    mut cat: Blobs,
) -> Result<(), CheckpointError> {
    let entries = parse(entries_text);
    let root = open_root(workspace)?;
    let blocked = check(&root, &entries);
    if !blocked.is_empty() {
        return Err(CheckpointError::Blocked {
            paths: blocked.into_iter().collect(),
            done: false,
        });
    }
    let mut skipped = BTreeSet::new();
    let mut emptied = BTreeSet::new();
    for entry in entries.iter().filter(|e| e.new.is_none()) {
        if matches!(entry.old, Some(Kind::Gitlink) | None) {
            continue;
        }
        match remove(&root, &entry.path) {
            Ok(()) => {
                emptied.extend(parents(&entry.path));
            }
            Err(Skip) => {
                skipped.insert(entry.path.clone());
            }
        }
    }
    // Deepest first: a directory's children go before it.
    for dir in emptied.iter().rev() {
        remove_if_empty(&root, dir);
    }
    for entry in &entries {
        let Some((kind, blob)) = &entry.new else {
            continue;
        };
        if *kind == Kind::Gitlink {
            continue;
        }
        let content = cat.read(blob).await?;
        if write(&root, &entry.path, *kind, &content).is_err() {
            skipped.insert(entry.path.clone());
        }
    }
    cat.finish().await;
    match skipped.is_empty() {
        true => Ok(()),
        false => Err(CheckpointError::Blocked {
            paths: skipped.into_iter().collect(),
            done: true,
        }),
    }
}

/// `git diff-tree -r -z --raw` output as entries.
fn parse(text: &str) -> Vec<Entry> {
    let mut entries = Vec::new();
    let mut fields = text.split('\0');
    while let (Some(meta), Some(path)) = (fields.next(), fields.next()) {
        // ":OLDMODE NEWMODE OLDSHA NEWSHA STATUS"
        let parts: Vec<&str> = meta.trim_start_matches(':').split(' ').collect();
        let [old_mode, new_mode, _, new_sha, _] = parts[..] else {
            continue;
        };
        entries.push(Entry {
            path: path.to_string(),
            old: Kind::of(old_mode),
            new: Kind::of(new_mode).map(|kind| (kind, new_sha.to_string())),
        });
    }
    entries
}

/// The workspace's top directory, opened.
fn open_root(workspace: &Path) -> Result<OwnedFd, CheckpointError> {
    rustix::fs::openat(
        rustix::fs::CWD,
        workspace,
        OFlags::DIRECTORY | OFlags::RDONLY | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .map_err(|err| CheckpointError::Io {
        what: format!("cannot open {}", workspace.display()),
        source: err.into(),
    })
}

/// The paths of `entries` the restore cannot make without passing through
/// a symbolic link or a file the tree being left does not hold there, or
/// replacing a directory nothing empties.
fn check(root: &OwnedFd, entries: &[Entry]) -> BTreeSet<String> {
    // What the restore removes first: a link or file there is expected.
    let removed: BTreeSet<&str> = entries
        .iter()
        .filter(|e| e.old.is_some() && e.new.is_none())
        .map(|e| e.path.as_str())
        .collect();
    let emptied: BTreeSet<String> = removed.iter().flat_map(|p| parents(p)).collect();
    let mut blocked = BTreeSet::new();
    for entry in entries {
        let mut prefix = String::new();
        let components: Vec<&str> = entry.path.split('/').collect();
        let dirs = components.split_last().map_or(&[][..], |(_, dirs)| dirs);
        for dir in dirs {
            if !prefix.is_empty() {
                prefix.push('/');
            }
            prefix.push_str(dir);
            match file_type(root, &prefix) {
                None | Some(FileType::Directory) => {}
                Some(_) if removed.contains(prefix.as_str()) => {}
                Some(_) => {
                    blocked.insert(prefix.clone());
                }
            }
        }
        if entry.new.is_some()
            && file_type(root, &entry.path) == Some(FileType::Directory)
            && !emptied.contains(&entry.path)
        {
            blocked.insert(entry.path.clone());
        }
    }
    blocked
}

/// What is at `path` (not following a link there), if anything, when
/// every directory above it can be opened without following links.
fn file_type(root: &OwnedFd, path: &str) -> Option<FileType> {
    let (dir, name) = split(path);
    let parent = open_dirs(root, dir, false).ok()??;
    rustix::fs::statat(&parent, name, AtFlags::SYMLINK_NOFOLLOW)
        .ok()
        .map(|stat| FileType::from_raw_mode(stat.st_mode))
}

/// Why a path was not restored: the workspace changed where it lies.
struct Skip;

/// `path`'s parent directory and its name.
fn split(path: &str) -> (&str, &str) {
    match path.rsplit_once('/') {
        Some((dir, name)) => (dir, name),
        None => ("", path),
    }
}

/// The directories above `path`, nearest last (`a/b/c` -> `a`, `a/b`).
fn parents(path: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut at = 0;
    while let Some(slash) = path[at..].find('/') {
        out.push(path[..at + slash].to_string());
        at += slash + 1;
    }
    out
}

/// Opens the directories of `dir` (relative, `/`-separated) one by one
/// from `root`, none through a link; missing ones are made when `create`,
/// else the answer is `None`.
fn open_dirs(root: &OwnedFd, dir: &str, create: bool) -> Result<Option<OwnedFd>, Skip> {
    let flags = OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::RDONLY | OFlags::CLOEXEC;
    let mut current = rustix::io::dup(root).map_err(|_| Skip)?;
    for name in dir.split('/').filter(|n| !n.is_empty()) {
        let next = match rustix::fs::openat(&current, name, flags, Mode::empty()) {
            Ok(fd) => fd,
            Err(Errno::NOENT) if create => {
                match rustix::fs::mkdirat(&current, name, Mode::from_raw_mode(0o777)) {
                    Ok(()) | Err(Errno::EXIST) => {}
                    Err(_) => return Err(Skip),
                }
                rustix::fs::openat(&current, name, flags, Mode::empty()).map_err(|_| Skip)?
            }
            Err(Errno::NOENT) => return Ok(None),
            // ELOOP: a link; ENOTDIR: a file. Either way not ours to pass.
            Err(_) => return Err(Skip),
        };
        current = next;
    }
    Ok(Some(current))
}

/// Deletes the file or link at `path`; gone already is fine.
fn remove(root: &OwnedFd, path: &str) -> Result<(), Skip> {
    let (dir, name) = split(path);
    let Some(parent) = open_dirs(root, dir, false)? else {
        return Ok(());
    };
    match rustix::fs::unlinkat(&parent, name, AtFlags::empty()) {
        Ok(()) | Err(Errno::NOENT) => Ok(()),
        // A directory where the snapshot had a file: not ours to remove.
        Err(_) => Err(Skip),
    }
}

/// Removes directory `path` if it is empty (as git's checkout does).
fn remove_if_empty(root: &OwnedFd, path: &str) {
    let (dir, name) = split(path);
    if let Ok(Some(parent)) = open_dirs(root, dir, false) {
        let _ = rustix::fs::unlinkat(&parent, name, AtFlags::REMOVEDIR);
    }
}

/// Writes `content` at `path` as `kind`: into a new entry beside it, then
/// renamed over it (which replaces a link itself, never its target).
fn write(root: &OwnedFd, path: &str, kind: Kind, content: &[u8]) -> Result<(), Skip> {
    use std::sync::atomic::{AtomicU64, Ordering};
    static WRITES: AtomicU64 = AtomicU64::new(0);
    let (dir, name) = split(path);
    let parent = open_dirs(root, dir, true)?.ok_or(Skip)?;
    let aside = format!(
        ".{name}.pod-restore.{}.{}",
        std::process::id(),
        WRITES.fetch_add(1, Ordering::Relaxed)
    );
    let made = match kind {
        Kind::Link => {
            let target = std::ffi::OsStr::from_bytes(content);
            rustix::fs::symlinkat(target, &parent, aside.as_str()).map_err(|_| Skip)
        }
        Kind::File { executable } => write_new(&parent, &aside, executable, content),
        Kind::Gitlink => return Ok(()),
    };
    made?;
    match rustix::fs::renameat(&parent, aside.as_str(), &parent, name) {
        Ok(()) => Ok(()),
        Err(_) => {
            let _ = rustix::fs::unlinkat(&parent, aside.as_str(), AtFlags::empty());
            Err(Skip)
        }
    }
}

/// A new file `name` in `parent` holding `content`; its mode is git's
/// (0666 or 0777, less the umask).
fn write_new(parent: &OwnedFd, name: &str, executable: bool, content: &[u8]) -> Result<(), Skip> {
    let mode = Mode::from_raw_mode(if executable { 0o777 } else { 0o666 });
    let flags = OFlags::CREATE | OFlags::EXCL | OFlags::WRONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    let fd = rustix::fs::openat(parent.as_fd(), name, flags, mode).map_err(|_| Skip)?;
    let mut file = std::fs::File::from(fd);
    if file.write_all(content).is_err() {
        let _ = rustix::fs::unlinkat(parent, name, AtFlags::empty());
        return Err(Skip);
    }
    Ok(())
}

/// Blobs read from a store by one `git cat-file --batch`.
pub(crate) struct Blobs {
    child: tokio::process::Child,
    input: tokio::process::ChildStdin,
    output: BufReader<tokio::process::ChildStdout>,
}

impl Blobs {
    /// Starts `command` (a `git cat-file --batch` in the store).
    pub(crate) fn start(mut command: tokio::process::Command) -> Result<Self, CheckpointError> {
        command.stdin(std::process::Stdio::piped());
        let mut child = command
            .spawn()
            .map_err(|source| CheckpointError::Spawn { source })?;
        let (Some(input), Some(output)) = (child.stdin.take(), child.stdout.take()) else {
            return Err(CheckpointError::Git {
                what: "cat-file".into(),
                stderr: "no pipes to git".into(),
            });
        };
        Ok(Self {
            child,
            input,
            output: BufReader::new(output),
        })
    }

    /// The content of blob `id`.
    async fn read(&mut self, id: &str) -> Result<Vec<u8>, CheckpointError> {
        let failed = |why: String| CheckpointError::Git {
            what: "cat-file".into(),
            stderr: why,
        };
        let io = |err: std::io::Error| failed(err.to_string());
        self.input
            .write_all(format!("{id}\n").as_bytes())
            .await
            .map_err(io)?;
        self.input.flush().await.map_err(io)?;
        let mut header = String::new();
        self.output.read_line(&mut header).await.map_err(io)?;
        // "<id> blob <size>", or "<id> missing".
        let size: usize = match header.split_whitespace().collect::<Vec<_>>()[..] {
            [_, "blob", size] => size
                .parse()
                .map_err(|_| failed(format!("unexpected answer {header:?}")))?,
            _ => return Err(failed(format!("blob {id}: {}", header.trim()))),
        };
        let mut content = vec![0; size + 1];
        self.output.read_exact(&mut content).await.map_err(io)?;
        content.truncate(size);
        Ok(content)
    }

    async fn finish(mut self) {
        drop(self.input);
        let _ = self.child.wait().await;
    }
}
