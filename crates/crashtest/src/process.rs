//! Running one `pod` process and killing it with SIGKILL at a chosen point.

use std::fs::File;
use std::io::{BufRead, BufReader};
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::{Command, ExitStatus, Stdio};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::time::{Duration, Instant};

// A scripted session of a few hundred steps takes well under a second;
// a process silent this long is hung, and the harness says so instead of
// waiting forever.
const SILENCE_LIMIT: Duration = Duration::from_secs(60);

/// `pod` in an isolated environment under `root` (its `home`,
/// `pod-home`, `config` and `data` directories), run in `root/workspace`.
pub fn isolated_pod(pod: &Path, root: &Path) -> Command {
    let mut cmd = Command::new(pod);
    cmd.env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", root.join("home"))
        .env("POD_HOME", root.join("pod-home"))
        .env("XDG_CONFIG_HOME", root.join("config"))
        .env("XDG_DATA_HOME", root.join("data"))
        .env("NO_COLOR", "1")
        .current_dir(root.join("workspace"));
    cmd
}

/// When to kill a process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KillPoint {
    /// After reading this many NDJSON lines, then waiting `delay_us`.
    AfterEvents {
        /// Lines to read first (1-based).
        events: u64,
        /// Extra wait after that line, in microseconds.
        delay_us: u64,
    },
    /// This long after spawning, whatever was printed (may land before the
    /// session is open, or while a resume replays the log).
    AfterTime {
        /// Microseconds after spawn.
        us: u64,
    },
}

impl std::fmt::Display for KillPoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            KillPoint::AfterEvents { events, delay_us } => {
                write!(f, "after event {events} + {delay_us} us")
            }
            KillPoint::AfterTime { us } => write!(f, "{us} us after spawn"),
        }
    }
}

/// What a process did.
#[derive(Debug)]
pub struct RunOutcome {
    /// Complete NDJSON lines it printed (an unterminated last line dropped).
    pub lines: Vec<String>,
    /// Whether our SIGKILL ended it (not a natural exit that raced it).
    pub killed: bool,
    /// Its exit status.
    pub status: ExitStatus,
    /// Time from spawn to exit.
    pub elapsed: Duration,
}

impl RunOutcome {
    /// What is wrong when the process failed without our kill: its exit
    /// status and what it wrote to `stderr_file`.
    pub fn unexpected_exit(&self, stderr_file: &Path) -> Option<String> {
        (!self.killed && !self.status.success()).then(|| {
            let err = std::fs::read_to_string(stderr_file).unwrap_or_default();
            format!(
                "pod exited with {} without being killed: {err}",
                self.status
            )
        })
    }
}

/// Why a process could not be run or watched.
#[derive(Debug, thiserror::Error)]
pub enum ProcessError {
    /// Spawning, killing or waiting failed.
    #[error("cannot run {what}: {source}")]
    Io {
        /// What was being done.
        what: &'static str,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// The process printed nothing for [`SILENCE_LIMIT`].
    #[error("pod printed nothing for {0:?} and was killed: hung")]
    Hung(Duration),
}

fn io(what: &'static str) -> impl FnOnce(std::io::Error) -> ProcessError {
    move |source| ProcessError::Io { what, source }
}

/// Runs `cmd` (stdout is read line by line, stderr goes to `stderr_file`),
/// killing it at `point` if it is still running then.
pub fn run(
    mut cmd: Command,
    point: Option<KillPoint>,
    stderr_file: &Path,
) -> Result<RunOutcome, ProcessError> {
    let stderr = File::create(stderr_file).map_err(io("the stderr file"))?;
    let start = Instant::now();
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(stderr)
        .spawn()
        .map_err(io("pod"))?;
    let stdout = child.stdout.take().ok_or(ProcessError::Io {
        what: "pod's stdout",
        source: std::io::Error::other("not piped"),
    })?;
    // Lines arrive on a thread so the kill can also fire on a clock. An
    // unbounded channel: the reader must never block the child's writes.
    let (tx, rx) = mpsc::channel::<String>();
    let reader = std::thread::spawn(move || {
        let mut stdout = BufReader::new(stdout);
        let mut buf = Vec::new();
        loop {
            buf.clear();
            match stdout.read_until(b'\n', &mut buf) {
                Ok(0) | Err(_) => break,
                // A line cut by the kill was never printed in full.
                Ok(_) if buf.last() != Some(&b'\n') => break,
                Ok(_) => {
                    let line = String::from_utf8_lossy(&buf[..buf.len() - 1]).into_owned();
                    if tx.send(line).is_err() {
                        break;
                    }
                }
            }
        }
    });
    let deadline = match point {
        Some(KillPoint::AfterTime { us }) => Some(start + Duration::from_micros(us)),
        _ => None,
    };
    let mut lines = Vec::new();
    let mut sent_kill = false;
    let mut hung = false;
    loop {
        let wait = match deadline {
            Some(at) if !sent_kill => at.saturating_duration_since(Instant::now()),
            _ => SILENCE_LIMIT,
        };
        match rx.recv_timeout(wait) {
            Ok(line) => {
                lines.push(line);
                if let Some(KillPoint::AfterEvents { events, delay_us }) = point {
                    if !sent_kill && lines.len() as u64 >= events {
                        std::thread::sleep(Duration::from_micros(delay_us));
                        child.kill().map_err(io("kill"))?;
                        sent_kill = true;
                    }
                }
            }
            Err(RecvTimeoutError::Timeout) if deadline.is_some() && !sent_kill => {
                child.kill().map_err(io("kill"))?;
                sent_kill = true;
            }
            Err(RecvTimeoutError::Timeout) => {
                child.kill().map_err(io("kill"))?;
                hung = true;
                break;
            }
            Err(RecvTimeoutError::Disconnected) => break,
        }
    }
    let status = child.wait().map_err(io("wait"))?;
    let elapsed = start.elapsed();
    // The reader ends at EOF, which the exit brought.
    let _ = reader.join();
    if hung {
        return Err(ProcessError::Hung(SILENCE_LIMIT));
    }
    Ok(RunOutcome {
        lines,
        killed: sent_kill && status.signal() == Some(9),
        status,
        elapsed,
    })
}
