//! MCP servers in `pod run` and `pod resume`, with the reference servers
//! from npm (`@modelcontextprotocol/server-everything` and
//! `server-filesystem`, installed by scripts/test into target/mcp-servers).

use crate::support::*;
use serde_json::{json, Value};
use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::Stdio;

/// A reference server's executable; the test fails, saying how to install
/// them, when they are missing.
pub fn reference_server(bin: &str) -> PathBuf {
    let dirs = [
        std::env::var_os("POD_MCP_SERVERS").map(PathBuf::from),
        Some(PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../target/mcp-servers")),
    ];
    dirs.into_iter()
        .flatten()
        .map(|dir| dir.join("node_modules/.bin").join(bin))
        .find(|path| path.is_file())
        .unwrap_or_else(|| {
            panic!(
                "the MCP reference server {bin} is not installed: run ./scripts/test, or \
                 `npm install --prefix target/mcp-servers @modelcontextprotocol/server-everything \
                 @modelcontextprotocol/server-filesystem`"
            )
        })
}

/// An `mcpServers` file with the everything server (with a secret in its
/// env) and the filesystem server on the workspace.
fn mcp_file(env: &TestEnv, extra: Value) -> PathBuf {
    let mut servers = json!({
        "everything": {
            "command": reference_server("mcp-server-everything"),
            "args": ["stdio"],
            "env": {"SECRET_TOKEN": "hunter2"}
        },
        "fs": {
            "command": reference_server("mcp-server-filesystem"),
            "args": [env.workspace()]
        }
    });
    if let (Some(all), Some(more)) = (servers.as_object_mut(), extra.as_object()) {
        all.extend(more.clone());
    }
    env.script("mcp.json", &json!({ "mcpServers": servers }))
}

/// The result text of the call of `tool` in a `show --json` history.
fn result_of(history: &[Value], tool: &str) -> (String, bool) {
    let id = history
        .iter()
        .flat_map(|item| item["tool_calls"].as_array().cloned().unwrap_or_default())
        .find(|call| call["name"] == tool)
        .map(|call| call["id"].clone())
        .unwrap_or_else(|| panic!("no call of {tool}"));
    let result = history
        .iter()
        .find(|item| item["type"] == "tool_result" && item["call_id"] == id)
        .unwrap_or_else(|| panic!("no result for {tool}"));
    (
        result["content"].as_str().unwrap_or_default().to_string(),
        result["is_error"].as_bool().unwrap_or(false),
    )
}

#[test]
fn reference_servers_tools_run_in_a_session() {
    let env = TestEnv::new();
    std::fs::write(env.workspace().join("notes.txt"), "kept in the workspace\n").unwrap();
    let config = mcp_file(
        &env,
        json!({"broken": {"command": "/nonexistent/mcp-server"}}),
    );
    let script = env.script(
        "s.json",
        &script(vec![
            call("everything__echo", json!({"message": "hello mcp"})),
            call("everything__get-tiny-image", json!({})),
            call(
                "fs__read_text_file",
                json!({"path": env.workspace().join("notes.txt")}),
            ),
            call("fs__read_text_file", json!({"path": "/etc/hostname"})),
            say("Done."),
        ]),
    );
    let out = env
        .pod()
        .args(["run", "--json", "--yes", "--script"])
        .arg(&script)
        .arg("--mcp-config")
        .arg(&config)
        .arg("use the servers")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(
        stderr.contains("MCP server broken did not start") && stderr.contains("goes on"),
        "a server that fails to start is reported once: {stderr}"
    );
    let id = session_id(&ndjson(&out.stdout));
    let shown = env.show_json(&id);
    let history = shown["history"].as_array().unwrap();
    assert_eq!(
        result_of(history, "everything__echo"),
        ("Echo: hello mcp".to_string(), false)
    );
    let (image, _) = result_of(history, "everything__get-tiny-image");
    assert!(image.contains("[image: image/png, "), "{image}");
    assert!(
        image.len() < 2_000,
        "no base64 flood: {} bytes",
        image.len()
    );
    assert_eq!(
        result_of(history, "fs__read_text_file").0,
        "kept in the workspace\n"
    );
    let outside = history
        .iter()
        .filter(|item| item["type"] == "tool_result")
        .nth(3)
        .unwrap();
    assert_eq!(outside["is_error"], true, "{outside}");

    // The header records the servers, never their env values.
    let log = std::fs::read_to_string(env.pod_home().join("sessions").join(&id).join("log.jsonl"))
        .unwrap();
    let header = log.lines().next().unwrap();
    assert!(header.contains("mcp-server-everything") && header.contains("SECRET_TOKEN"));
    assert!(!log.contains("hunter2"), "an env value reached the log");
    assert!(
        !header.contains("\"broken\""),
        "only servers that started are recorded"
    );
}

#[test]
fn mcp_tools_ask_unless_allowed() {
    let env = TestEnv::new();
    let config = mcp_file(&env, json!({}));
    let script = env.script(
        "s.json",
        &script(vec![
            call("everything__echo", json!({"message": "x"})),
            say("Done."),
        ]),
    );
    let run = |extra: &[&str]| {
        let out = env
            .pod()
            .args(["run", "--json", "--script"])
            .arg(&script)
            .arg("--mcp-config")
            .arg(&config)
            .args(extra)
            .arg("task")
            .output()
            .unwrap();
        let id = session_id(&ndjson(&out.stdout));
        let shown = env.show_json(&id);
        result_of(shown["history"].as_array().unwrap(), "everything__echo")
    };
    // Nobody can answer on a pipe: the call that asks is refused.
    let (refused, is_error) = run(&[]);
    assert!(is_error, "{refused}");
    assert!(refused.contains("everything__echo"), "{refused}");
    assert_eq!(
        run(&["--allow", "everything__*"]),
        ("Echo: x".into(), false)
    );
    assert_eq!(
        run(&["--allow", "everything__echo"]),
        ("Echo: x".into(), false)
    );
    let (denied, is_error) = run(&["--yes", "--deny", "everything__*"]);
    assert!(is_error, "{denied}");
}

#[test]
fn a_killed_session_gets_its_servers_back_on_resume() {
    let env = TestEnv::new();
    // A mark in the servers' environment finds their processes.
    let mark = format!("pod-mcp-test-{}", std::process::id());
    let config = mcp_file(
        &env,
        json!({"marked": {
            "command": reference_server("mcp-server-everything"),
            "args": ["stdio"],
            "env": {"POD_TEST_MARK": mark}
        }}),
    );
    let script = env.script(
        "s.json",
        &script(vec![
            call(
                "everything__trigger-long-running-operation",
                json!({"duration": 60, "steps": 60}),
            ),
            call("everything__echo", json!({"message": "after the crash"})),
            say("Done."),
        ]),
    );
    let (mut child, _lines, id) = run_until_a_tool_runs(&env, &script, &config);
    assert!(!marked_processes(&mark).is_empty(), "the server runs");
    child.kill().unwrap();
    child.wait().unwrap();
    // pod died without stopping its servers: they see the end of their
    // input and exit.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while !marked_processes(&mark).is_empty() {
        assert!(
            std::time::Instant::now() < deadline,
            "MCP servers outlived a killed pod: {:?}",
            marked_processes(&mark)
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }

    // No --mcp-config: the recorded server is attached again.
    let out = env
        .pod()
        .args(["resume", "--json", "--yes", &id])
        .output()
        .unwrap();
    assert_success(&out);
    let shown = env.show_json(&id);
    let history = shown["history"].as_array().unwrap();
    let (interrupted, is_error) = result_of(history, "everything__trigger-long-running-operation");
    assert!(
        is_error && interrupted.contains("Interrupted"),
        "{interrupted}"
    );
    let results = history
        .iter()
        .filter(|item| item["type"] == "tool_result")
        .count();
    assert_eq!(
        results, 2,
        "one result per call, the killed one never re-run"
    );
    assert_eq!(
        result_of(history, "everything__echo"),
        ("Echo: after the crash".into(), false)
    );
}

/// Live (not zombie) processes whose environment holds `mark`.
pub fn marked_processes(mark: &str) -> Vec<u32> {
    let needle = format!("POD_TEST_MARK={mark}");
    std::fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .filter_map(Result::ok)
        .filter_map(|entry| entry.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            let environ = std::fs::read(format!("/proc/{pid}/environ")).unwrap_or_default();
            let zombie = std::fs::read_to_string(format!("/proc/{pid}/stat"))
                .map(|stat| stat.split_whitespace().nth(2) == Some("Z"))
                .unwrap_or(true);
            !zombie
                && environ
                    .split(|b| *b == 0)
                    .any(|var| var == needle.as_bytes())
        })
        .collect()
}

