//! Triggers defined through the API: `POST /api/triggers` defines one
//! (held to the server's ceiling, its secret never shown again), a
//! GitHub-signed delivery to it starts a session, `GET /api/triggers` lists
//! the config file's and the API's, `DELETE` removes an API one (not a
//! config one), and a defined trigger survives the server's restart.

use crate::http::Server;
use crate::support::*;
use crate::triggers::{github_signature, post, wait_done, GITHUB_SECRET};
use serde_json::{json, Value};

fn start(env: &TestEnv) -> Server {
    let script = env.script("handled.json", &json!({"steps": [{"text": "Handled."}]}));
    let mut serve = env.pod_process();
    serve.args(["--yes", "--script"]).arg(&script);
    Server::start_with(serve, env)
}

async fn delete(server: &Server, name: &str, token: bool) -> u16 {
    let client = reqwest::Client::new();
    let url = format!("{}/api/triggers/{name}", server.base);
    let request = match token {
        true => server.request(reqwest::Method::DELETE, &format!("/triggers/{name}")),
        false => client.delete(url),
    };
    request.send().await.unwrap().status().as_u16()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_trigger_defined_through_the_api_starts_sessions_and_outlives_a_restart() {
    let env = TestEnv::new();
    let workspace = env.workspace().canonicalize().unwrap();
    env.config_file(&format!(
        "[triggers.triage]\nsecret = \"{GITHUB_SECRET}\"\nsignature = \"github\"\n\
         task = \"Triage it.\"\nworkspace = \"{}\"\n",
        workspace.display()
    ));
    let server = start(&env);
    let definition = |name: &str| {
        json!({
            "name": name,
            "secret": GITHUB_SECRET,
            "signature": "github",
            "task": "Handle the deploy in the payload.",
            "workspace": workspace,
            "rate_per_minute": 10,
        })
    };
    let (status, defined) = server
        .post("/triggers", &definition("deploys").to_string())
        .await;
    assert_eq!(status, 201, "{defined}");
    assert_eq!(defined["name"], "deploys");
    assert_eq!(defined["source"], "api");
    assert_eq!(defined["url"], "/api/triggers/deploys");
    assert!(!defined.to_string().contains(GITHUB_SECRET), "{defined}");

    // Refused: a taken name (the API's or the config's), the server's
    // environment as a secret, a short secret, no task, a workspace
    // outside the server's roots.
    let refused = |body: Value| {
        let server = &server;
        async move { server.post("/triggers", &body.to_string()).await }
    };
    assert_eq!(refused(definition("deploys")).await.0, 409);
    assert_eq!(refused(definition("triage")).await.0, 409);
    let mut env_secret = definition("x");
    env_secret["secret_env"] = json!("HOME");
    env_secret.as_object_mut().unwrap().remove("secret");
    assert_eq!(refused(env_secret).await.0, 400);
    let mut short = definition("y");
    short["secret"] = json!("short");
    let (status, said) = refused(short).await;
    assert_eq!(status, 400, "{said}");
    assert!(
        said["error"].as_str().unwrap().contains("16 bytes"),
        "{said}"
    );
    let mut no_task = definition("z");
    no_task.as_object_mut().unwrap().remove("task");
    assert_eq!(refused(no_task).await.0, 400);
    let mut outside = definition("w");
    outside["workspace"] = json!("/");
    assert_eq!(refused(outside).await.0, 403);

    let listed = server.get("/triggers").await;
    let names: Vec<(&str, &str)> = listed["triggers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| (t["name"].as_str().unwrap(), t["source"].as_str().unwrap()))
        .collect();
    assert_eq!(
        names,
        [("triage", "config"), ("deploys", "api")],
        "{listed}"
    );
    assert!(!listed.to_string().contains(GITHUB_SECRET), "{listed}");

    // A signed delivery starts a session from its template.
    let body = br#"{"deployment":{"environment":"production"}}"#;
    let signed = |delivery: &str| {
        vec![
            ("x-github-delivery", delivery.to_string()),
            ("x-hub-signature-256", github_signature(body)),
        ]
    };
    let (status, created) = post(&server, "deploys", &signed("d-1"), body).await;
    assert_eq!(status, 201, "{created}");
    let id = created["session_id"].as_str().unwrap().to_string();
    wait_done(&server, &id).await;
    let history = server
        .get(&format!("/sessions/{id}/history"))
        .await
        .to_string();
    assert!(
        history.contains("Handle the deploy in the payload."),
        "{history}"
    );
    assert!(history.contains("production"), "{history}");

    // Kept privately, and there after a restart.
    let kept = env.pod_home().join("triggers/deploys.json");
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(&kept).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
    drop(server);
    let server = start(&env);
    let (status, created) = post(&server, "deploys", &signed("d-2"), body).await;
    assert_eq!(status, 201, "{created}");
    let (status, again) = post(&server, "deploys", &signed("d-1"), body).await;
    assert_eq!(
        (status, &again["duplicate"]),
        (200, &json!(true)),
        "{again}"
    );

    // Removed: only with the token, only the API's.
    assert_eq!(delete(&server, "deploys", false).await, 401);
    assert_eq!(delete(&server, "triage", true).await, 409);
    assert_eq!(delete(&server, "deploys", true).await, 204);
    assert_eq!(delete(&server, "deploys", true).await, 404);
    assert!(!kept.exists());
    let (status, gone) = post(&server, "deploys", &signed("d-3"), body).await;
    assert_eq!(status, 404, "{gone}");
}
