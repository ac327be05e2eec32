//! The sandbox around `bash`, against the real kernel: each test runs real
//! commands and checks what reached the disk or the network. These tests
//! need Landlock, which this project's machines have; without it they fail
//! (never skip), naming what is missing.

use crate::workspace_support::{symlink, Ws};
use pod_tools::sandbox::{support, Support};
use pod_tools::{SandboxMode, SandboxPolicy};
use serde_json::json;
use std::net::TcpListener;

fn require_landlock() {
    match support() {
        Support::Enforced { abi } => assert!(
            *abi >= 6,
            "these tests need Landlock ABI 6 or later (TCP rules, signal scoping); this kernel \
             has {abi}"
        ),
        Support::Unavailable(why) => panic!(
            "the sandbox tests need a kernel with Landlock (Linux 5.13+, lsm=landlock): {why}"
        ),
    }
}

fn ws(mode: SandboxMode, network: bool) -> Ws {
    require_landlock();
    Ws::sandboxed(SandboxPolicy { mode, network })
}

async fn bash(ws: &Ws, command: &str) -> (String, bool) {
    let out = ws.call("bash", json!({ "command": command })).await;
    (out.content, out.is_error)
}

#[tokio::test]
async fn workspace_write_keeps_writes_in_the_workspace_and_tmpdir() {
    let ws = ws(SandboxMode::WorkspaceWrite, false);
    let (out, failed) = bash(&ws, "touch ../outside/x").await;
    assert!(failed, "{out}");
    assert!(out.contains("Permission denied"), "{out}");
    assert!(
        out.contains(
            "[sandbox] This may have been refused by the sandbox (workspace-write, network off)"
        ),
        "{out}"
    );
    assert!(!ws.outside().join("x").exists());

    let (out, failed) = bash(
        &ws,
        "echo in > inside.txt && echo tmp > \"$TMPDIR/t.txt\" && cat \"$TMPDIR/t.txt\"",
    )
    .await;
    assert!(!failed, "{out}");
    assert_eq!(ws.get("inside.txt"), "in\n");
    assert_eq!(
        std::fs::read_to_string(ws.dir.path().join("tmp/t.txt")).unwrap(),
        "tmp\n"
    );
    // Reads are not confined in this mode.
    std::fs::write(ws.outside().join("notes.txt"), "outside").unwrap();
    let (out, failed) = bash(&ws, "cat ../outside/notes.txt").await;
    assert!(!failed && out.contains("outside"), "{out}");
}

#[tokio::test]
async fn a_symlink_out_of_the_workspace_does_not_carry_writes_out() {
    let ws = ws(SandboxMode::WorkspaceWrite, false);
    symlink(&ws.outside(), &ws.root().join("link"));
    let (out, failed) = bash(&ws, "echo x > link/escaped.txt").await;
    assert!(failed && out.contains("Permission denied"), "{out}");
    assert!(!ws.outside().join("escaped.txt").exists());
}

#[tokio::test]
async fn home_is_out_of_reach_for_writes() {
    let ws = ws(SandboxMode::WorkspaceWrite, false);
    let home = std::env::var("HOME").expect("HOME is set");
    let name = format!("pod-sandbox-test-{}", std::process::id());
    ws.put("data.txt", "data");
    let (out, failed) = bash(&ws, &format!("cp data.txt ~/{name}")).await;
    assert!(failed && out.contains("Permission denied"), "{out}");
    assert!(!std::path::Path::new(&home).join(&name).exists());
}

#[tokio::test]
async fn strict_limits_reads_to_the_workspace_and_system_paths() {
    let ws = ws(SandboxMode::Strict, false);
    std::fs::write(ws.outside().join("secret.txt"), "secret").unwrap();
    let (out, failed) = bash(&ws, "cat ../outside/secret.txt").await;
    assert!(failed && out.contains("Permission denied"), "{out}");
    assert!(
        !out.contains("secret\n") && !out.ends_with("secret"),
        "{out}"
    );
    assert!(out.contains("strict"), "{out}");
    // The commands themselves, the workspace and the temp dir work.
    ws.put("a.txt", "alpha");
    let (out, failed) = bash(
        &ws,
        "ls /usr/bin >/dev/null && cat a.txt && echo t > \"$TMPDIR/t\"",
    )
    .await;
    assert!(!failed && out.contains("alpha"), "{out}");
}

