//! Running a command of the operator's (a check that decides whether a run
//! is done) the way `bash` runs the model's: in the workspace, under the
//! session's sandbox, with the scrubbed environment, capped output, a
//! timeout and cancellation. The operator wrote it, so it needs no
//! approval; it never runs less confined than the model's commands.

use super::process::{run, Ending, RunSpec};
use super::scrub_env;
use crate::sandbox::SandboxError;
use crate::workspace::Workspace;
use std::os::unix::process::ExitStatusExt;
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

/// How a command ended, and the end of what it printed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommandRun {
    /// Its exit code, when it exited.
    pub exit_code: Option<i32>,
    /// The signal that ended it, when one did.
    pub signal: Option<i32>,
    /// It ran past its timeout and was killed.
    pub timed_out: bool,
    /// The run was cancelled and it was killed.
    pub cancelled: bool,
    /// Standard output, then standard error, each capped (head and tail).
    pub output: String,
    /// How long it ran.
    pub duration: Duration,
}

impl CommandRun {
    /// Whether it exited with code 0.
    pub fn passed(&self) -> bool {
        self.exit_code == Some(0)
    }
}

/// Why a command could not be run at all.
#[derive(Debug, thiserror::Error)]
pub enum CommandError {
    /// The sandbox refused to set up (strict where it cannot be enforced).
    #[error("it cannot run under the session's sandbox: {0}")]
    Sandbox(#[from] SandboxError),
    /// `bash` could not be started.
    #[error("bash could not be started: {0}")]
    Start(#[from] std::io::Error),
}

/// Runs `command` with `bash -c` in `workspace`'s root under its sandbox,
/// keeping `output_max_bytes` of each stream.
pub async fn run_command(
    workspace: &Workspace,
    command: &str,
    timeout: Duration,
    output_max_bytes: usize,
    cancel: &CancellationToken,
) -> Result<CommandRun, CommandError> {
    let sandbox = workspace.sandbox();
    let prepared = sandbox.prepare()?;
    let mut env = scrub_env(std::env::vars_os());
    if let Some(tmpdir) = sandbox.tmpdir() {
        env.retain(|(name, _)| name != "TMPDIR");
        env.push(("TMPDIR".into(), tmpdir.as_os_str().to_owned()));
    }
    let spec = RunSpec {
        command,
        cwd: workspace.root().path(),
        env,
        timeout,
        output_max_bytes,
        pipe_grace: workspace.limits().bash_pipe_grace,
        sandbox: prepared,
    };
    let started = Instant::now();
    let finished = run(spec, cancel).await?;
    let mut output = String::new();
    for stream in [&finished.stdout, &finished.stderr] {
        if stream.total() > 0 {
            if !output.is_empty() && !output.ends_with('\n') {
                output.push('\n');
            }
            output.push_str(&stream.render());
        }
    }
    let (exit_code, signal) = match &finished.ending {
        Ending::Exited(status) => (status.code(), status.signal()),
        _ => (None, None),
    };
    Ok(CommandRun {
        exit_code,
        signal,
        timed_out: matches!(finished.ending, Ending::TimedOut),
        cancelled: matches!(finished.ending, Ending::Cancelled),
        output,
        duration: started.elapsed(),
    })
}
