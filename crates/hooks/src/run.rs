//! Running one hook command: `sh -c COMMAND` in its own process group, the
//! event's JSON on stdin, its output read up to a cap, killed with all it
//! started when its time is up.

use crate::settings::HookCommand;
use serde_json::Value;
use std::path::Path;
use std::process::Stdio;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::process::Command;

/// What a hook may leave behind.
#[derive(Debug, Clone, Copy)]
pub struct RunLimits {
    /// Bytes kept of stdout and of stderr each; the rest is read and
    /// dropped so the hook never blocks on a full pipe.
    pub output_cap: usize,
}

impl Default for RunLimits {
    fn default() -> Self {
        Self {
            output_cap: 64 * 1024,
        }
    }
}

/// How a hook ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ran {
    /// It exited with this code.
    Exited {
        /// The exit code.
        code: i32,
        /// Its stdout (up to the cap, lossy UTF-8).
        stdout: String,
        /// Its stderr (up to the cap, lossy UTF-8).
        stderr: String,
    },
    /// It did not end by itself: a signal ended it, its time ran out, or it
    /// could not be started. Says which, in words.
    Failed(String),
}

/// Runs `hook` in `cwd` with `input` on stdin and `env` added to pod's
/// environment.
pub async fn run(
    hook: &HookCommand,
    input: &Value,
    cwd: &Path,
    env: &[(String, String)],
    limits: RunLimits,
) -> Ran {
    let mut command = Command::new("sh");
    command
        .arg("-c")
        .arg(&hook.command)
        .current_dir(cwd)
        .envs(env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        // Its own group: a timeout kills what it started too.
        .process_group(0)
        .kill_on_drop(true);
    let mut child = match command.spawn() {
        Ok(child) => child,
        Err(err) => return Ran::Failed(format!("it could not be started ({err})")),
    };
    let pid = child.id();
    let body = input.to_string();
    let stdin = child.stdin.take();
    let feed = async move {
        if let Some(mut stdin) = stdin {
            // A hook that does not read its input closes the pipe: fine.
            let _ = stdin.write_all(body.as_bytes()).await;
            let _ = stdin.shutdown().await;
        }
    };
    let stdout = child.stdout.take();
    let stderr = child.stderr.take();
    let cap = limits.output_cap;
    let work = async {
        let (_, out, err, status) = tokio::join!(
            feed,
            read_capped(stdout, cap),
            read_capped(stderr, cap),
            child.wait()
        );
        (out, err, status)
    };
    match tokio::time::timeout(hook.timeout, work).await {
        Ok((stdout, stderr, Ok(status))) => match status.code() {
            Some(code) => Ran::Exited {
                code,
                stdout,
                stderr,
            },
            None => Ran::Failed(format!("it was ended by a signal ({status})")),
        },
        Ok((_, _, Err(err))) => Ran::Failed(format!("it could not be waited for ({err})")),
        Err(_) => {
            if let Some(pid) = pid.and_then(|p| i32::try_from(p).ok()) {
                // SAFETY: kill(2) with a negative pid signals the process
                // group this hook leads; it touches no memory.
                unsafe {
                    libc::kill(-pid, libc::SIGKILL);
                }
            }
            Ran::Failed(format!(
                "it did not finish within its timeout of {} s and was killed",
                hook.timeout.as_secs_f64()
            ))
        }
    }
}

/// Reads `pipe` to its end, keeping the first `cap` bytes.
async fn read_capped(pipe: Option<impl AsyncRead + Unpin>, cap: usize) -> String {
    let Some(mut pipe) = pipe else {
        return String::new();
    };
    let mut kept = Vec::new();
    let mut buf = [0u8; 8192];
    loop {
        match pipe.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                let room = cap.saturating_sub(kept.len());
                kept.extend_from_slice(&buf[..n.min(room)]);
            }
        }
    }
    String::from_utf8_lossy(&kept).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::settings::OnError;
    use serde_json::json;
    use std::time::Duration;

    fn hook(command: &str, timeout_ms: u64) -> HookCommand {
        HookCommand {
            command: command.into(),
            timeout: Duration::from_millis(timeout_ms),
            on_error: OnError::Continue,
        }
    }

    #[tokio::test]
    async fn a_hook_reads_its_input_and_its_code_and_output_come_back() {
        let dir = tempfile::tempdir().unwrap();
        let ran = run(
            &hook("cat; echo oops >&2; exit 3", 10_000),
            &json!({"a": 1}),
            dir.path(),
            &[("X".into(), "y".into())],
            RunLimits::default(),
        )
        .await;
        assert_eq!(
            ran,
            Ran::Exited {
                code: 3,
                stdout: r#"{"a":1}"#.into(),
                stderr: "oops\n".into()
            }
        );
        let env = run(
            &hook("printf %s \"$X\"", 10_000),
            &json!({}),
            dir.path(),
            &[("X".into(), "y".into())],
            RunLimits::default(),
        )
        .await;
        assert!(
            matches!(env, Ran::Exited { ref stdout, .. } if stdout == "y"),
            "{env:?}"
        );
    }

    #[tokio::test]
    async fn output_is_capped_and_a_hanging_hook_is_killed_with_its_children() {
        let dir = tempfile::tempdir().unwrap();
        let big = run(
            &hook("head -c 100000 /dev/zero | tr '\\0' a", 10_000),
            &json!({}),
            dir.path(),
            &[],
            RunLimits { output_cap: 1000 },
        )
        .await;
        assert!(
            matches!(big, Ran::Exited { code: 0, ref stdout, .. } if stdout.len() == 1000),
            "{big:?}"
        );
        // A background child writes its pid, then waits: the timeout must
        // kill it with the hook (its process group).
        let pid_file = dir.path().join("child.pid");
        let command = format!(
            "(sh -c 'echo $$ > {}; exec sleep 30') & sleep 30",
            pid_file.display()
        );
        let hung = run(
            &hook(&command, 500),
            &json!({}),
            dir.path(),
            &[],
            RunLimits::default(),
        )
        .await;
        assert!(
            matches!(hung, Ran::Failed(ref why) if why.contains("timeout of 0.5 s")),
            "{hung:?}"
        );
        let pid = std::fs::read_to_string(&pid_file).expect("the child started");
        let stat = format!("/proc/{}/stat", pid.trim());
        // Gone, or a zombie waiting for its reaper: not running. SIGKILL
        // lands a moment after kill(2) returns: polled, a minute at most.
        let running = || {
            std::fs::read_to_string(&stat)
                .ok()
                .and_then(|s| {
                    s.rsplit(')')
                        .next()
                        .map(|rest| rest.trim_start().to_string())
                })
                .is_some_and(|rest| !rest.starts_with('Z'))
        };
        let mut polls = 0;
        while running() {
            assert!(polls < 6_000, "{stat} still runs");
            polls += 1;
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
}
