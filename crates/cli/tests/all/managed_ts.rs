//! The Managed Agents API driven by the official TypeScript SDK
//! (`@anthropic-ai/sdk`, pinned in scripts/test and installed into
//! target/ts-sdk), unchanged, from Node.js: an agent, an environment and a
//! session created, a message sent on an open stream, the stream read
//! until the session is idle, the events listed with the SDK's paging,
//! and errors as the SDK's error classes.

use crate::http::Server;
use crate::support::*;
use serde_json::{json, Value};
use std::path::PathBuf;

/// The SDK's version scripts/test installs.
const SDK_VERSION: &str = "1.17.0";

/// The directory whose `node_modules` holds the SDK; the test fails,
/// saying how to install it, when it is missing.
fn ts_sdk() -> PathBuf {
    let dirs = [
        std::env::var_os("POD_TS_SDK").map(PathBuf::from),
        Some(PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../target/ts-sdk")),
    ];
    dirs.into_iter()
        .flatten()
        .find(|dir| {
            dir.join("node_modules/@anthropic-ai/sdk/package.json")
                .is_file()
        })
        .unwrap_or_else(|| {
            panic!(
                "the Anthropic TypeScript SDK is not installed: run ./scripts/test, or \
                 `npm install --prefix target/ts-sdk @anthropic-ai/sdk@{SDK_VERSION}` \
                 (POD_TS_SDK may name another directory holding it)"
            )
        })
}

const CLIENT: &str = r#"
const Anthropic = require("@anthropic-ai/sdk").default;
const { VERSION: version } = require("@anthropic-ai/sdk/version");

// A guard against a hang: the stream must reach idle within a minute.
setTimeout(() => { console.error("timed out"); process.exit(2); }, 60000).unref();

async function errorOf(call) {
  try {
    await call();
    return "accepted";
  } catch (err) {
    if (err instanceof Anthropic.APIError) {
      return { class: err.constructor.name, status: err.status, type: err.error?.error?.type };
    }
    throw err;
  }
}

async function main() {
  const client = new Anthropic({ baseURL: process.env.POD_BASE, apiKey: process.env.POD_KEY, maxRetries: 0 });
  const out = { version };
  out.unknown_model = await errorOf(() => client.beta.agents.create({ name: "x", model: "no-such-model" }));
  out.no_session = await errorOf(() => client.beta.sessions.retrieve("sesn_00000000000000000000000000000000"));
  out.wrong_key = await errorOf(() =>
    new Anthropic({ baseURL: process.env.POD_BASE, apiKey: "nope", maxRetries: 0 }).beta.agents.list());
  const agent = await client.beta.agents.create({ name: "ts", model: "default", system: "Be brief." });
  const environment = await client.beta.environments.create({ name: "here" });
  const session = await client.beta.sessions.create({ agent: agent.id, environment_id: environment.id, title: "from TypeScript" });
  out.session = { id: session.id, status: session.status, agent: session.agent.id, title: session.title };

  const seen = [];
  const stream = await client.beta.sessions.events.stream(session.id);
  await client.beta.sessions.events.send(session.id, {
    events: [{ type: "user.message", content: [{ type: "text", text: "Plan, then answer." }] }],
  });
  for await (const event of stream) {
    if (event.type.startsWith("span.model_request")) continue;
    const one = { type: event.type };
    if (event.type === "agent.message") one.text = event.content.map((b) => b.text).join("");
    if (event.type === "agent.tool_use") one.name = event.name;
    if (event.type === "session.status_idle") one.stop_reason = event.stop_reason.type;
    seen.push(one);
    if (event.type === "session.status_idle") break;
  }
  stream.controller.abort();
  out.stream = seen;
  out.after = (await client.beta.sessions.retrieve(session.id)).status;
  // The SDK's auto-paging, two events a page.
  const listed = [];
  for await (const event of client.beta.sessions.events.list(session.id, { limit: 2 })) {
    if (!event.type.startsWith("span.model_request")) listed.push(event.type);
  }
  out.listed = listed;
  out.sessions = [];
  for await (const s of client.beta.sessions.list()) out.sessions.push(s.id);
  console.log(JSON.stringify(out));
}

main().catch((err) => { console.error(err); process.exit(1); });
"#;

#[test]
fn the_typescript_sdk_creates_a_session_and_streams_its_turn() {
    let env = TestEnv::new();
    let script = json!({"steps": [
        write_todos(&[todo("1", "completed")]),
        {"text": "All done from pod."}
    ]});
    let path = env.script("serve-script.json", &script);
    let mut command = env.pod_process();
    command.arg("--yes").arg("--script").arg(path);
    let server = Server::start_with(command, &env);

    let sdk = ts_sdk();
    let client = sdk.join(format!("client-{}.cjs", std::process::id()));
    std::fs::write(&client, CLIENT).unwrap();
    let out = std::process::Command::new("node")
        .arg(&client)
        .current_dir(&sdk)
        .env("POD_BASE", &server.base)
        .env("POD_KEY", server.token.trim())
        .output()
        .expect("node runs (scripts/test installs it)");
    let _ = std::fs::remove_file(&client);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "the client failed: {stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let seen: Value = serde_json::from_str(stdout.trim()).expect("the client prints JSON");

    assert_eq!(seen["version"], SDK_VERSION);
    assert_eq!(seen["unknown_model"]["class"], "BadRequestError", "{seen}");
    assert_eq!(
        seen["unknown_model"]["type"], "invalid_request_error",
        "{seen}"
    );
    assert_eq!(seen["no_session"]["class"], "NotFoundError", "{seen}");
    assert_eq!(seen["wrong_key"]["class"], "AuthenticationError", "{seen}");
    let id = seen["session"]["id"].as_str().unwrap();
    assert!(id.starts_with("sesn_"), "{seen}");
    assert_eq!(seen["session"]["status"], "idle", "{seen}");
    assert_eq!(seen["session"]["title"], "from TypeScript", "{seen}");

    // The turn as the stream told it: the message, running, the plan call
    // and its result, the answer, idle at the end of the turn.
    let types: Vec<&str> = seen["stream"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|e| e["type"].as_str())
        .collect();
    assert_eq!(
        types,
        [
            "user.message",
            "session.status_running",
            "agent.tool_use",
            "agent.tool_result",
            "agent.message",
            "session.status_idle"
        ],
        "{seen}"
    );
    assert_eq!(seen["stream"][2]["name"], "todo_write", "{seen}");
    assert_eq!(seen["stream"][4]["text"], "All done from pod.", "{seen}");
    assert_eq!(seen["stream"][5]["stop_reason"], "end_turn", "{seen}");
    assert_eq!(seen["after"], "idle", "{seen}");
    // Listed through pages of two, the whole history in order.
    assert_eq!(
        seen["listed"],
        json!([
            "user.message",
            "session.status_running",
            "agent.tool_use",
            "agent.tool_result",
            "agent.message",
            "session.status_idle"
        ]),
        "{seen}"
    );
    assert_eq!(seen["sessions"], json!([id]), "{seen}");

    // The session is an ordinary pod session.
    let uuid = uuid::Uuid::parse_str(id.trim_start_matches("sesn_"))
        .unwrap()
        .to_string();
    let shown = env.show_json(&uuid);
    assert_eq!(statuses(&shown["todos"]), ["completed"], "{shown}");
}
