//! The test harness: an isolated home for the `pod` binary, scripts, and
//! readers for its JSON output.

use assert_cmd::Command;
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use tempfile::TempDir;

/// An isolated environment: POD_HOME, XDG dirs, HOME and a workspace, all
/// inside one temporary directory that is removed on drop.
pub struct TestEnv {
    dir: TempDir,
}

impl TestEnv {
    /// A fresh, empty environment.
    pub fn new() -> Self {
        let dir = tempfile::tempdir().expect("temp dir");
        for sub in ["home", "pod-home", "config", "data", "workspace"] {
            std::fs::create_dir_all(dir.path().join(sub)).expect("mkdir");
        }
        // As pod makes it: an open POD_HOME is warned about.
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(
            dir.path().join("pod-home"),
            std::fs::Permissions::from_mode(0o700),
        )
        .expect("chmod");
        Self { dir }
    }

    /// The sessions' home.
    pub fn pod_home(&self) -> PathBuf {
        self.dir.path().join("pod-home")
    }

    /// The agent's workspace.
    pub fn workspace(&self) -> PathBuf {
        self.dir.path().join("workspace")
    }

    /// `pod` with the environment set; the real home is never touched.
    pub fn pod(&self) -> Command {
        Command::from_std(self.pod_process())
    }

    /// The same as a plain process, for tests that read its output live.
    pub fn pod_process(&self) -> std::process::Command {
        let mut cmd = std::process::Command::new(assert_cmd::cargo::cargo_bin!("pod"));
        cmd.env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", self.dir.path().join("home"))
            .env("POD_HOME", self.pod_home())
            .env("XDG_CONFIG_HOME", self.dir.path().join("config"))
            .env("XDG_DATA_HOME", self.dir.path().join("data"))
            .env("NO_COLOR", "1")
            .current_dir(self.workspace());
        // POD_TEST_LOG=FILTER shows the processes' logs when debugging a test.
        if let Some(filter) = std::env::var_os("POD_TEST_LOG") {
            cmd.env("RUST_LOG", filter);
        }
        cmd
    }

    /// `$XDG_CONFIG_HOME/pod`, created.
    pub fn config_dir(&self) -> PathBuf {
        let dir = self.dir.path().join("config").join("pod");
        std::fs::create_dir_all(&dir).expect("mkdir");
        dir
    }

    /// Writes `$XDG_CONFIG_HOME/pod/config.toml`.
    pub fn config_file(&self, toml: &str) {
        std::fs::write(self.config_dir().join("config.toml"), toml).expect("write config");
    }

    /// Writes a script file and returns its path.
    pub fn script(&self, name: &str, script: &Value) -> PathBuf {
        let path = self.dir.path().join(name);
        std::fs::write(&path, serde_json::to_vec_pretty(script).expect("json")).expect("write");
        path
    }

    /// `pod show ID --json`, parsed.
    pub fn show_json(&self, id: &str) -> Value {
        let out = self
            .pod()
            .args(["show", id, "--json"])
            .output()
            .expect("run");
        assert_success(&out);
        serde_json::from_slice(&out.stdout).expect("show --json is one JSON document")
    }

    /// `pod sessions --json`, parsed.
    pub fn sessions_json(&self) -> Vec<Value> {
        let out = self
            .pod()
            .args(["sessions", "--json"])
            .output()
            .expect("run");
        assert_success(&out);
        serde_json::from_slice(&out.stdout).expect("sessions --json is a JSON array")
    }
}

/// A todo as `todo_write` takes it.
pub fn todo(id: &str, status: &str) -> Value {
    json!({"id": id, "content": format!("Step {id}"), "status": status})
}

/// A script step calling `todo_write` with `todos`.
pub fn write_todos(todos: &[Value]) -> Value {
    json!({"tool_calls": [{"name": "todo_write", "arguments": {"todos": todos}}]})
}

/// A script step calling one tool with `arguments`.
pub fn call(name: &str, arguments: Value) -> Value {
    json!({"tool_calls": [{"name": name, "arguments": arguments}]})
}

/// A script step answering with text only.
pub fn say(text: &str) -> Value {
    json!({ "text": text })
}

/// A script of `steps`.
pub fn script(steps: Vec<Value>) -> Value {
    json!({ "model": "scripted-test", "steps": steps })
}

/// The plan a..=c with `done` items completed and the next in progress.
pub fn plan(done: usize) -> Vec<Value> {
    ["a", "b", "c"]
        .iter()
        .enumerate()
        .map(|(i, id)| {
            let status = if i < done {
                "completed"
            } else if i == done {
                "in_progress"
            } else {
                "pending"
            };
            todo(id, status)
        })
        .collect()
}

/// Fails the test with the command's stderr unless it exited with success.
#[track_caller]
pub fn assert_success(out: &std::process::Output) {
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// NDJSON lines of a `--json` run.
pub fn ndjson(stdout: &[u8]) -> Vec<Value> {
    String::from_utf8_lossy(stdout)
        .lines()
        .map(|line| serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line}")))
        .collect()
}

/// The events named `name`.
pub fn events<'a>(lines: &'a [Value], name: &str) -> Vec<&'a Value> {
    lines.iter().filter(|l| l["event"] == name).collect()
}

/// The session id a `--json` run announced first.
pub fn session_id(lines: &[Value]) -> String {
    let first = lines.first().expect("some output");
    assert_eq!(first["event"], "session_started");
    first["session_id"].as_str().expect("id").to_string()
}

/// Statuses of the todos in a JSON list.
pub fn statuses(todos: &Value) -> Vec<String> {
    todos
        .as_array()
        .expect("todo array")
        .iter()
        .map(|t| t["status"].as_str().unwrap_or_default().to_string())
        .collect()
}

/// Whether `path` exists (helper for log checks).
pub fn exists(path: &Path) -> bool {
    path.exists()
}

/// The workspace's own MCP test server (`tests/mcp_server.rs`, package
/// pod-tests), beside the `pod` binary: `cargo test --workspace` builds
/// it; the test fails, saying how to build it, when it is missing.
pub fn mcp_test_server() -> PathBuf {
    let pod = PathBuf::from(assert_cmd::cargo::cargo_bin!("pod"));
    let server = pod.with_file_name("mcp-test-server");
    assert!(
        server.is_file(),
        "{} is not built: run `cargo build -p pod-tests --bin mcp-test-server` \
         (`cargo test --workspace` and ./scripts/test build it)",
        server.display()
    );
    server
}

/// An `mcpServers` file at `path` naming the MCP test server `name`, with
/// `env` for it.
pub fn mcp_test_config(path: &Path, name: &str, env: Value) -> PathBuf {
    let servers = json!({"mcpServers": {name: {"command": mcp_test_server(), "env": env}}});
    std::fs::write(path, servers.to_string()).expect("write the MCP config");
    path.to_path_buf()
}
