//! What a new user hits, one regression test per problem of issue 21, all
//! through the real binary: resuming remembers the model, config paths and
//! flags mean what they say, exit codes tell the truth, the demo and old
//! sessions can be cleaned away, diagnostics work, long tasks arrive whole,
//! and the messages say the right thing once.

use crate::support::*;
use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Write};
use std::process::Stdio;

fn code_and_output(mut command: assert_cmd::Command) -> (Option<i32>, String, String) {
    let out = command.output().unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// A session held open by a `pod run` whose model never answers; killed on drop.
struct Running(std::process::Child, String);

impl Running {
    fn start(env: &TestEnv) -> Self {
        let mut hanging = say("never");
        hanging["delay_ms"] = json!(600_000);
        let path = env.script("hang.json", &script(vec![hanging]));
        let mut child = env
            .pod_process()
            .args(["run", "--json", "--script"])
            .arg(path)
            .arg("wait")
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        let first: Value = serde_json::from_str(&lines.next().unwrap().unwrap()).unwrap();
        // The lock is taken before the first turn starts.
        for line in lines.by_ref() {
            if line.unwrap().contains("turn_started") {
                break;
            }
        }
        let id = first["session_id"].as_str().unwrap().to_string();
        Self(child, id)
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

// 1. `pod resume ID` forgets the model.

#[test]
fn resume_without_flags_uses_the_profile_the_session_started_with() {
    let env = TestEnv::new();
    let config_dir = env.config_dir();
    // The profile's script path is relative to the config file.
    std::fs::write(
        config_dir.join("local.json"),
        script(vec![
            write_todos(&plan(0)),
            say("Local pauses."),
            write_todos(&plan(3)),
            say("Local done."),
        ])
        .to_string(),
    )
    .unwrap();
    std::fs::write(
        config_dir.join("other.json"),
        script(vec![say("The default profile answered.")]).to_string(),
    )
    .unwrap();
    env.config_file(
        "default_profile = \"other\"\n\
         [profiles.local]\nkind = \"scripted\"\nscript = \"local.json\"\n\
         [profiles.other]\nkind = \"scripted\"\nscript = \"other.json\"\n",
    );
    let mut run = env.pod();
    run.args(["run", "--json", "--profile", "local", "Do a, b and c"]);
    let (code, stdout, stderr) = code_and_output(run);
    assert_eq!(code, Some(0), "{stderr}");
    let id = session_id(&ndjson(stdout.as_bytes()));

    // No flags, another directory: the session's own profile, not the default.
    let mut resume = env.pod();
    resume
        .current_dir(env.pod_home())
        .args(["resume", "--json", &id, "Go on"]);
    let (code, stdout, stderr) = code_and_output(resume);
    assert_eq!(code, Some(0), "{stderr}");
    let lines = ndjson(stdout.as_bytes());
    assert_eq!(lines[0]["model"], "scripted-test");
    let text: String = events(&lines, "text_delta")
        .iter()
        .map(|e| e["text"].as_str().unwrap())
        .collect();
    assert_eq!(text, "Local done.");
}

// 2. Config paths and the scripted provider's flags.

#[test]
fn provider_scripted_without_script_is_an_error_despite_a_default_profile() {
    let env = TestEnv::new();
    let path = env.script("s.json", &script(vec![say("from the profile")]));
    env.config_file(&format!(
        "default_profile = \"demo\"\n[profiles.demo]\nkind = \"scripted\"\nscript = {:?}\n",
        path.to_str().unwrap()
    ));
    let mut run = env.pod();
    run.args(["run", "--provider", "scripted", "task"]);
    let (code, _, stderr) = code_and_output(run);
    assert_eq!(code, Some(1));
    assert!(
        stderr.contains("--provider scripted needs --script FILE.json"),
        "{stderr}"
    );
}

#[test]
fn a_profile_without_a_config_file_says_where_it_looked() {
    let env = TestEnv::new();
    let mut run = env.pod();
    run.args(["run", "--profile", "claude", "task"]);
    let (code, _, stderr) = code_and_output(run);
    assert_eq!(code, Some(1));
    let expected = env.config_dir().join("config.toml");
    assert!(
        stderr.contains(&format!(
            "--profile claude: there is no config file at {}",
            expected.display()
        )),
        "{stderr}"
    );
    assert!(!stderr.contains("known: )"), "{stderr}");
}

// 3. Exit codes of interrupted runs (end of input at the prompt: terminal.rs).

#[test]
fn a_closed_stdout_cancels_the_run_and_exits_141() {
    let env = TestEnv::new();
    let mut hanging = say("never seen");
    hanging["delay_ms"] = json!(600_000);
    let path = env.script(
        "s.json",
        &script(vec![write_todos(&plan(0)), hanging, say("Done.")]),
    );
    let mut child = env
        .pod_process()
        .args(["run", "--json", "--script"])
        .arg(&path)
        .arg("Do it")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Like `| head -1`: one line, then the reader is gone.
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let mut first = String::new();
    stdout.read_line(&mut first).unwrap();
    drop(stdout);
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(141));
    let id = serde_json::from_str::<Value>(&first).unwrap()["session_id"]
        .as_str()
        .unwrap()
        .to_string();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("stdout was closed"), "{stderr}");
    assert!(
        stderr.contains(&format!("continue with: pod resume {id}")),
        "{stderr}"
    );
    assert_eq!(env.show_json(&id)["session"]["status"], "interrupted");
}

// 4. Sessions can be deleted.

#[test]
fn rm_asks_refuses_running_sessions_and_deletes() {
    let env = TestEnv::new();
    let path = env.script("s.json", &script(vec![say("hi")]));
    for _ in 0..2 {
        env.pod()
            .args(["run", "--script"])
            .arg(&path)
            .arg("hi")
            .assert()
            .success();
    }
    let ids: Vec<String> = env
        .sessions_json()
        .iter()
        .map(|s| s["id"].as_str().unwrap().to_string())
        .collect();
    // Not a terminal and no --yes: nothing is deleted.
    let mut rm = env.pod();
    rm.args(["rm", &ids[0]]);
    let (code, _, stderr) = code_and_output(rm);
    assert_eq!(code, Some(1));
    assert!(stderr.contains("pass --yes"), "{stderr}");
    assert_eq!(env.sessions_json().len(), 2);

    let mut rm = env.pod();
    rm.args(["rm", "--yes", &ids[0][..8]]);
    let (code, stdout, _) = code_and_output(rm);
    assert_eq!(code, Some(0));
    assert_eq!(stdout, format!("deleted {}\n", ids[0]));
    assert_eq!(env.sessions_json().len(), 1);

    // A session another process has open stays.
    let running = Running::start(&env);
    let mut rm = env.pod();
    rm.args(["rm", "--yes", &running.1]);
    let (code, _, stderr) = code_and_output(rm);
    assert_eq!(code, Some(1), "{stderr}");
    assert!(stderr.contains("not deleted"), "{stderr}");
    assert!(env.pod_home().join("sessions").join(&running.1).exists());
}

#[test]
fn prune_lists_with_dry_run_and_deletes_what_is_older() {
    let env = TestEnv::new();
    let path = env.script("s.json", &script(vec![say("hi")]));
    env.pod()
        .args(["run", "--script"])
        .arg(&path)
        .arg("hi")
        .assert()
        .success();
    let id = env.sessions_json()[0]["id"].as_str().unwrap().to_string();
    let mut prune = env.pod();
    prune.args(["prune", "--older-than", "1d", "--yes"]);
    let (code, stdout, _) = code_and_output(prune);
    assert_eq!(code, Some(0));
    assert_eq!(stdout, "no session is that old\n");

    let mut prune = env.pod();
    prune.args(["prune", "--older-than", "0s", "--dry-run"]);
    let (code, stdout, _) = code_and_output(prune);
    assert_eq!(code, Some(0));
    assert!(stdout.starts_with(&id), "{stdout}");
    assert!(stdout.ends_with("nothing deleted\n"), "{stdout}");
    assert_eq!(env.sessions_json().len(), 1);

    let mut prune = env.pod();
    prune.args(["prune", "--older-than", "0s", "--yes"]);
    let (code, stdout, _) = code_and_output(prune);
    assert_eq!(code, Some(0));
    assert!(stdout.ends_with(&format!("deleted {id}\n")), "{stdout}");
    assert!(env.sessions_json().is_empty());

    let mut prune = env.pod();
    prune.args(["prune", "--older-than", "30"]);
    let (code, _, stderr) = code_and_output(prune);
    assert_eq!(code, Some(2));
    assert!(stderr.contains("no unit"), "{stderr}");
}

// 5. Diagnostics.

#[test]
fn verbose_diagnostics_cover_scripted_runs_and_a_closed_stderr_is_harmless() {
    let env = TestEnv::new();
    let path = env.script(
        "s.json",
        &script(vec![call("list_dir", json!({"path": "."})), say("ok")]),
    );
    let mut run = env.pod();
    run.args(["-v", "run", "--script"]).arg(&path).arg("hi");
    let (code, _, stderr) = code_and_output(run);
    assert_eq!(code, Some(0));
    assert!(stderr.contains("session created"), "{stderr}");
    assert!(stderr.contains("turn ended"), "{stderr}");

    let log = env.pod_home().join("diag.log");
    let mut run = env.pod();
    run.args(["-vv", "--log-file"])
        .arg(&log)
        .args(["run", "--script"])
        .arg(&path)
        .arg("hi");
    let (code, _, stderr) = code_and_output(run);
    assert_eq!(code, Some(0));
    assert_eq!(stderr, "", "diagnostics go to the file");
    let written = std::fs::read_to_string(&log).unwrap();
    assert_eq!(written.matches("model request").count(), 2, "{written}");
    assert!(written.contains("tool result committed"), "{written}");

    // `pod -vvv run … 2>&1 | head -2` used to abort: stderr closed at once.
    let mut child = env
        .pod_process()
        .args(["-vvv", "run", "--script"])
        .arg(&path)
        .arg("hi")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stderr.take());
    assert_eq!(child.wait().unwrap().code(), Some(0));
}

