//! The trust boundaries of `pod serve --http`, through the real binary and
//! the real kernel: what an API client may ask for is capped by what the
//! server was started with; a bad token file stops it; slow, numerous or
//! oversized requests get bounded, JSON answers; a loopback server answers
//! only for its own names; and a session's commands reach neither the
//! token, nor other sessions' logs, nor the server's keys.

use crate::http::{is_record_text, writing_script, Server};
use crate::support::*;
use serde_json::{json, Value};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

/// `pod serve --http` with `flags` after `serve`, on `script`.
fn server(env: &TestEnv, script: &Value, flags: &[&str]) -> Server {
    let path = env.script("serve-script.json", script);
    let mut command = env.pod_process();
    command.arg("--script").arg(path).args(flags);
    Server::start_with(command, env)
}

async fn create(server: &Server, body: Value) -> (u16, Value) {
    server.post("/sessions", &body.to_string()).await
}

#[tokio::test]
async fn requests_may_narrow_what_the_server_allows_and_never_widen_it() {
    let env = TestEnv::new();
    let server = server(&env, &writing_script(), &[]);
    let ws = env.workspace();
    let widening = [
        (json!({"yes": true}), "approval."),
        (json!({"allow": ["write_file"]}), "approval.write_file"),
        (json!({"sandbox": "off"}), "sandbox"),
        (json!({"network": true}), "network"),
        (json!({"workspace": "/"}), "workspace"),
        (json!({"workspace": env.pod_home()}), "workspace"),
    ];
    for (fields, setting) in widening {
        let mut body = json!({"task": "t", "workspace": ws});
        for (key, value) in fields.as_object().unwrap() {
            body[key] = value.clone();
        }
        let (status, answer) = create(&server, body.clone()).await;
        assert_eq!(status, 403, "{body}: {answer}");
        assert!(
            answer["setting"].as_str().unwrap().starts_with(setting),
            "{body}: {answer}"
        );
        assert!(answer["error"].as_str().is_some(), "{answer}");
    }
    assert!(env.sessions_json().is_empty(), "nothing was created");
    // Narrower is fine.
    let (status, answer) = create(
        &server,
        json!({"task": "t", "workspace": ws, "deny": ["bash"], "sandbox": "read-only"}),
    )
    .await;
    assert_eq!(status, 201, "{answer}");
}

#[tokio::test]
async fn the_config_file_is_part_of_the_ceiling_and_flags_raise_it() {
    let env = TestEnv::new();
    env.config_file("[sandbox]\nmode = \"strict\"\n[approval.tools]\nbash = \"deny\"\n");
    let strict = server(&env, &writing_script(), &[]);
    let ws = env.workspace();
    for (body, setting) in [
        (
            json!({"task": "t", "workspace": ws, "sandbox": "workspace-write"}),
            "sandbox",
        ),
        (
            json!({"task": "t", "workspace": ws, "allow": ["bash"]}),
            "approval.bash",
        ),
    ] {
        let (status, answer) = create(&strict, body).await;
        assert_eq!(status, 403, "{answer}");
        assert_eq!(answer["setting"], setting, "{answer}");
    }
    drop(strict);
    // What the operator started the server with is allowed.
    let env = TestEnv::new();
    let open = server(
        &env,
        &writing_script(),
        &["--yes", "--sandbox", "off", "--network", "on"],
    );
    let (status, answer) = create(
        &open,
        json!({"task": "t", "workspace": env.workspace(), "yes": true, "sandbox": "off"}),
    )
    .await;
    assert_eq!(status, 201, "{answer}");
}