#[tokio::test]
async fn read_only_refuses_every_write() {
    let ws = ws(SandboxMode::ReadOnly, false);
    ws.put("a.txt", "alpha");
    let (out, failed) = bash(&ws, "echo more >> a.txt").await;
    assert!(failed && out.contains("Permission denied"), "{out}");
    assert!(out.contains("commands may not write files"), "{out}");
    assert_eq!(ws.get("a.txt"), "alpha");
    let (out, failed) = bash(&ws, "cat a.txt > /dev/null && wc -c < a.txt").await;
    assert!(!failed && out.contains('5'), "{out}");
}

#[tokio::test]
async fn network_off_refuses_tcp_and_udp_and_on_allows_them() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let connect = format!("exec 3<>/dev/tcp/127.0.0.1/{port} && echo connected");
    let udp = format!("exec 3<>/dev/udp/127.0.0.1/{port} && echo sent");

    let off = ws(SandboxMode::WorkspaceWrite, false);
    let (out, failed) = bash(&off, &connect).await;
    assert!(failed && !out.contains("connected"), "{out}");
    assert!(out.contains("Permission denied"), "{out}");
    assert!(out.contains("--network on"), "{out}");
    let (out, failed) = bash(&off, &udp).await;
    assert!(failed && !out.contains("sent"), "{out}");

    let on = ws(SandboxMode::WorkspaceWrite, true);
    let (out, failed) = bash(&on, &connect).await;
    assert!(!failed && out.contains("connected"), "{out}");
    let (out, failed) = bash(&on, &udp).await;
    assert!(!failed && out.contains("sent"), "{out}");
}

#[tokio::test]
async fn a_process_that_leaves_the_group_and_session_stays_confined() {
    let ws = ws(SandboxMode::WorkspaceWrite, false);
    // setsid, then a double fork: a new session, reparented to init. The
    // command waits for the marker so the test reads the outcome, not a race.
    let command = "setsid bash -c '( echo x > ../outside/escaped.txt; echo $? > done ) &' ; \
                   for i in $(seq 100); do [ -f done ] && break; sleep 0.1; done; cat done";
    let (out, _) = bash(&ws, command).await;
    assert!(ws.root().join("done").exists(), "{out}");
    assert_ne!(ws.get("done").trim(), "0", "{out}");
    assert!(!ws.outside().join("escaped.txt").exists());
}

#[tokio::test]
async fn commands_cannot_signal_processes_outside_the_sandbox() {
    let ws = ws(SandboxMode::WorkspaceWrite, false);
    // The parent of `bash` is this (unconfined) process: in a session, the
    // pod process.
    let (out, failed) = bash(&ws, "kill -0 $PPID").await;
    assert!(failed && out.contains("Operation not permitted"), "{out}");
    // Its own children are in its domain and can be signalled.
    let (out, failed) = bash(&ws, "sleep 5 & kill $! && wait $!; echo status $?").await;
    assert!(!failed && out.contains("status 143"), "{out}");
}

#[tokio::test]
async fn with_the_sandbox_off_nothing_is_confined_and_no_note_is_added() {
    let ws = Ws::sandboxed(SandboxPolicy {
        mode: SandboxMode::Off,
        network: true,
    });
    let (out, failed) = bash(&ws, "touch ../outside/x && ls /nonexistent-dir").await;
    assert!(failed, "{out}");
    assert!(ws.outside().join("x").exists());
    assert!(!out.contains("[sandbox]"), "{out}");
}

