//! The replay's workspace: a scratch copy of the files as they were when
//! the session started (the first checkpoint's "before" tree), or of a
//! directory the operator gives. A session that started in an empty
//! workspace needs no shadow store: its first tree is git's empty tree.

use super::Recorded;
use crate::error::LaunchError;
use pod::log::{CheckpointPhase, LogRecord};
use pod::PodHome;
use pod_llm::ItemKind;
use std::path::Path;

/// Tools that read or change nothing of the workspace: a session that
/// called only these needs no copy of it.
const NO_FILES: [&str; 2] = [pod_tools::TODO_WRITE, pod::TASK];

/// The id of git's empty tree (SHA-1, the shadow store's object format):
/// the first checkpoint of a session that started with no files. Such a
/// session replays from its log alone (a kept corpus needs no store).
const EMPTY_TREE: &str = "4b825dc642cb6eb9a060e54bf8d69288fbee4904";

/// Fills `into` (a new, empty directory) with the session's starting
/// files: a copy of `given`, else the first checkpoint's tree from the
/// shadow store in `home`. A session that never used the workspace starts
/// in an empty one.
pub(crate) async fn prepare(
    root: &Recorded,
    children: &[Recorded],
    home: &PodHome,
    given: Option<&Path>,
    into: &Path,
    scratch: &Path,
) -> Result<(), LaunchError> {
    if let Some(dir) = given {
        return copy_dir(dir, into).map_err(|err| {
            LaunchError::settings(
                format!("cannot copy the workspace {}: {err}", dir.display()),
                "give a readable directory with --workspace DIR",
            )
        });
    }
    let id = root.header.session_id;
    let Some(tree) = first_tree(&root.records) else {
        if uses_files(std::iter::once(root).chain(children)) {
            return Err(LaunchError::settings(
                format!("session {id} took no checkpoint to start its workspace from"),
                "give its files as they were with --workspace DIR (a copy of the project at \
                 that commit, for instance)",
            ));
        }
        return empty(into);
    };
    if tree == EMPTY_TREE {
        return empty(into);
    }
    let store = home.path().join(pod::checkpoints::STORE_DIR);
    if !store.is_dir() {
        return Err(LaunchError::settings(
            format!(
                "the checkpoints of session {id} are not here: no {}",
                store.display()
            ),
            "copy POD_HOME's checkpoints.git beside the sessions, or give the files with \
             --workspace DIR",
        ));
    }
    // The index is the replay's own: the recording's home is only read.
    let shadow = pod::checkpoints::Shadow::new(store, scratch.join("export.index"), into.into());
    shadow.export(tree, into).await.map_err(|err| {
        LaunchError::settings(
            format!(
                "cannot export the workspace of session {id} from its first checkpoint: {}",
                pod_llm::error_chain(&err)
            ),
            "give the files with --workspace DIR",
        )
    })
}

/// `into`, created empty.
fn empty(into: &Path) -> Result<(), LaunchError> {
    std::fs::create_dir_all(into).map_err(|err| {
        LaunchError::settings(format!("cannot create {}: {err}", into.display()), "")
    })
}

/// The tree of the first "before" checkpoint: the files before the
/// session changed any.
fn first_tree(records: &[LogRecord]) -> Option<&str> {
    records.iter().find_map(|record| match record {
        LogRecord::Checkpoint(c) if c.phase == CheckpointPhase::Before => Some(c.tree.as_str()),
        _ => None,
    })
}

/// Whether any of `sessions` called a tool that touches the workspace.
fn uses_files<'a>(sessions: impl IntoIterator<Item = &'a Recorded>) -> bool {
    sessions
        .into_iter()
        .flat_map(|s| &s.records)
        .any(|record| match record {
            LogRecord::Item(item) => match &item.kind {
                ItemKind::Assistant { tool_calls, .. } => tool_calls
                    .iter()
                    .any(|call| !NO_FILES.contains(&call.name.as_str())),
                _ => false,
            },
            _ => false,
        })
}

/// Copies `from` into `to` (created), files, directories and symbolic
/// links as they are.
fn copy_dir(from: &Path, to: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(to)?;
    for entry in std::fs::read_dir(from)? {
        let entry = entry?;
        let kind = entry.file_type()?;
        let target = to.join(entry.file_name());
        if kind.is_dir() {
            copy_dir(&entry.path(), &target)?;
        } else if kind.is_symlink() {
            let link = std::fs::read_link(entry.path())?;
            #[cfg(unix)]
            std::os::unix::fs::symlink(link, &target)?;
            #[cfg(not(unix))]
            std::fs::copy(entry.path(), &target).map(|_| ())?;
        } else {
            std::fs::copy(entry.path(), &target)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_copy_keeps_files_directories_and_links() {
        let dir = tempfile::tempdir().unwrap();
        let from = dir.path().join("from");
        std::fs::create_dir_all(from.join("src")).unwrap();
        std::fs::write(from.join("src/a.txt"), "alpha").unwrap();
        std::os::unix::fs::symlink("src/a.txt", from.join("link")).unwrap();
        let to = dir.path().join("to");
        copy_dir(&from, &to).unwrap();
        assert_eq!(
            std::fs::read_to_string(to.join("src/a.txt")).unwrap(),
            "alpha"
        );
        assert_eq!(
            std::fs::read_link(to.join("link")).unwrap(),
            Path::new("src/a.txt")
        );
    }
}