#[tokio::test]
async fn a_session_recorded_with_more_is_not_resumed_through_the_api() {
    let env = TestEnv::new();
    let script = env.script("s.json", &script(vec![say("Done.")]));
    let out = env
        .pod()
        .args(["run", "--json", "--yes", "--sandbox", "off", "--script"])
        .arg(&script)
        .arg("Work")
        .output()
        .unwrap();
    assert_success(&out);
    let id = session_id(&ndjson(&out.stdout));
    let server = server(&env, &writing_script(), &[]);
    let (status, answer) = server
        .post(&format!("/sessions/{id}/prompt"), r#"{"text": "more"}"#)
        .await;
    assert_eq!(status, 403, "{answer}");
    assert!(
        answer["error"]
            .as_str()
            .unwrap()
            .contains("was started with more"),
        "{answer}"
    );
}

#[test]
fn a_bad_token_file_stops_the_server() {
    use std::os::unix::fs::PermissionsExt;
    let env = TestEnv::new();
    let dir = env.workspace();
    let good = "k3J9xQ2mZ7pL4vR8tW1yB6nC5hF0dS2a";
    let cases: Vec<(&str, std::path::PathBuf, &str)> = {
        let open = dir.join("open");
        std::fs::write(&open, good).unwrap();
        std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o644)).unwrap();
        let short = dir.join("short");
        std::fs::write(&short, "abc").unwrap();
        std::fs::set_permissions(&short, std::fs::Permissions::from_mode(0o600)).unwrap();
        let link = dir.join("link");
        std::os::unix::fs::symlink("/etc/passwd", &link).unwrap();
        vec![
            ("others", open, "chmod 600"),
            ("too easy to guess", short, "urandom"),
            ("symbolic link", link, "name the file itself"),
        ]
    };
    for (what, path, fix) in cases {
        let out = env
            .pod()
            .args(["serve", "--http", "127.0.0.1:0", "--token-file"])
            .arg(&path)
            .output()
            .unwrap();
        assert!(!out.status.success(), "{what}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            stderr.contains(what) && stderr.contains(fix),
            "{what}: {stderr}"
        );
    }
    // The home's own token is checked too.
    let token = env.pod_home().join("http-token");
    std::fs::write(&token, good).unwrap();
    std::fs::set_permissions(&token, std::fs::Permissions::from_mode(0o640)).unwrap();
    let out = env
        .pod()
        .args(["serve", "--http", "127.0.0.1:0"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("can be read by others"));
}

/// A raw connection to the server, for what a client library would not
/// send.
fn raw(server: &Server) -> TcpStream {
    let addr = server.base.trim_start_matches("http://");
    let stream = TcpStream::connect(addr).unwrap();
    // An upper bound for a test that went wrong, never a measurement.
    stream
        .set_read_timeout(Some(Duration::from_secs(60)))
        .unwrap();
    stream
}

/// Reads until the server closes the connection.
fn read_to_close(stream: &mut TcpStream) -> String {
    let mut seen = Vec::new();
    match stream.read_to_end(&mut seen) {
        // A connection dropped with bytes it never read ends in a reset.
        Ok(_) => {}
        Err(err) if err.kind() == std::io::ErrorKind::ConnectionReset => {}
        Err(err) => panic!("the server did not close the connection: {err}"),
    }
    String::from_utf8_lossy(&seen).into_owned()
}

fn json_body(response: &str) -> Value {
    let body = response.split("\r\n\r\n").nth(1).unwrap_or_default();
    serde_json::from_str(body).unwrap_or_else(|e| panic!("not JSON ({e}): {response:?}"))
}

#[tokio::test]
async fn idle_and_slow_connections_are_closed_and_strangers_make_way_for_the_newest() {
    let env = TestEnv::new();
    env.config_file("[http]\nmax_connections = 3\nheader_timeout_secs = 1\n");
    let server = server(&env, &writing_script(), &[]);
    // Connections without the token may hold one of the three slots: each
    // new one pushes the one before out (one idle, two trickling a header).
    let mut held: Vec<TcpStream> = (0..3).map(|_| raw(&server)).collect();
    for stream in &mut held[1..] {
        let _ = stream.write_all(b"GET /api/sessions HTTP/1.1\r\nHost: ");
    }
    // Pushed out, or closed by the header timeout: none is ever answered.
    for stream in &mut held {
        let rest = read_to_close(stream);
        assert!(!rest.contains("200 OK"), "{rest}");
    }
    // The operator's request is served, and so is a stranger's that
    // sends its request at once (a 401, in JSON).
    let sessions = server.get("/sessions").await;
    assert!(sessions["sessions"].is_array());
    let mut stranger = raw(&server);
    let host = server.base.trim_start_matches("http://");
    stranger
        .write_all(
            format!("GET /api/sessions HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n")
                .as_bytes(),
        )
        .unwrap();
    let answer = read_to_close(&mut stranger);
    assert!(answer.starts_with("HTTP/1.1 401"), "{answer}");
    assert!(json_body(&answer)["error"]
        .as_str()
        .unwrap()
        .contains("token"));
}