#[tokio::test]
async fn a_command_past_its_timeout_is_killed_with_its_children() {
    let ws = ws(SandboxMode::WorkspaceWrite, false);
    let out = ws
        .call(
            "bash",
            json!({"command": "sleep 1000 & echo $!; touch ../outside/late; wait", "timeout_secs": 1}),
        )
        .await;
    assert!(
        out.content.starts_with("timed out after 1s"),
        "{}",
        out.content
    );
    crate::workspace_bash::assert_background_child_died(&out.content);
    assert!(!ws.outside().join("late").exists());
}

#[tokio::test]
async fn private_paths_are_out_of_reach_of_commands_and_file_tools() {
    require_landlock();
    // One private directory beside the workspace (pod's home), one inside
    // it (a workspace at `~` holds pod's home).
    let ws = Ws::sandboxed_with_private(
        SandboxPolicy {
            mode: SandboxMode::WorkspaceWrite,
            network: false,
        },
        &["outside/pod-home", "ws/.pod"],
    );
    std::fs::write(ws.outside().join("pod-home/http-token"), "tok-outside").unwrap();
    std::fs::write(ws.root().join(".pod/log.jsonl"), "log-inside").unwrap();
    std::fs::write(ws.outside().join("public.txt"), "public").unwrap();
    ws.put("mine.txt", "mine");

    let (out, failed) = bash(
        &ws,
        "cat ../outside/pod-home/http-token; cat .pod/log.jsonl; ls .pod; \
         echo x > .pod/planted; echo x > ../outside/pod-home/planted; \
         cat ../outside/public.txt mine.txt",
    )
    .await;
    assert!(!failed, "the last command reads what is public: {out}");
    assert!(out.contains("Permission denied"), "{out}");
    assert!(
        !out.contains("tok-outside") && !out.contains("log-inside"),
        "{out}"
    );
    assert!(out.contains("public") && out.contains("mine"), "{out}");
    assert!(!ws.root().join(".pod/planted").exists());
    assert!(!ws.outside().join("pod-home/planted").exists());

    // The file tools refuse it by name and skip it when walking.
    let read = ws
        .call("read_file", json!({"path": ".pod/log.jsonl"}))
        .await;
    assert!(read.is_error, "{}", read.content);
    assert!(read.content.contains("pod's own data"), "{}", read.content);
    let write = ws
        .call("write_file", json!({"path": ".pod/x", "content": "x"}))
        .await;
    assert!(write.is_error && !ws.root().join(".pod/x").exists());
    for (tool, args) in [
        ("grep", json!({"pattern": "log-inside"})),
        ("glob", json!({"pattern": "**/*.jsonl"})),
        ("list_dir", json!({"path": "."})),
    ] {
        let out = ws.call(tool, args).await;
        assert!(!out.content.contains(".pod"), "{tool}: {}", out.content);
    }
}

#[tokio::test]
async fn other_processes_environment_and_command_lines_are_unreadable() {
    let ws = ws(SandboxMode::WorkspaceWrite, true);
    // A process outside the sandbox holding a secret in its environment
    // and command line, like a shell with an exported API key.
    let mut holder = std::process::Command::new("sleep")
        .arg("600")
        .env("HOLDER_API_KEY", "sk-holder-secret")
        .spawn()
        .unwrap();
    let command = format!(
        "cat /proc/{pid}/environ /proc/{pid}/cmdline; cat /proc/$PPID/environ; \
         tr '\\0' '\\n' < /proc/$PPID/environ | head -1; ls /proc | head -1; \
         cat /proc/loadavg >/dev/null && echo system-info-ok",
        pid = holder.id()
    );
    let (out, _) = bash(&ws, &command).await;
    holder.kill().unwrap();
    holder.wait().unwrap();
    assert!(!out.contains("sk-holder-secret"), "{out}");
    assert!(!out.contains("sleep600") && !out.contains("HOME="), "{out}");
    assert!(out.contains("Permission denied"), "{out}");
    // What describes the machine rather than a process stays readable.
    assert!(out.contains("system-info-ok"), "{out}");
}
