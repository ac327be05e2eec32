//! Project instructions: `AGENTS.md` files found the way Codex finds them.
//!
//! In order, root first: the global file in pod's config directory
//! (`AGENTS.override.md`, else `AGENTS.md`), then every directory from the
//! repository's root (the nearest directory above the workspace holding
//! `.git`; the workspace itself outside a repository) down to the
//! workspace, at most one file each: `AGENTS.override.md`, else
//! `AGENTS.md`, else the first of the fallback names (`CLAUDE.md` by
//! default). Empty files count as absent. Files are taken whole while
//! their total stays within the byte cap; the rest are left out and named
//! in a warning.

use super::{RecordedText, Table};
use crate::error::LaunchError;
use std::path::{Path, PathBuf};

/// The file that wins over `AGENTS.md` in its directory.
pub const OVERRIDE: &str = "AGENTS.override.md";
/// The cross-tool instructions file.
pub const AGENTS: &str = "AGENTS.md";
/// Default of `[agent] max_instruction_bytes`: Codex's cap, about 8,000
/// tokens, a few percent of a context window.
pub const DEFAULT_MAX_BYTES: usize = 32 * 1024;

/// What discovery found: the files taken, in order, and those left out.
#[derive(Debug, Default)]
pub(crate) struct Found {
    pub taken: Vec<RecordedText>,
    pub left_out: Vec<PathBuf>,
}

/// The instruction files of a session in `workspace`, with the global one
/// from `config_dir` and the operator's own `extra` files (always taken:
/// the operator named them), within `table`'s cap.
pub(crate) fn discover(
    config_dir: Option<&Path>,
    workspace: &Path,
    table: &Table,
    extra: &[PathBuf],
) -> Result<Found, LaunchError> {
    let mut candidates = Vec::new();
    if let Some(dir) = config_dir {
        candidates.extend(pick(dir, &[OVERRIDE, AGENTS], None));
    }
    let fallbacks = table
        .instruction_fallbacks
        .clone()
        .unwrap_or_else(|| vec!["CLAUDE.md".to_string()]);
    let mut names: Vec<&str> = vec![OVERRIDE, AGENTS];
    names.extend(fallbacks.iter().map(String::as_str));
    let root = project_root(workspace);
    for dir in chain(&root, workspace) {
        candidates.extend(pick(&dir, &names, Some(&root)));
    }
    let cap = table.max_instruction_bytes.unwrap_or(DEFAULT_MAX_BYTES);
    let mut found = Found::default();
    let mut used = 0usize;
    for path in candidates {
        let Some(text) = read(&path) else { continue };
        // Once one is left out, the ones below it are too: a more specific
        // file read without the one it refines would mislead.
        if !found.left_out.is_empty() || used + text.len() > cap {
            found.left_out.push(path);
            continue;
        }
        used += text.len();
        found.taken.push(RecordedText { source: path, text });
    }
    for path in extra {
        let text = std::fs::read_to_string(path).map_err(|err| {
            LaunchError::settings(
                format!(
                    "cannot read the instructions file {}: {err}",
                    path.display()
                ),
                "give a readable file to --instructions or [agent] instructions",
            )
        })?;
        found.taken.push(RecordedText {
            source: path.clone(),
            text,
        });
    }
    Ok(found)
}

/// The nearest directory from `workspace` up holding `.git`, else
/// `workspace`.
fn project_root(workspace: &Path) -> PathBuf {
    let mut dir = Some(workspace);
    while let Some(at) = dir {
        if at.join(".git").exists() {
            return at.to_path_buf();
        }
        dir = at.parent();
    }
    workspace.to_path_buf()
}

/// The directories from `root` down to `workspace`, root first.
fn chain(root: &Path, workspace: &Path) -> Vec<PathBuf> {
    let mut dirs = Vec::new();
    let mut dir = Some(workspace);
    while let Some(at) = dir {
        dirs.push(at.to_path_buf());
        if at == root {
            break;
        }
        dir = at.parent();
    }
    dirs.reverse();
    dirs
}

/// The first of `names` in `dir` that is a non-empty file. Under `inside`
/// (the project, which is the agent's to write), a link is followed only
/// when it stays in the project: a planted link must not put another
/// file (a key, a secret) into the prompt sent to the model.
fn pick(dir: &Path, names: &[&str], inside: Option<&Path>) -> Option<PathBuf> {
    for name in names {
        let path = dir.join(name);
        let Ok(meta) = std::fs::symlink_metadata(&path) else {
            continue;
        };
        if meta.file_type().is_symlink() {
            let (Some(root), Ok(real)) = (inside, path.canonicalize()) else {
                continue;
            };
            let inside_root = root.canonicalize().is_ok_and(|root| real.starts_with(root));
            if !inside_root || !real.is_file() {
                tracing::warn!(path = %path.display(), "ignoring an instructions file that links out of the project");
                continue;
            }
        } else if !meta.is_file() {
            continue;
        }
        if read(&path).is_some() {
            return Some(path);
        }
    }
    None
}

/// The file's text, `None` when it cannot be read or is blank.
fn read(path: &Path) -> Option<String> {
    match std::fs::read_to_string(path) {
        Ok(text) if !text.trim().is_empty() => Some(text),
        Ok(_) => None,
        Err(err) => {
            tracing::warn!(path = %path.display(), %err, "cannot read an instructions file");
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(path: &Path, text: &str) {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }

    #[test]
    fn one_file_per_directory_root_first_override_first_then_fallbacks() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("repo");
        std::fs::create_dir_all(root.join(".git")).unwrap();
        let ws = root.join("a/b");
        write(&root.join("AGENTS.md"), "root");
        write(&root.join("a/AGENTS.md"), "a");
        write(&root.join("a/AGENTS.override.md"), "a override");
        write(&ws.join("CLAUDE.md"), "claude");
        write(&dir.path().join("config/AGENTS.md"), "global");
        let found = discover(
            Some(&dir.path().join("config")),
            &ws,
            &Table::default(),
            &[],
        )
        .unwrap();
        let texts: Vec<&str> = found.taken.iter().map(|t| t.text.as_str()).collect();
        assert_eq!(texts, ["global", "root", "a override", "claude"]);
        let table = Table {
            instruction_fallbacks: Some(vec![]),
            max_instruction_bytes: Some(10),
            ..Table::default()
        };
        let found = discover(None, &ws, &table, &[]).unwrap();
        let texts: Vec<&str> = found.taken.iter().map(|t| t.text.as_str()).collect();
        assert_eq!(texts, ["root"]);
        assert_eq!(found.left_out, [root.join("a/AGENTS.override.md")]);
    }

    #[test]
    fn a_link_out_of_the_project_is_not_read() {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path().join("ws");
        write(&dir.path().join("secret"), "key");
        std::fs::create_dir_all(&ws).unwrap();
        std::os::unix::fs::symlink(dir.path().join("secret"), ws.join("AGENTS.md")).unwrap();
        write(&ws.join("CLAUDE.md"), "real");
        let found = discover(None, &ws, &Table::default(), &[]).unwrap();
        assert_eq!(found.taken.len(), 1);
        assert_eq!(found.taken[0].text, "real");
    }
}