#[tokio::test]
async fn oversized_requests_get_json_errors() {
    let env = TestEnv::new();
    env.config_file("[http]\nmax_body_bytes = 1000\n");
    let server = server(&env, &writing_script(), &[]);
    let big_body = json!({"task": "x".repeat(2000)}).to_string();
    let response = server
        .request(reqwest::Method::POST, "/sessions")
        .body(big_body)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 413);
    let body: Value = response.json().await.unwrap();
    assert!(body["error"].as_str().unwrap().contains("1000"), "{body}");

    let long = format!("/sessions?{}", "a=1&".repeat(4000));
    let response = server
        .request(reqwest::Method::GET, &long)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 414);
    let body: Value = response.json().await.unwrap();
    assert!(body["error"].is_string(), "{body}");

    let response = server
        .request(reqwest::Method::GET, "/sessions")
        .header("x-filler", "f".repeat(40 * 1024))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 431);
    let body: Value = response.json().await.unwrap();
    assert!(body["error"].is_string(), "{body}");
}

#[test]
fn a_loopback_server_answers_only_its_own_names_and_cannot_be_framed() {
    let env = TestEnv::new();
    let server = server(&env, &writing_script(), &[]);
    let addr = server.base.trim_start_matches("http://").to_string();
    let port = addr.rsplit(':').next().unwrap();
    let get = |host: &str| {
        let mut stream = raw(&server);
        write!(
            stream,
            "GET / HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n"
        )
        .unwrap();
        read_to_close(&mut stream)
    };
    // A page of another site whose name now resolves to 127.0.0.1.
    let rebound = get(&format!("attacker.example:{port}"));
    assert!(rebound.starts_with("HTTP/1.1 421"), "{rebound}");
    assert!(json_body(&rebound)["error"]
        .as_str()
        .unwrap()
        .contains("localhost"));
    for host in [addr.clone(), format!("localhost:{port}")] {
        let page = get(&host).to_ascii_lowercase();
        assert!(page.starts_with("http/1.1 200"), "{page}");
        assert!(page.contains("x-frame-options: deny"), "{page}");
        assert!(page.contains("frame-ancestors 'none'"), "{page}");
        assert!(page.contains("x-content-type-options: nosniff"), "{page}");
    }
}