// 6. Long tasks.

#[test]
fn the_task_comes_from_stdin_or_a_file() {
    let env = TestEnv::new();
    let path = env.script("s.json", &script(vec![say("ok"), say("ok")]));
    let task = "Line one of the task\nLine two\n";
    let mut child = env
        .pod_process()
        .args(["run", "--json", "--script"])
        .arg(&path)
        .arg("-")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(task.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success());
    // A pipe is not asked for anything (a terminal is: terminal.rs).
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("reading the task"), "{stderr}");
    let id = session_id(&ndjson(&out.stdout));
    assert_eq!(env.show_json(&id)["history"][0]["text"], task);

    let file = env.pod_home().join("task.md");
    std::fs::write(&file, "From a file.\n").unwrap();
    let mut run = env.pod();
    run.args(["run", "--json", "--script"])
        .arg(&path)
        .arg("--task-file")
        .arg(&file);
    let (code, stdout, _) = code_and_output(run);
    assert_eq!(code, Some(0));
    let id = session_id(&ndjson(stdout.as_bytes()));
    assert_eq!(env.show_json(&id)["history"][0]["text"], "From a file.\n");

    let mut run = env.pod();
    run.args(["run", "--script"]).arg(&path).arg("  ");
    let (code, _, stderr) = code_and_output(run);
    assert_eq!(code, Some(1));
    assert!(stderr.contains("the task is empty"), "{stderr}");
}

