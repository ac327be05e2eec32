//! How pod runs `git`: never with anything of a workspace's or a user's
//! configuration that can run a program, and never with pod's secrets in
//! its environment.
//!
//! A workspace is the agent's: it can plant hooks (`.git/hooks/*`), a
//! `core.fsmonitor` or `core.hooksPath`, filter drivers (`filter.X.smudge`
//! named by a `.gitattributes`), `includeIf` chains and the like, all of
//! which git runs as the user who runs git, outside any sandbox. So every
//! git pod runs:
//!
//! - starts from an empty environment: `PATH` only, plus what the call sets
//!   (no provider keys, no `POD_NOTIFY_SECRET`, no `GIT_*` of the user's);
//! - reads neither the system's nor the user's config
//!   (`GIT_CONFIG_NOSYSTEM`, `GIT_CONFIG_GLOBAL=/dev/null`) nor the
//!   system's attributes;
//! - runs no hook and no file-system monitor (`core.hooksPath=/dev/null`,
//!   `core.fsmonitor=false`, given on the command line, which beats every
//!   config file), starts no background maintenance, asks for nothing.
//!
//! The snapshots' own repository (the shadow store) is pod's, so its config
//! and attributes are pod's too; the one git that runs in a user's
//! repository (a worktree, [`crate::worktree`]) runs only commands that
//! execute nothing of the repository's, under a kernel confinement its
//! caller supplies.

use crate::CheckpointError;
use std::ffi::OsString;
use std::path::Path;
use std::process::Stdio;
use tokio::process::Command;

/// Settings every git pod runs gets on its command line, where they win
/// over any config file: nothing a repository says may run a program.
const PINNED: [&str; 18] = [
    "-c",
    "core.hooksPath=/dev/null",
    "-c",
    "core.fsmonitor=false",
    "-c",
    "core.sshCommand=false",
    "-c",
    "gc.auto=0",
    "-c",
    "maintenance.auto=false",
    "-c",
    "protocol.allow=never",
    "-c",
    "core.pager=cat",
    "-c",
    "credential.helper=",
    "-c",
    "core.askPass=",
];

/// A `git` command in `dir`: pinned settings first, then `args`; an
/// empty environment but `PATH`; no input; killed if the caller gives up
/// on it.
pub(crate) fn command(dir: &Path, args: &[OsString]) -> Command {
    let mut command = scrubbed("git", dir);
    command.args(PINNED).args(args);
    command
}

/// `program` in `dir` with the environment git gets and nothing else.
fn scrubbed(program: &str, dir: &Path) -> Command {
    let mut command = Command::new(program);
    command
        .env_clear()
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_ATTR_NOSYSTEM", "1")
        .env("GIT_TERMINAL_PROMPT", "0")
        // Messages are parsed (an invalid path): keep them untranslated.
        .env("LC_ALL", "C")
        .current_dir(dir)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    if let Some(path) = std::env::var_os("PATH") {
        command.env("PATH", path);
    }
    command
}

/// Runs `command`; its stdout, or what it said on stderr.
pub(crate) async fn output(mut command: Command, what: &str) -> Result<String, CheckpointError> {
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

/// `args` as owned strings.
pub(crate) fn os_args<S: AsRef<std::ffi::OsStr>>(args: &[S]) -> Vec<OsString> {
    args.iter().map(|a| a.as_ref().to_os_string()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A repository whose config runs programs from everywhere it can.
    fn booby_trapped(dir: &Path, marker: &Path) {
        let git = |args: &[&str]| {
            let out = std::process::Command::new("git")
                .args(args)
                .current_dir(dir)
                .output()
                .unwrap();
            assert!(out.status.success(), "{out:?}");
        };
        git(&["init", "-q"]);
        let run = format!("touch {}", marker.display());
        let hook = dir.join(".git/hooks/post-index-change");
        std::fs::write(&hook, format!("#!/bin/sh\n{run}\n")).unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&hook, std::fs::Permissions::from_mode(0o755)).unwrap();
        git(&["config", "core.fsmonitor", &run]);
        git(&["config", "core.pager", &run]);
    }

    #[tokio::test]
    async fn nothing_a_repository_configures_runs_and_no_secret_is_passed() {
        let dir = tempfile::tempdir().unwrap();
        let marker = dir.path().join("ran");
        booby_trapped(dir.path(), &marker);
        std::fs::write(dir.path().join("a"), "a").unwrap();
        let out = output(command(dir.path(), &os_args(&["add", "a"])), "add")
            .await
            .unwrap();
        assert!(out.is_empty());
        let listed = output(
            command(dir.path(), &os_args(&["ls-files", "-s", "a"])),
            "ls-files",
        )
        .await
        .unwrap();
        assert!(listed.contains("\ta"), "{listed}");
        assert!(!marker.exists(), "a hook or the fsmonitor ran");
    }

    #[tokio::test]
    async fn git_sees_no_variable_of_the_callers_but_path() {
        let dir = tempfile::tempdir().unwrap();
        let env = output(scrubbed("env", dir.path()), "env").await.unwrap();
        let mut names: Vec<&str> = env.lines().filter_map(|l| l.split('=').next()).collect();
        names.sort_unstable();
        assert_eq!(
            names,
            [
                "GIT_ATTR_NOSYSTEM",
                "GIT_CONFIG_GLOBAL",
                "GIT_CONFIG_NOSYSTEM",
                "GIT_TERMINAL_PROMPT",
                "LC_ALL",
                "PATH"
            ]
        );
    }
}