#[tokio::test]
async fn a_sessions_commands_reach_neither_the_token_nor_other_logs_nor_the_keys() {
    let env = TestEnv::new();
    // Another session's log in the same home.
    let other = env.script("other.json", &script(vec![say("private answer 4711")]));
    let out = env
        .pod()
        .args(["run", "--json", "--script"])
        .arg(&other)
        .arg("Secret task")
        .output()
        .unwrap();
    assert_success(&out);
    let other_id = session_id(&ndjson(&out.stdout));
    let script_path = env.script("serve-script.json", &script(vec![say("placeholder")]));
    let mut command = env.pod_process();
    command
        .env("OPENAI_API_KEY", "sk-server-key-0042")
        .arg("--script")
        .arg(&script_path)
        .args(["--network", "on"]);
    let server = Server::start_with(command, &env);
    let addr = server.base.trim_start_matches("http://").to_string();
    let (host, port) = addr.rsplit_once(':').unwrap();
    let home = env.pod_home();
    let probe = format!(
        "cat {home}/http-token; cat {home}/sessions/{other_id}/log.jsonl; ls {home}/sessions; \
         tr '\\0' '\\n' < /proc/$PPID/environ; \
         exec 3<>/dev/tcp/{host}/{port} && printf 'GET /api/sessions HTTP/1.1\\r\\nHost: \
         {addr}\\r\\nConnection: close\\r\\n\\r\\n' >&3 && head -1 <&3",
        home = home.display()
    );
    // The model of the session created next runs the probe.
    std::fs::write(
        &script_path,
        script(vec![
            call("bash", json!({"command": probe})),
            say("Probed."),
        ])
        .to_string(),
    )
    .unwrap();
    let (status, answer) = create(
        &server,
        json!({"task": "Look around", "workspace": env.workspace(), "network": true}),
    )
    .await;
    assert_eq!(status, 201, "{answer}");
    let id = answer["session_id"].as_str().unwrap().to_string();
    let mut events = server.events(&id, None).await;
    events.until(|e| is_record_text(e, "Probed.")).await;
    let history = server.get(&format!("/sessions/{id}/history")).await;
    let result = history["records"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| &r["record"]["item"])
        .find(|item| item["type"] == "tool_result")
        .expect("the probe's result")
        .to_string();
    assert!(!result.contains(&server.token), "{result}");
    assert!(!result.contains("4711"), "{result}");
    assert!(!result.contains("sk-server-key-0042"), "{result}");
    assert!(result.contains("Permission denied"), "{result}");
    // The port answers (network is on), but not without the token.
    assert!(result.contains("HTTP/1.1 401"), "{result}");
}

/// Bytes that act on a terminal: ESC, BEL, CSI (C1, as UTF-8), the
/// right-to-left override (as UTF-8), a lone carriage return.
fn acting_bytes(output: &[u8]) -> Vec<String> {
    let text = String::from_utf8_lossy(output);
    let mut found = Vec::new();
    for (name, needle) in [
        ("ESC", "\u{1b}"),
        ("BEL", "\u{7}"),
        ("CSI", "\u{9b}"),
        ("RLO", "\u{202e}"),
        ("CR", "\r"),
    ] {
        if text.contains(needle) {
            found.push(name.to_string());
        }
    }
    found
}

#[test]
fn a_models_escape_sequences_never_reach_the_terminal() {
    let env = TestEnv::new();
    let hostile = "Done\u{1b}]0;pwned\u{7}\u{1b}[2J\u{1b}[H\u{9b}31m\u{202e}txt.exe\rover";
    let script = env.script(
        "s.json",
        &script(vec![
            write_todos(&[json!({"id": "a", "content": hostile, "status": "in_progress"})]),
            call(
                "bash",
                json!({"command": "printf 'out\\033]0;title\\007\\033[2J\\r'"}),
            ),
            call(&format!("no_such_tool{hostile}"), json!({})),
            json!({"reasoning": hostile, "text": hostile}),
        ]),
    );
    let out = env
        .pod()
        .args(["run", "--yes", "--script"])
        .arg(&script)
        .arg(format!("Task {hostile}"))
        .output()
        .unwrap();
    assert_success(&out);
    let mut shown = out.stdout.clone();
    shown.extend(&out.stderr);
    assert!(
        acting_bytes(&shown).is_empty(),
        "{:?}",
        String::from_utf8_lossy(&shown)
    );
    // What was acting is still there to read, as escapes.
    assert!(String::from_utf8_lossy(&out.stdout).contains("\\u{1b}]0;pwned"));
    let id = env.sessions_json()[0]["id"].as_str().unwrap().to_string();
    for args in [
        vec!["show", id.as_str()],
        vec!["show", id.as_str(), "--json"],
        vec!["show", id.as_str(), "--follow", "--json"],
        vec!["sessions"],
        vec!["sessions", "--json"],
    ] {
        let out = env.pod().args(&args).output().unwrap();
        assert_success(&out);
        let found = acting_bytes(&out.stdout);
        assert!(found.is_empty(), "pod {args:?}: {found:?}");
    }
    // The JSON still holds the text as it was.
    let json = env.show_json(&id);
    let text = json["history"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|item| item["text"].as_str())
        .next_back()
        .unwrap()
        .to_string();
    assert_eq!(text, hostile);
}
