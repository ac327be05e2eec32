//! bash: output and exit code, caps, scrubbed environment, and the process
//! group killed on timeout and cancel.

use crate::workspace_support::Ws;
use pod_tools::workspace::bash::is_secret;
use pod_tools::Limits;
use serde_json::json;
use std::io::Read;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// Whether process `pid` has exited (gone, or a zombie waiting for init).
/// Waits (up to ten seconds) for `pid` to exit, by the kernel's word: a
/// pidfd turns readable when the process is gone. Its pipes close a moment
/// before that, while it is still on its way out.
fn wait_for_exit(pid: i32) -> bool {
    // SAFETY: plain syscalls on an fd this function owns and closes.
    unsafe {
        let fd = libc::syscall(libc::SYS_pidfd_open, pid, 0) as libc::c_int;
        if fd < 0 {
            // Already reaped: no such process.
            return true;
        }
        let mut poll = libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        };
        let ready = libc::poll(&mut poll, 1, 10_000);
        libc::close(fd);
        ready == 1 || has_exited(pid)
    }
}

fn has_exited(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        Ok(stat) => {
            let state = stat.rsplit(')').next().unwrap_or("").trim_start();
            state.starts_with('Z') || state.starts_with('X')
        }
    }
}

#[tokio::test]
async fn runs_in_the_workspace_and_reports_output_and_exit_code() {
    let ws = Ws::new();
    ws.put("here.txt", "");
    let out = ws
        .call("bash", json!({"command": "ls; pwd; echo oops >&2"}))
        .await;
    assert!(!out.is_error, "{}", out.content);
    let root = ws.root().canonicalize().unwrap();
    assert_eq!(
        out.content,
        format!(
            "exit code 0\n--- stdout ---\nhere.txt\n{}\n--- stderr ---\noops",
            root.display()
        )
    );
    let out = ws.call("bash", json!({"command": "exit 3"})).await;
    assert!(out.is_error);
    assert_eq!(out.content, "exit code 3\n(no output)");
    let out = ws.call("bash", json!({"command": "kill -TERM $$"})).await;
    assert!(out.is_error);
    assert!(
        out.content.starts_with("killed by signal 15"),
        "{}",
        out.content
    );
}

#[tokio::test]
async fn refuses_empty_commands_and_zero_timeouts() {
    let ws = Ws::new();
    assert!(ws
        .err("bash", json!({"command": "  "}))
        .await
        .contains("empty"));
    let err = ws
        .err("bash", json!({"command": "true", "timeout_secs": 0}))
        .await;
    assert!(err.contains("at least 1"), "{err}");
    // Past the documented maximum is an error the model can act on, not a
    // silent cut.
    let err = ws
        .err("bash", json!({"command": "true", "timeout_secs": 601}))
        .await;
    assert!(
        err.contains("timeout_secs 601 is more than the maximum of 600"),
        "{err}"
    );
}

#[tokio::test]
async fn long_output_keeps_head_and_tail() {
    let ws = Ws::with_limits(Limits {
        bash_output_max_bytes: 20,
        ..Limits::default()
    });
    let out = ws
        .ok("bash", json!({"command": "echo START; seq 1 1000 >/dev/null; printf 'x%.0s' $(seq 1 100); echo; echo END"}))
        .await;
    assert!(out.contains("--- stdout ---\nSTART\nxxxx"), "{out}");
    assert!(out.contains("bytes omitted from the middle"), "{out}");
    assert!(out.ends_with("xxxxx\nEND"), "{out}");
}

#[tokio::test]
async fn the_environment_is_scrubbed_of_secrets() {
    assert!(is_secret("OPENAI_API_KEY"));
    assert!(is_secret("ANTHROPIC_API_KEY"));
    assert!(is_secret("DEEPSEEK_API_KEY"));
    assert!(is_secret("GITHUB_TOKEN"));
    assert!(is_secret("my_service_secret"));
    assert!(is_secret("POD_HOME"));
    for kept in ["PATH", "HOME", "LANG", "TERM", "CARGO_HOME"] {
        assert!(!is_secret(kept), "{kept}");
    }
    let scrubbed = pod_tools::workspace::scrub_env([
        ("PATH".into(), "/bin".into()),
        ("OPENAI_API_KEY".into(), "sk-x".into()),
    ]);
    assert_eq!(scrubbed, vec![("PATH".into(), "/bin".into())]);
    // The child sees the scrubbed environment (the test process's PATH and
    // HOME are there; pod's settings are not).
    let ws = Ws::new();
    let out = ws
        .ok(
            "bash",
            json!({"command": "env | cut -d= -f1 | grep -E '^(PATH|POD_.*|.*_API_KEY)$' | sort"}),
        )
        .await;
    assert_eq!(out, "exit code 0\n--- stdout ---\nPATH");
}

#[tokio::test]
async fn a_timeout_kills_the_whole_process_group() {
    let ws = Ws::new();
    // The background sleep keeps the output pipe open: the call only returns
    // once it is dead, and its pid is the first line of stdout.
    let out = ws
        .call(
            "bash",
            json!({"command": "sleep 1000 & echo $!; wait", "timeout_secs": 1}),
        )
        .await;
    assert!(out.is_error);
    assert!(
        out.content.starts_with("timed out after 1s"),
        "{}",
        out.content
    );
    assert_background_child_died(&out.content);
}

/// The first line of stdout is a background child's pid: it must be gone.
pub(crate) fn assert_background_child_died(content: &str) {
    let pid: i32 = content
        .split("--- stdout ---\n")
        .nth(1)
        .and_then(|s| s.lines().next())
        .and_then(|s| s.trim().parse().ok())
        .expect("pid on stdout");
    assert!(
        wait_for_exit(pid),
        "background child {pid} survived the timeout"
    );
}

#[tokio::test]
async fn cancel_mid_command_kills_the_process_group() {
    let ws = Ws::new();
    let fifo = ws.dir.path().join("ready");
    let status = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap();
    assert!(status.success());
    let cancel = CancellationToken::new();
    let command = format!("sleep 1000 & echo $! > {}; wait", fifo.display());
    let call = {
        let tools = ws.tools.clone();
        let cancel = cancel.clone();
        tokio::spawn(async move {
            let tool = tools.get("bash").expect("bash");
            let ctx = pod_worker::ToolContext {
                call_id: "c".into(),
                cancel,
            };
            tool.call_json(&json!({"command": command}).to_string(), ctx)
                .await
        })
    };
    // Opening the FIFO blocks until the command writes the child's pid.
    let pid: i32 = tokio::task::spawn_blocking(move || {
        let mut text = String::new();
        std::fs::File::open(&fifo)
            .unwrap()
            .read_to_string(&mut text)
            .unwrap();
        text.trim().parse().unwrap()
    })
    .await
    .unwrap();
    cancel.cancel();
    let out = tokio::time::timeout(Duration::from_secs(60), call)
        .await
        .expect("the call ends after cancel")
        .unwrap();
    assert!(out.is_error);
    assert!(out.content.starts_with("cancelled"), "{}", out.content);
    // The sleep's stdout is the call's pipe, and the call returns only once
    // that pipe closed: by then the group kill has landed.
    assert!(
        wait_for_exit(pid),
        "background child {pid} survived the cancel"
    );
}
