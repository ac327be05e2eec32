//! Notifications out of real processes: a `pod serve` whose session waits
//! for an answer tells a loopback webhook (signed), and a run stopped at
//! its budget tells a command, while a receiver that fails holds nothing
//! up.

use crate::http::{writing_script, Server};
use crate::support::*;
use pod_testkit::webhook::Receiver;
use serde_json::json;

const SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";

#[tokio::test]
async fn a_waiting_question_reaches_the_webhook_signed_and_the_answer_finishes_the_run() {
    let env = TestEnv::new();
    let receiver = Receiver::start(200).await;
    env.config_file(&format!(
        "[notify]\nwebhook = \"{}\"\nsecret_env = \"HOOK_SECRET\"\ndashboard = \"https://pod.example.com\"\n",
        receiver.url
    ));
    let path = env.script("serve-script.json", &writing_script());
    let mut command = env.pod_process();
    command.env("HOOK_SECRET", SECRET).arg("--script").arg(path);
    let server = Server::start_with(command, &env);
    let id = server.create(&env, "Write the notes\nin notes.md").await;

    let asked = receiver
        .wait_for(|r| r.json()["type"] == "session.question")
        .await;
    assert!(asked.signed_with(SECRET), "{:?}", asked.headers);
    let data = &asked.json()["data"];
    assert_eq!(data["session_id"], id.as_str());
    assert_eq!(data["title"], "Write the notes");
    assert_eq!(data["workspace"], env.workspace().to_str().unwrap());
    assert_eq!(data["question"]["tool"], "write_file");
    assert_eq!(data["link"], format!("https://pod.example.com/#/s/{id}"));
    assert!(
        data["answer_with"]
            .as_str()
            .unwrap()
            .starts_with(&format!("pod approve {id}")),
        "{data}"
    );
    // No arguments go out: the summary says what the call does.
    assert!(data["question"].get("arguments").is_none(), "{data}");

    // Answered from the API (as from another machine): the run finishes.
    let question = data["question"]["id"].as_str().unwrap();
    let (status, body) = server
        .post(
            &format!("/approvals/{question}"),
            &json!({"decision": "allow_once"}).to_string(),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    let finished = receiver
        .wait_for(|r| r.json()["type"] == "session.finished")
        .await;
    assert!(finished.signed_with(SECRET));
    assert_eq!(finished.json()["data"]["session_id"], id.as_str());
}

#[test]
fn a_budget_stop_reaches_the_command_and_a_failing_webhook_blocks_nothing() {
    let env = TestEnv::new();
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let receiver = runtime.block_on(Receiver::start(500));
    let seen = env.workspace().join("..").join("events.jsonl");
    env.config_file(&format!(
        "[notify]\nwebhook = \"{}\"\ncommand = [\"sh\", \"-c\", \"cat >> '{}'; echo >> '{}'\"]\n",
        receiver.url,
        seen.display(),
        seen.display()
    ));
    let steps = script(vec![
        write_todos(&plan(0)),
        call("list_dir", json!({"path": "."})),
        call("list_dir", json!({"path": "."})),
        say("Done."),
    ]);
    let path = env.script("plan.json", &steps);
    let out = env
        .pod()
        .args(["run", "--max-requests", "2", "--script"])
        .arg(&path)
        .arg("Work through the plan")
        .output()
        .unwrap();
    // The run ends as it would without notifications: stopped, exit 3.
    assert_eq!(out.status.code(), Some(3), "{out:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("not delivered before exit"), "{stderr}");
    let events: Vec<serde_json::Value> = std::fs::read_to_string(&seen)
        .unwrap()
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(events.len(), 1, "{events:?}");
    assert_eq!(events[0]["type"], "session.stopped");
    assert_eq!(events[0]["data"]["title"], "Work through the plan");
    assert!(
        events[0]["data"]["reason"]
            .as_str()
            .unwrap()
            .contains("per-turn budget of 2 model requests"),
        "{events:?}"
    );
    // The webhook was tried (and failed, and was retried while pod waited).
    assert!(!receiver.received().is_empty());
}

#[test]
fn a_notify_table_that_cannot_work_is_refused_before_anything_runs() {
    let env = TestEnv::new();
    env.config_file("[notify]\nwebhook = \"https://hooks.example.com/x\"\nsecret_env = \"NO_SUCH_SECRET_VAR\"\n");
    let path = env.script("plan.json", &script(vec![say("Done.")]));
    let out = env
        .pod()
        .env_remove("NO_SUCH_SECRET_VAR")
        .args(["run", "--script"])
        .arg(&path)
        .arg("Work")
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("NO_SUCH_SECRET_VAR"), "{stderr}");
    assert!(stderr.contains("[notify]"), "{stderr}");
    assert!(env.sessions_json().is_empty());
}
