//! Running one command in its own process group, with capped output, a
//! timeout and cancellation. The whole group is killed when the command
//! ends, times out, is cancelled or the call is dropped, so no background
//! child outlives the call.

use super::super::limits::HeadTail;
use crate::sandbox::Prepared;
use parking_lot::Mutex;
use std::ffi::OsString;
use std::path::Path;
use std::process::{ExitStatus, Stdio};
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::process::Command;
use tokio_util::sync::CancellationToken;

/// How a command ended.
#[derive(Debug)]
pub enum Ending {
    /// It exited (with a code, or by a signal).
    Exited(ExitStatus),
    /// It ran past its timeout and was killed.
    TimedOut,
    /// The turn was cancelled and it was killed.
    Cancelled,
}

/// What a command did.
#[derive(Debug)]
pub struct Finished {
    /// How it ended.
    pub ending: Ending,
    /// Its standard output, capped.
    pub stdout: HeadTail,
    /// Its standard error, capped.
    pub stderr: HeadTail,
    /// A process outside the group kept the pipes open past the grace time.
    pub pipes_left_open: bool,
}

/// Where and how to run.
pub struct RunSpec<'a> {
    /// The command line given to `bash -c`.
    pub command: &'a str,
    /// Working directory.
    pub cwd: &'a Path,
    /// The whole environment.
    pub env: Vec<(OsString, OsString)>,
    /// Time limit.
    pub timeout: Duration,
    /// Bytes kept of each stream.
    pub output_max_bytes: usize,
    /// Wait for the pipes to close after the group is gone.
    pub pipe_grace: Duration,
    /// The sandbox restrictions, applied in the child before exec.
    pub sandbox: Prepared,
}

/// Kills the process group when dropped, so a call dropped mid-command
/// (the worker gave up waiting) still leaves nothing running.
struct GroupGuard(Option<i32>);

impl GroupGuard {
    fn kill(&mut self) {
        if let Some(pgid) = self.0.take() {
            // SAFETY: killpg has no memory effects; the group id is the pid of
            // the child we spawned as its group leader. ESRCH (group already
            // gone) is the expected failure and is ignored.
            unsafe {
                libc::killpg(pgid, libc::SIGKILL);
            }
        }
    }
}

impl Drop for GroupGuard {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Runs `spec.command`.
pub async fn run(spec: RunSpec<'_>, cancel: &CancellationToken) -> std::io::Result<Finished> {
    let mut command = Command::new("bash");
    command
        .arg("-c")
        .arg(spec.command)
        .current_dir(spec.cwd)
        .env_clear()
        .envs(spec.env)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        // Its own group, so the whole tree can be killed at once.
        .process_group(0)
        .kill_on_drop(true);
    let sandbox = Arc::new(spec.sandbox);
    if !sandbox.is_empty() {
        let sandbox = sandbox.clone();
        // SAFETY: runs in the child between fork and exec; `apply` makes
        // system calls only, on values built before the fork. Its error
        // fails the spawn: a command never runs less confined than asked.
        unsafe {
            command.pre_exec(move || sandbox.apply());
        }
    }
    let mut child = command.spawn()?;
    // The ruleset's descriptor is closed once the child has it.
    drop(sandbox);
    let mut guard = GroupGuard(child.id().and_then(|id| i32::try_from(id).ok()));
    let stdout = Arc::new(Mutex::new(HeadTail::new(spec.output_max_bytes)));
    let stderr = Arc::new(Mutex::new(HeadTail::new(spec.output_max_bytes)));
    let readers = [
        child
            .stdout
            .take()
            .map(|pipe| tokio::spawn(collect(pipe, stdout.clone()))),
        child
            .stderr
            .take()
            .map(|pipe| tokio::spawn(collect(pipe, stderr.clone()))),
    ];
    let ending = tokio::select! {
        status = child.wait() => Ending::Exited(status?),
        _ = tokio::time::sleep(spec.timeout) => Ending::TimedOut,
        _ = cancel.cancelled() => Ending::Cancelled,
    };
    // Background children die with the command: nothing of a call keeps
    // running unseen in a session meant to run for hours.
    guard.kill();
    if !matches!(ending, Ending::Exited(_)) {
        let _ = child.wait().await;
    }
    let mut pipes_left_open = false;
    for reader in readers.into_iter().flatten() {
        let abort = reader.abort_handle();
        if tokio::time::timeout(spec.pipe_grace, reader).await.is_err() {
            abort.abort();
            pipes_left_open = true;
        }
    }
    let stdout = stdout.lock().clone();
    let stderr = stderr.lock().clone();
    Ok(Finished {
        ending,
        stdout,
        stderr,
        pipes_left_open,
    })
}

async fn collect(mut pipe: impl AsyncRead + Unpin, into: Arc<Mutex<HeadTail>>) {
    // A read buffer, not an output cap: HeadTail bounds what is kept.
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        match pipe.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => into.lock().push(&buf[..n]),
        }
    }
}
