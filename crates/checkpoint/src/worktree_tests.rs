//! Worktrees of repositories an agent prepared: nothing they configure
//! runs, a forged `.git` is refused, and the checkout is the commit's
//! bytes.

use super::*;
use std::os::unix::fs::PermissionsExt;

/// No confinement (the kernel's is pod's, tested through the binary).
fn free(_: &mut tokio::process::Command, _: &[PathBuf]) -> std::io::Result<()> {
    Ok(())
}

/// `git ARGS` in `dir`, as a user would run it; its stdout.
fn git(dir: &Path, args: &[&str]) -> String {
    let out = std::process::Command::new("git")
        .args(["-c", "user.name=t", "-c", "user.email=t@example.com"])
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A repository with one commit whose `.git` runs `touch MARKER` from
/// every place it can: hooks, the fsmonitor, a smudge filter.
fn trapped_repository(dir: &Path, marker: &Path) {
    git(dir, &["init", "-q"]);
    std::fs::write(dir.join("a.txt"), "line\r\n").unwrap();
    std::fs::write(dir.join(".gitattributes"), "*.txt filter=evil\n").unwrap();
    std::fs::create_dir(dir.join("sub")).unwrap();
    std::fs::write(dir.join("sub/b.sh"), "echo b\n").unwrap();
    std::fs::set_permissions(dir.join("sub/b.sh"), std::fs::Permissions::from_mode(0o755)).unwrap();
    git(dir, &["add", "."]);
    git(dir, &["commit", "-q", "-m", "start"]);
    let run = format!("touch {}", marker.display());
    for hook in [
        "post-checkout",
        "reference-transaction",
        "post-index-change",
        "pre-commit",
    ] {
        let path = dir.join(".git/hooks").join(hook);
        std::fs::write(&path, format!("#!/bin/sh\n{run}\n")).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    git(dir, &["config", "core.fsmonitor", &run]);
    git(
        dir,
        &["config", "filter.evil.smudge", &format!("{run}; cat")],
    );
    git(
        dir,
        &["config", "filter.evil.clean", &format!("{run}; cat")],
    );
    git(dir, &["config", "core.hooksPath", ".git/hooks"]);
}

#[tokio::test]
async fn a_trapped_repository_gets_its_worktree_and_nothing_of_it_runs() {
    let top = tempfile::tempdir().unwrap();
    let repo = top.path().join("repo");
    std::fs::create_dir(&repo).unwrap();
    let marker = top.path().join("ran");
    trapped_repository(&repo, &marker);
    let path = top.path().join("home/worktrees/w1");
    let store = top.path().join("home/checkpoints.git");
    let made = add(&repo.join("sub"), &path, "pod/w1", &store, &free)
        .await
        .unwrap();
    assert!(!marker.exists(), "something the repository configured ran");
    assert_eq!(made.workspace, path.join("sub"));
    assert_eq!(made.repo, repo.canonicalize().unwrap());
    // The commit's bytes, unfiltered; the executable bit kept.
    assert_eq!(std::fs::read(path.join("a.txt")).unwrap(), b"line\r\n");
    let mode = std::fs::metadata(path.join("sub/b.sh"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o111, 0o111);
    // A real worktree of the repository, on its branch, clean.
    let list = git(
        &repo,
        &[
            "-c",
            "core.fsmonitor=false",
            "worktree",
            "list",
            "--porcelain",
        ],
    );
    assert!(list.contains("branch refs/heads/pod/w1"), "{list}");
    let status = git(
        &path,
        &[
            "-c",
            "core.fsmonitor=false",
            "-c",
            "core.hooksPath=/dev/null",
            "-c",
            "filter.evil.clean=cat",
            "status",
            "--porcelain",
        ],
    );
    assert_eq!(status, "");
    // The same from a worktree made that way: its .git names it back.
    let second = top.path().join("home/worktrees/w2");
    add(&path, &second, "pod/w2", &store, &free).await.unwrap();
    assert!(second.join("a.txt").exists());
    assert!(!marker.exists());
}

#[tokio::test]
async fn a_dot_git_that_is_a_link_or_a_forged_file_is_refused() {
    let top = tempfile::tempdir().unwrap();
    let other = top.path().join("other");
    std::fs::create_dir(&other).unwrap();
    git(&other, &["init", "-q"]);
    std::fs::write(other.join("secret"), "s\n").unwrap();
    git(&other, &["add", "."]);
    git(&other, &["commit", "-q", "-m", "private"]);
    let store = top.path().join("checkpoints.git");
    // A link to another repository's .git.
    let linked = top.path().join("linked");
    std::fs::create_dir(&linked).unwrap();
    std::os::unix::fs::symlink(other.join(".git"), linked.join(".git")).unwrap();
    let err = add(&linked, &top.path().join("w1"), "pod/w1", &store, &free)
        .await
        .unwrap_err();
    assert!(err.to_string().contains("is a symbolic link"), "{err}");
    // A .git file naming another repository outright, or a worktree of it
    // that is someone else's.
    git(&other, &["worktree", "add", "-q", "../theirs"]);
    let forged = top.path().join("forged");
    std::fs::create_dir(&forged).unwrap();
    for named in [other.join(".git"), other.join(".git/worktrees/theirs")] {
        std::fs::write(
            forged.join(".git"),
            format!("gitdir: {}\n", named.display()),
        )
        .unwrap();
        let err = add(&forged, &top.path().join("w2"), "pod/w2", &store, &free)
            .await
            .unwrap_err();
        assert!(matches!(err, CheckpointError::Refused(_)), "{err}");
    }
    let branches = git(&other, &["branch", "--list", "pod/*"]);
    assert_eq!(branches, "", "the other repository was written to");
    assert!(!top.path().join("w1").join("secret").exists());
    assert!(!top.path().join("w2").join("secret").exists());
}