/// server-everything in its streamable-HTTP mode on a free loopback port;
/// killed when dropped.
pub(crate) struct HttpServer {
    child: std::process::Child,
    pub(crate) url: String,
}

impl HttpServer {
    pub(crate) fn start() -> Self {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let child = std::process::Command::new(reference_server("mcp-server-everything"))
            .arg("streamableHttp")
            .env("PORT", port.to_string())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(
                std::time::Instant::now() < deadline,
                "the HTTP server did not listen"
            );
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        Self {
            child,
            url: format!("http://127.0.0.1:{port}/mcp"),
        }
    }
}

impl Drop for HttpServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn a_streamable_http_server_serves_tools_and_its_headers_stay_secret() {
    let server = HttpServer::start();
    let env = TestEnv::new();
    let config = env.script(
        "mcp.json",
        &json!({"mcpServers": {"web": {
            "url": server.url,
            "headers": {"Authorization": "Bearer tok-hunter2", "X-Team": "pod"}
        }}}),
    );
    let script = env.script(
        "s.json",
        &script(vec![
            call("web__echo", json!({"message": "over http"})),
            call("web__get-sum", json!({"a": 2, "b": 3})),
            say("Done."),
        ]),
    );
    let out = env
        .pod()
        .args(["run", "--json", "--yes", "--script"])
        .arg(&script)
        .arg("--mcp-config")
        .arg(&config)
        .arg("task")
        .output()
        .unwrap();
    assert_success(&out);
    let id = session_id(&ndjson(&out.stdout));
    let shown = env.show_json(&id);
    let history = shown["history"].as_array().unwrap();
    assert_eq!(
        result_of(history, "web__echo"),
        ("Echo: over http".into(), false)
    );
    assert!(result_of(history, "web__get-sum").0.contains('5'));
    let log = std::fs::read_to_string(env.pod_home().join("sessions").join(&id).join("log.jsonl"))
        .unwrap();
    assert!(log.contains(&server.url) && log.contains("Authorization"));
    assert!(
        !log.contains("tok-hunter2"),
        "a header value reached the log"
    );
}

