//! The ignore rules a session's snapshots honour: the workspace's
//! `.gitignore` files as they were when the session's first snapshot was
//! taken (before any of its calls ran), pinned in one file of rules
//! anchored at the workspace's top.
//!
//! Live `.gitignore` files are the agent's to edit: honouring them would
//! let it hide a file from `pod diff` (list it in a `.gitignore`) or turn
//! the user's ignored files (`.env`, `secrets/`) into files the session
//! seems to have made (move the `.gitignore` away for one snapshot), which
//! a rewind then deletes. Pinned, they are the user's.
//!
//! Each file's patterns become patterns of the top directory with git's
//! own meaning kept: a pattern with a slash before its end is relative to
//! its file's directory (`/DIR/PATTERN`); one without matches at any depth
//! below it (`/DIR/**/PATTERN`); negations stay negations. Files are
//! written parent first, so a deeper file's patterns come later and win,
//! as they do in git.

use std::path::Path;

/// The pinned rules for `.gitignore` files at `paths` (relative to
/// `workspace`, as `git ls-files` lists them), read from the workspace.
/// A file that cannot be read (gone, not a regular file) adds nothing.
pub(crate) fn pin(workspace: &Path, paths: &[String]) -> String {
    let mut files: Vec<&String> = paths.iter().collect();
    // Parents before their children: a directory's path is a prefix of
    // its subdirectories' paths, so a byte-wise sort puts it first.
    files.sort();
    let mut rules = String::new();
    for path in files {
        let dir = path.strip_suffix(".gitignore").unwrap_or_default();
        let Some(text) = read_regular(&workspace.join(path)) else {
            continue;
        };
        for line in text.lines() {
            if let Some(rule) = anchored(dir, line) {
                rules.push_str(&rule);
                rules.push('\n');
            }
        }
    }
    rules
}

/// A file's text, when it is a regular file (a `.gitignore` that is a
/// symbolic link is not read, as git does not read it either).
fn read_regular(path: &Path) -> Option<String> {
    let meta = std::fs::symlink_metadata(path).ok()?;
    if !meta.is_file() {
        return None;
    }
    let bytes = std::fs::read(path).ok()?;
    Some(String::from_utf8_lossy(&bytes).into_owned())
}

/// One line of the `.gitignore` in directory `dir` (empty for the top,
/// else ending in `/`), as a rule of the top directory; `None` for blank
/// lines and comments.
fn anchored(dir: &str, line: &str) -> Option<String> {
    let line = line.strip_suffix('\r').unwrap_or(line);
    if line.trim().is_empty() || line.starts_with('#') {
        return None;
    }
    if dir.is_empty() {
        return Some(line.to_string());
    }
    let (negated, pattern) = match line.strip_prefix('!') {
        Some(rest) => (true, rest),
        None => (false, line),
    };
    let body = pattern.strip_suffix('/').unwrap_or(pattern);
    let relative = body.contains('/');
    let dir = escape(dir);
    let rule = match relative {
        true => format!("/{dir}{}", pattern.trim_start_matches('/')),
        false => format!("/{dir}**/{pattern}"),
    };
    Some(match negated {
        true => format!("!{rule}"),
        false => rule,
    })
}

