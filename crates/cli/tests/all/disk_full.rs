//! The disk under the file store fills up mid-session: the session pauses
//! (its record waits) instead of failing, and continues once there is room.
//! Real kernel: POD_HOME and the workspace on a 16 MB tmpfs, mounted in a
//! private mount namespace of the `pod run` process; the session's own bash
//! call fills it; the test frees the space through `/proc/PID/root`.

use crate::support::*;
use serde_json::json;
use std::io::{BufRead, BufReader};
use std::process::Stdio;
use std::sync::mpsc;
use std::time::{Duration, Instant};

#[test]
fn a_full_disk_pauses_the_session_until_there_is_room() {
    let env = TestEnv::new();
    // Snapshots would copy the filler into the shadow store: this is about
    // the session log.
    env.config_file("checkpoints = false\n");
    let outside = tempfile::tempdir().unwrap();
    let mnt = outside.path().join("disk");
    let copy = outside.path().join("home-after");
    std::fs::create_dir_all(&mnt).unwrap();
    std::fs::create_dir_all(&copy).unwrap();
    // The result of the filling call is about 9 KB (its numbers): more than
    // the slack of the log's last page, so its record needs a new one.
    let fill = "head -c 64M /dev/zero > fill; echo \"filled: $?\"; seq 1 2000";
    let script = env.script(
        "fill.json",
        &script(vec![
            write_todos(&plan(0)),
            call("bash", json!({"command": fill})),
            write_todos(&plan(3)),
            say("All done."),
        ]),
    );

    let template = env.pod_process();
    let mut cmd = std::process::Command::new("unshare");
    cmd.env_clear();
    for (key, value) in template.get_envs() {
        if let Some(value) = value {
            cmd.env(key, value);
        }
    }
    let pod = template.get_program().to_os_string();
    cmd.env("POD_HOME", mnt.join("home"))
        .env("POD_BIN", &pod)
        .env("MNT", &mnt)
        .env("COPY", &copy)
        .env("SCRIPT", &script)
        .args(["--mount", "--propagation", "private", "sh", "-c"])
        .arg(
            "mount -t tmpfs -o size=16m tmpfs \"$MNT\" || exit 90; \
             mkdir -m 700 \"$MNT/home\" && mkdir \"$MNT/ws\" || exit 91; \
             \"$POD_BIN\" run --yes --script \"$SCRIPT\" --workspace \"$MNT/ws\" 'Fill the disk'; \
             status=$?; cp -a \"$MNT/home/.\" \"$COPY/\"; exit $status",
        )
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().expect("run unshare");
    let stderr = child.stderr.take().unwrap();
    let (tx, said) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });

    // The session's record of the call cannot be written: it pauses.
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut lines = Vec::new();
    let paused = loop {
        match said.recv_timeout(Duration::from_millis(200)) {
            Ok(line) if line.contains("cannot write the session log") => break line,
            Ok(line) => lines.push(line),
            Err(_) => {
                if let Some(status) = child.try_wait().unwrap() {
                    panic!("pod run ended ({status}) without pausing: {lines:#?}");
                }
            }
        }
        assert!(Instant::now() < deadline, "it never paused: {lines:#?}");
    };
    assert!(paused.contains("No space left on device"), "{paused}");
    assert!(paused.contains("nothing is lost"), "{paused}");
    // Still waiting, not failed, a while later.
    std::thread::sleep(Duration::from_secs(2));
    assert!(child.try_wait().unwrap().is_none(), "it gave up");

    // Room again, as an operator would make it: the session continues.
    let filler = std::path::PathBuf::from(format!("/proc/{}/root", child.id()))
        .join(mnt.strip_prefix("/").unwrap())
        .join("ws/fill");
    std::fs::remove_file(&filler).unwrap_or_else(|e| panic!("{}: {e}", filler.display()));
    let out = child.wait_with_output().unwrap();
    let rest: Vec<String> = said.try_iter().collect();
    assert!(
        out.status.success(),
        "{:?}: {}\n{rest:#?}",
        out.status,
        String::from_utf8_lossy(&out.stdout)
    );

    // The log, copied off the tmpfs, holds the call's result once and the
    // finished plan.
    let mut show = env.pod();
    show.env("POD_HOME", &copy).args(["sessions", "--json"]);
    let listed: serde_json::Value = serde_json::from_slice(&show.output().unwrap().stdout).unwrap();
    let id = listed[0]["id"].as_str().unwrap().to_string();
    let mut show = env.pod();
    show.env("POD_HOME", &copy).args(["show", &id, "--json"]);
    let out = show.output().unwrap();
    assert_success(&out);
    let shown: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let results: Vec<&str> = shown["history"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|item| item["type"] == "tool_result")
        .filter_map(|item| item["content"].as_str())
        .filter(|content| content.contains("filled: "))
        .collect();
    assert_eq!(results.len(), 1, "{shown:#}");
    assert!(results[0].contains("\n2000"), "{}", results[0]);
    assert_eq!(
        statuses(&shown["todos"]),
        ["completed", "completed", "completed"],
        "{shown:#}"
    );
}