#[test]
fn a_profiles_servers_join_its_sessions_and_their_env_stays_out_of_the_log() {
    let env = TestEnv::new();
    let path = env.script(
        "s.json",
        &script(vec![
            call("prof__echo", json!({"message": "from the profile"})),
            say("Done."),
        ]),
    );
    env.config_file(&format!(
        "[profiles.tools]\nkind = \"scripted\"\nscript = {:?}\n\
         [profiles.tools.mcp_servers.prof]\ncommand = {:?}\nargs = [\"stdio\"]\n\
         env = {{ PROFILE_SECRET = \"hunter3\" }}\n",
        path.to_str().unwrap(),
        reference_server("mcp-server-everything").to_str().unwrap()
    ));
    let out = env
        .pod()
        .args([
            "run",
            "--json",
            "--profile",
            "tools",
            "--allow",
            "prof__*",
            "task",
        ])
        .output()
        .unwrap();
    assert_success(&out);
    let id = session_id(&ndjson(&out.stdout));
    let shown = env.show_json(&id);
    assert_eq!(
        result_of(shown["history"].as_array().unwrap(), "prof__echo"),
        ("Echo: from the profile".into(), false)
    );
    let log = std::fs::read_to_string(env.pod_home().join("sessions").join(&id).join("log.jsonl"))
        .unwrap();
    assert!(log.contains("PROFILE_SECRET") && !log.contains("hunter3"));
}