/// `path` as a gitignore pattern that matches only itself.
pub(crate) fn escape(path: &str) -> String {
    let mut out = String::with_capacity(path.len());
    for c in path.chars() {
        if matches!(c, '\\' | '*' | '?' | '[' | '!' | '#' | ' ') {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// The path an [`escape`]d pattern matches.
pub(crate) fn unescape(pattern: &str) -> String {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_nested_files_patterns_keep_their_meaning_at_the_top() {
        assert_eq!(anchored("", "*.log"), Some("*.log".into()));
        assert_eq!(anchored("", "# note"), None);
        assert_eq!(anchored("", "   "), None);
        assert_eq!(anchored("a/b/", "*.log"), Some("/a/b/**/*.log".into()));
        assert_eq!(anchored("a/b/", "build/"), Some("/a/b/**/build/".into()));
        assert_eq!(anchored("a/b/", "/only"), Some("/a/b/only".into()));
        assert_eq!(anchored("a/b/", "x/y"), Some("/a/b/x/y".into()));
        assert_eq!(
            anchored("a/b/", "!keep.log"),
            Some("!/a/b/**/keep.log".into())
        );
        assert_eq!(anchored("we ird/", "x"), Some("/we\\ ird/**/x".into()));
        assert_eq!(unescape(&escape("a *[b]?!#\\")), "a *[b]?!#\\");
    }

    /// What `git ls-files` ignores with the pinned rules, in a workspace
    /// whose `.gitignore` files have since been removed.
    fn ignored_with(rules: &str, workspace: &Path) -> Vec<String> {
        let file = workspace.join("../rules");
        std::fs::write(&file, rules).unwrap();
        let out = std::process::Command::new("git")
            .args([
                "-c",
                "core.excludesFile=/dev/null",
                "ls-files",
                "-o",
                "-i",
                "--exclude-from",
            ])
            .arg(&file)
            .env("GIT_DIR", workspace.join("../store"))
            .env("GIT_WORK_TREE", workspace)
            .env("GIT_INDEX_FILE", workspace.join("../index"))
            .current_dir(workspace)
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
        let mut listed: Vec<String> = String::from_utf8(out.stdout)
            .unwrap()
            .lines()
            .map(String::from)
            .collect();
        listed.sort();
        listed
    }

    #[test]
    fn pinned_rules_ignore_what_the_files_ignored() {
        let top = tempfile::tempdir().unwrap();
        std::process::Command::new("git")
            .args(["init", "-q", "--bare"])
            .arg(top.path().join("store"))
            .status()
            .unwrap();
        let w = top.path().join("ws");
        for dir in ["a/b/c", "a/x", "d"] {
            std::fs::create_dir_all(w.join(dir)).unwrap();
        }
        std::fs::write(w.join(".gitignore"), "*.log\n/.env\nsecrets/\n").unwrap();
        std::fs::write(w.join("a/.gitignore"), "!keep.log\nx/y\n").unwrap();
        std::fs::write(w.join("a/b/.gitignore"), "*.tmp\n/only\n").unwrap();
        for file in [
            "top.log",
            ".env",
            "d/.env",
            "a/keep.log",
            "a/b/keep.log",
            "a/x/y",
            "a/b/x.tmp",
            "a/b/c/deep.tmp",
            "d/z.tmp",
            "a/b/only",
            "a/b/c/only",
            "d/ok",
        ] {
            std::fs::write(w.join(file), "x").unwrap();
        }
        std::fs::create_dir_all(w.join("d/secrets")).unwrap();
        std::fs::write(w.join("d/secrets/k"), "x").unwrap();
        let files: Vec<String> = [".gitignore", "a/.gitignore", "a/b/.gitignore"]
            .map(String::from)
            .to_vec();
        let rules = pin(&w, &files);
        // What git itself ignores with the files in place.
        let live = {
            let out = std::process::Command::new("git")
                .args(["ls-files", "-o", "-i", "--exclude-standard"])
                .env("GIT_DIR", top.path().join("store"))
                .env("GIT_WORK_TREE", &w)
                .env("GIT_INDEX_FILE", top.path().join("index"))
                .current_dir(&w)
                .output()
                .unwrap();
            let mut listed: Vec<String> = String::from_utf8(out.stdout)
                .unwrap()
                .lines()
                .map(String::from)
                .collect();
            listed.sort();
            listed
        };
        for file in files {
            std::fs::remove_file(w.join(file)).unwrap();
        }
        assert_eq!(ignored_with(&rules, &w), live);
        assert_eq!(
            live,
            [
                ".env",
                "a/b/c/deep.tmp",
                "a/b/only",
                "a/b/x.tmp",
                "a/x/y",
                "d/secrets/k",
                "top.log"
            ]
        );
    }
}