#[test]
fn a_prompt_larger_than_the_context_is_refused_before_anything_is_sent() {
    let env = TestEnv::new();
    let mut small = script(vec![say("never")]);
    small["context_window"] = json!(2_000);
    let path = env.script("s.json", &small);
    let file = env.pod_home().join("task.md");
    std::fs::write(&file, "word ".repeat(20_000)).unwrap();
    let mut run = env.pod();
    run.args(["run", "--script"])
        .arg(&path)
        .arg("--task-file")
        .arg(&file);
    let (code, _, stderr) = code_and_output(run);
    assert_eq!(code, Some(1), "{stderr}");
    assert!(stderr.contains("the prompt was refused"), "{stderr}");
    assert!(
        stderr.contains("more than the model's context window of 2000 tokens"),
        "{stderr}"
    );
    // Nothing was recorded, so no empty session is left to list.
    assert!(
        stderr.contains("pod: nothing was recorded, so session "),
        "{stderr}"
    );
    assert_eq!(env.sessions_json(), Vec::<Value>::new());
    let sessions = env.pod_home().join("sessions");
    let left = std::fs::read_dir(&sessions).map_or(0, |dir| dir.count());
    assert_eq!(left, 0, "{}", sessions.display());
}

#[test]
fn a_prompt_near_the_window_reaches_the_model_whole() {
    let env = TestEnv::new();
    // The window fits the prompt, but the prompt alone is past the
    // compaction threshold (80%): it must not be summarised unseen.
    let mut model = script(vec![say("Read it all.")]);
    model["context_window"] = json!(10_000);
    model["compaction"] = json!([say("A summary that must not replace the task.")]);
    let path = env.script("s.json", &model);
    let task = "word ".repeat(6_400);
    let file = env.pod_home().join("task.md");
    std::fs::write(&file, &task).unwrap();
    let mut run = env.pod();
    run.args(["run", "--json", "--script"])
        .arg(&path)
        .arg("--task-file")
        .arg(&file);
    let (code, stdout, stderr) = code_and_output(run);
    assert_eq!(code, Some(0), "{stderr}");
    let lines = ndjson(stdout.as_bytes());
    assert!(events(&lines, "compacted").is_empty(), "{stdout}");
    assert!(events(&lines, "compaction_failed").is_empty(), "{stdout}");
    // Nothing to compact: no "compacting" line left without an ending.
    assert!(events(&lines, "compaction_started").is_empty(), "{stdout}");
    let shown = env.show_json(&session_id(&lines));
    let history = shown["history"].as_array().unwrap();
    assert_eq!(history[0]["text"], task.as_str());
    assert_eq!(history.last().unwrap()["text"], "Read it all.");
}

