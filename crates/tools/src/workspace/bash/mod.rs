//! The `bash` tool: runs a command in the workspace with a timeout, capped
//! output and a scrubbed environment.

mod command;
mod env;
mod process;

pub use command::{run_command, CommandError, CommandRun};
pub use env::{is_secret, scrub_env};

use super::Workspace;
use crate::sandbox::refusal_note;
use pod_worker::{Tool, ToolContext, ToolOutput};
use process::{run, Ending, Finished, RunSpec};
use serde::Deserialize;
use serde_json::{json, Value};
use std::os::unix::process::ExitStatusExt;
use std::sync::Arc;
use std::time::Duration;

/// The tool's name.
pub const BASH: &str = "bash";

/// Arguments of `bash`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BashArgs {
    /// The command line.
    pub command: String,
    /// Timeout in seconds.
    #[serde(default)]
    pub timeout_secs: Option<u64>,
}

/// Runs shell commands in the workspace.
#[derive(Clone, Debug)]
pub struct BashTool {
    workspace: Workspace,
}

impl BashTool {
    /// The tool over `workspace`.
    pub fn new(workspace: Workspace) -> Self {
        Self { workspace }
    }
}

#[async_trait::async_trait]
impl Tool for BashTool {
    type Args = BashArgs;

    fn name(&self) -> &str {
        BASH
    }

    fn description(&self) -> String {
        let limits = self.workspace.limits();
        format!(
            "Run a command with `bash -c` in the workspace root (the working directory is the \
             root at every call; use `cd dir && cmd` for another). No input is available, so \
             use non-interactive flags. Timeout: {}s by default, at most {}s (timeout_secs). \
             The command's whole process group is killed when it ends or times out, so \
             background processes do not outlive the call. Each of stdout and stderr is capped \
             at {} bytes (its start and end are kept). Use read_file, edit_file, grep and glob \
             rather than cat, sed or find for files.",
            limits.bash_default_timeout.as_secs(),
            limits.bash_max_timeout.as_secs(),
            limits.bash_output_max_bytes
        ) + &sandbox_note(&self.workspace.sandbox().policy())
    }

    fn parameters(&self) -> Arc<Value> {
        // Not shared: the maximum timeout is the workspace's.
        Arc::new(json!({
            "type": "object",
            "properties": {
                "command": {"type": "string", "description": "The command line."},
                "timeout_secs": {"type": "integer", "minimum": 1, "maximum": self.workspace.limits().bash_max_timeout.as_secs()}
            },
            "required": ["command"],
            "additionalProperties": false
        }))
    }

    async fn call(&self, args: BashArgs, ctx: ToolContext) -> ToolOutput {
        if args.command.trim().is_empty() {
            return ToolOutput::error("bash failed: the command is empty.");
        }
        let limits = self.workspace.limits();
        let timeout = match args.timeout_secs {
            Some(0) => {
                return ToolOutput::error("bash failed: timeout_secs must be at least 1.");
            }
            Some(secs) if Duration::from_secs(secs) > limits.bash_max_timeout => {
                return ToolOutput::error(format!(
                    "bash failed: timeout_secs {secs} is more than the maximum of {}. Pass at \
                     most that, or split the command into shorter steps.",
                    limits.bash_max_timeout.as_secs()
                ));
            }
            Some(secs) => Duration::from_secs(secs),
            None => limits.bash_default_timeout,
        };
        // Its descriptors from the process's share for tools: past it, the
        // call waits for others to end rather than fail to start.
        let _files = tokio::select! {
            files = crate::files::hold(crate::files::BASH_FILES) => files,
            _ = ctx.cancel.cancelled() => return ToolOutput::error("bash cancelled before it started."),
        };
        let sandbox = self.workspace.sandbox();
        let prepared = match sandbox.prepare() {
            Ok(prepared) => prepared,
            Err(err) => return ToolOutput::error(format!("bash refused: {err}.")),
        };
        let mut env = scrub_env(std::env::vars_os());
        if let Some(tmpdir) = sandbox.tmpdir() {
            env.retain(|(name, _)| name != "TMPDIR");
            env.push(("TMPDIR".into(), tmpdir.as_os_str().to_owned()));
        }
        let spec = RunSpec {
            command: &args.command,
            cwd: self.workspace.root().path(),
            env,
            timeout,
            output_max_bytes: limits.bash_output_max_bytes,
            pipe_grace: limits.bash_pipe_grace,
            sandbox: prepared,
        };
        match run(spec, &ctx.cancel).await {
            Ok(finished) => {
                let mut output = report(finished, timeout);
                if output.is_error {
                    if let Some(note) = refusal_note(&sandbox.policy(), &output.content) {
                        output.content.push('\n');
                        output.content.push_str(&note);
                    }
                }
                output
            }
            Err(err) if !sandbox.policy().is_enforced() => ToolOutput::error(format!(
                "bash failed: could not start `bash` ({err}). Is bash installed and on PATH?"
            )),
            Err(err) => ToolOutput::error(format!(
                "bash failed: could not start `bash` in its sandbox ({}): {err}. Is bash \
                 installed and on PATH?",
                sandbox.policy().describe()
            )),
        }
    }
}

/// What the model is told up front about the sandbox, if there is one.
fn sandbox_note(policy: &crate::sandbox::SandboxPolicy) -> String {
    if !policy.is_enforced() {
        return String::new();
    }
    format!(
        " Commands run in a kernel sandbox ({}); what it refuses fails with \"Permission \
         denied\" or \"Operation not permitted\".",
        policy.describe()
    )
}

fn report(finished: Finished, timeout: Duration) -> ToolOutput {
    let (status_line, is_error) = match &finished.ending {
        Ending::Exited(status) => match (status.code(), status.signal()) {
            (Some(0), _) => ("exit code 0".to_string(), false),
            (Some(code), _) => (format!("exit code {code}"), true),
            (None, Some(signal)) => (format!("killed by signal {signal}"), true),
            (None, None) => ("ended without an exit code".to_string(), true),
        },
        Ending::TimedOut => (
            format!(
                "timed out after {}s; the command and its process group were killed. Output so \
                 far is below. Run it with a larger timeout_secs, or split it into shorter steps",
                timeout.as_secs()
            ),
            true,
        ),
        Ending::Cancelled => (
            "cancelled: the turn was cancelled and the command's process group was killed".into(),
            true,
        ),
    };
    let mut out = status_line;
    if finished.pipes_left_open {
        out.push_str(
            "\n(a process that left the command's process group kept its output open; the \
             output may be incomplete)",
        );
    }
    for (name, stream) in [("stdout", &finished.stdout), ("stderr", &finished.stderr)] {
        if stream.total() > 0 {
            out.push_str(&format!("\n--- {name} ---\n"));
            out.push_str(stream.render().trim_end_matches('\n'));
        }
    }
    if finished.stdout.total() == 0 && finished.stderr.total() == 0 {
        out.push_str("\n(no output)");
    }
    ToolOutput {
        content: out,
        is_error,
        meta: None,
    }
}