#[test]
fn ctrl_c_stops_the_sessions_servers() {
    let env = TestEnv::new();
    let mark = format!("pod-mcp-ctrl-c-{}", std::process::id());
    let config = env.script(
        "mcp.json",
        &json!({"mcpServers": {"marked": {
            "command": reference_server("mcp-server-everything"),
            "args": ["stdio"],
            "env": {"POD_TEST_MARK": mark}
        }}}),
    );
    let script = env.script(
        "s.json",
        &script(vec![
            call(
                "marked__trigger-long-running-operation",
                json!({"duration": 60, "steps": 60}),
            ),
            say("Done."),
        ]),
    );
    // The output is kept open until the end: a closed stdout is an exit of
    // its own.
    let (mut child, lines, _) = run_until_a_tool_runs(&env, &script, &config);
    assert!(!marked_processes(&mark).is_empty());
    let status = std::process::Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let rest: Vec<String> = lines.map_while(Result::ok).collect();
    let exit = child.wait().unwrap();
    assert_eq!(exit.code(), Some(130), "interrupted: {rest:?}");
    // pod stopped its servers before it exited.
    assert!(
        marked_processes(&mark).is_empty(),
        "{:?}",
        marked_processes(&mark)
    );
}

/// `pod run --json --yes` with `script` and the servers of `config`, read
/// until its first tool call started: the child, the rest of its output
/// (kept open), and the session id.
fn run_until_a_tool_runs(
    env: &TestEnv,
    script: &std::path::Path,
    config: &std::path::Path,
) -> (
    std::process::Child,
    std::io::Lines<BufReader<std::process::ChildStdout>>,
    String,
) {
    let mut child = env
        .pod_process()
        .args(["run", "--json", "--yes", "--script"])
        .arg(script)
        .arg("--mcp-config")
        .arg(config)
        .arg("task")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut id = String::new();
    for line in lines.by_ref() {
        let event: Value = serde_json::from_str(&line.unwrap()).unwrap();
        if event["event"] == "session_started" {
            id = event["session_id"].as_str().unwrap().to_string();
        }
        if event["event"] == "tool_call_started" {
            break;
        }
    }
    (child, lines, id)
}

#[test]
fn a_server_gets_only_the_environment_its_config_names() {
    let env = TestEnv::new();
    let config = mcp_file(&env, json!({}));
    let script = env.script(
        "s.json",
        &script(vec![call("everything__get-env", json!({})), say("Done.")]),
    );
    let out = env
        .pod()
        .env("OPENAI_API_KEY", "sk-pod-key-9001")
        .env("POD_EXTRA_SETTING", "pod-only")
        .args(["run", "--json", "--yes", "--script"])
        .arg(&script)
        .arg("--mcp-config")
        .arg(&config)
        .arg("look at the environment")
        .output()
        .unwrap();
    assert_success(&out);
    let id = session_id(&ndjson(&out.stdout));
    let (text, failed) = result_of(
        env.show_json(&id)["history"].as_array().unwrap(),
        "everything__get-env",
    );
    assert!(!failed, "{text}");
    let seen: Value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}: {text}"));
    assert_eq!(
        seen["SECRET_TOKEN"], "hunter2",
        "what its config names: {seen}"
    );
    assert!(
        seen["PATH"].is_string() && seen["HOME"].is_string(),
        "{seen}"
    );
    for withheld in [
        "OPENAI_API_KEY",
        "POD_EXTRA_SETTING",
        "POD_HOME",
        "XDG_CONFIG_HOME",
    ] {
        assert!(
            seen.get(withheld).is_none(),
            "{withheld} reached the server: {seen}"
        );
    }
}