// 7. Messages.

#[test]
fn a_failed_turn_names_the_session_to_resume_and_no_request_count() {
    let env = TestEnv::new();
    let path = env.script(
        "s.json",
        &script(vec![
            json!({"fail": {"status": 400, "message": "bad request"}}),
        ]),
    );
    let mut run = env.pod();
    run.args(["run", "--script"]).arg(&path).arg("hi");
    let (code, stdout, stderr) = code_and_output(run);
    assert_eq!(code, Some(1), "{stderr}");
    let id = env.sessions_json()[0]["id"].as_str().unwrap().to_string();
    assert!(stdout.contains("(the turn failed)"), "{stdout}");
    assert!(!stdout.contains("model request"), "{stdout}");
    assert!(
        stderr.contains(&format!("`pod resume {id}` retries")),
        "{stderr}"
    );
    assert!(!stderr.contains("pod resume ID"), "{stderr}");
    // The cause is said once.
    assert_eq!(stderr.matches("bad request").count(), 1, "{stderr}");
}

#[test]
fn a_refused_call_reads_once_and_a_piped_run_says_so() {
    let env = TestEnv::new();
    let path = env.script(
        "s.json",
        &script(vec![
            call("write_file", json!({"path": "a.txt", "content": "a\n"})),
            say("Could not write."),
        ]),
    );
    let mut run = env.pod();
    run.args(["run", "--script"]).arg(&path).arg("write");
    let (code, stdout, stderr) = code_and_output(run);
    assert_eq!(code, Some(0), "{stderr}");
    // On screen with its advice, not cut before it.
    assert!(stdout.contains("--allow write_file"), "{stdout}");
    assert!(
        stdout.contains(
            "1 tool call not run (write_file): nobody could approve it here: allow tools with \
             --yes or --allow TOOL"
        ),
        "{stdout}"
    );
    assert!(stderr.contains("1 tool call not run"), "{stderr}");
    let id = env.sessions_json()[0]["id"].as_str().unwrap().to_string();
    let shown = env.show_json(&id);
    let result = shown["history"]
        .as_array()
        .unwrap()
        .iter()
        .find(|item| item["type"] == "tool_result")
        .unwrap()["content"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(result.starts_with("Not run: "), "{result}");
    assert_eq!(result.matches("Not run").count(), 1, "{result}");
    assert!(!result.contains("Skipped"), "{result}");
}

#[test]
fn counts_are_in_the_right_number() {
    let env = TestEnv::new();
    let path = env.script(
        "s.json",
        &script(vec![
            write_todos(&[todo("a", "in_progress")]),
            call("list_dir", json!({"path": "."})),
            say("One."),
        ]),
    );
    let mut run = env.pod();
    run.args(["run", "--script"]).arg(&path).arg("hi");
    let (code, stdout, _) = code_and_output(run);
    assert_eq!(code, Some(0));
    assert!(stdout.contains("todo_write(1 item)"), "{stdout}");
    assert!(stdout.contains("3 model requests"), "{stdout}");
    assert!(!stdout.contains("(s)"), "{stdout}");
}

#[test]
fn a_model_server_nobody_listens_at_is_named_once_and_the_session_says_it_failed() {
    let env = TestEnv::new();
    // A port nothing listens on (bound, then closed).
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let base = format!("http://127.0.0.1:{port}/v1");
    // One attempt, so no backoff (the profile's; the flags name the server).
    env.config_file("[profiles.once]\nmax_attempts = 1\n");
    let mut run = env.pod();
    run.env("OPENAI_API_KEY", "anything")
        .args(["run", "--profile", "once"])
        .args(["--provider", "openai", "--base-url", &base])
        .args(["--model", "m", "Say hi"]);
    let (code, _, stderr) = code_and_output(run);
    assert_eq!(code, Some(1), "{stderr}");
    let said = format!("cannot reach the model server at {base} (connection refused)");
    let error_line = stderr
        .lines()
        .find(|l| l.starts_with("error:"))
        .expect("an error line");
    assert!(error_line.ends_with(&said), "{stderr}");
    assert_eq!(stderr.matches("refused").count(), 1, "{stderr}");
    assert!(!stderr.contains("tcp connect error"), "{stderr}");
    // The prompt was recorded: the session stays, failed, saying why.
    let sessions = env.sessions_json();
    assert_eq!(sessions.len(), 1, "{sessions:?}");
    assert_eq!(sessions[0]["status"], "failed");
    assert_eq!(sessions[0]["title"], "Say hi");
    let reason = sessions[0]["reason"].as_str().unwrap();
    assert!(reason.ends_with(&said), "{reason}");
}

/// A model server that is busy once, then answers: the retry is one line in
/// words (the log's warning only under -v, where the notice is not made).
#[tokio::test(flavor = "multi_thread")]
async fn a_retried_request_is_one_line_in_words_and_its_details_are_under_v() {
    use pod_testkit::server::{LoopbackServer, Reply};
    use pod_testkit::wire::openai_step;
    let busy = || {
        Reply::status(
            429,
            r#"{"error":{"message":"slow down","type":"rate_limit"}}"#,
        )
        .header("retry-after-ms", "20")
    };
    let server = LoopbackServer::start(vec![
        busy(),
        openai_step("Hello.", &[]),
        busy(),
        openai_step("Hello again.", &[]),
    ])
    .await;
    let env = TestEnv::new();
    let url = server.url("/v1");
    let run = |verbose: bool| {
        let mut cmd = env.pod_process();
        cmd.env("OPENAI_API_KEY", "anything");
        if verbose {
            cmd.arg("-v");
        }
        cmd.args(["run", "--provider", "openai", "--base-url", &url])
            .args(["--model", "m", "Say hi"]);
        tokio::task::spawn_blocking(move || cmd.output().unwrap())
    };

    let out = run(false).await.unwrap();
    assert_success(&out);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let notices: Vec<&str> = stdout.lines().filter(|l| l.contains('↻')).collect();
    assert_eq!(notices.len(), 1, "{stdout}");
    assert!(notices[0].contains("HTTP 429"), "{stdout}");
    assert!(notices[0].contains("trying again in 20 ms"), "{stdout}");
    assert!(
        notices[0].contains("(attempt 2 of this request)"),
        "{stdout}"
    );
    assert!(stdout.contains("Hello."), "{stdout}");
    assert!(!stderr.contains("WARN"), "{stderr}");

    let out = run(true).await.unwrap();
    assert_success(&out);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stdout.contains('↻'), "{stdout}");
    assert!(stdout.contains("Hello again."), "{stdout}");
    let warned: Vec<&str> = stderr.lines().filter(|l| l.contains("retrying")).collect();
    assert_eq!(warned.len(), 1, "{stderr}");
    assert!(
        warned[0].contains("WARN") && warned[0].contains("wait_ms=20"),
        "{stderr}"
    );
}
