//! `pod submit` and `pod serve` on a throwaway PostgreSQL cluster: workers
//! killed (SIGKILL) or paused past their lease (SIGSTOP) mid-turn, and
//! another worker finishing their sessions from the committed log.

use crate::support::*;
use pod_testkit::postgres::Postgres;
use serde_json::{json, Value};
use std::io::{BufRead, BufReader};
use std::process::{Child, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// A hang guard, not a timing assertion: generous on a loaded machine.
pub(crate) const PATIENCE: Duration = Duration::from_secs(120);

pub(crate) struct Fleet {
    pub pg: Postgres,
    pub env: TestEnv,
}

impl Fleet {
    pub fn new() -> Self {
        Self::on(Postgres::start())
    }

    pub fn on(pg: Postgres) -> Self {
        Self {
            pg,
            env: TestEnv::new(),
        }
    }

    pub fn pod(&self) -> assert_cmd::Command {
        let mut cmd = self.env.pod();
        cmd.env("POD_STORE", self.pg.url());
        cmd
    }

    /// Queues a session that plans two steps, runs `sleep SECONDS` in bash
    /// and finishes the plan.
    fn submit(&self, seconds: u32) -> String {
        let script = self.env.script(
            &format!("fleet-{seconds}.json"),
            &script(vec![
                write_todos(&plan(0)),
                call(
                    "bash",
                    json!({"command": format!("sleep {seconds}; echo slept")}),
                ),
                write_todos(&plan(3)),
                say("All done."),
            ]),
        );
        let out = self
            .pod()
            .args(["submit", "--yes", "--script"])
            .arg(&script)
            .arg("Do the three steps")
            .output()
            .unwrap();
        assert_success(&out);
        String::from_utf8(out.stdout).unwrap().trim().to_string()
    }

    /// A `pod serve` worker whose stdout lines arrive on the receiver.
    pub fn worker(&self, extra: &[&str]) -> (Child, mpsc::Receiver<String>) {
        let mut cmd = self.env.pod_process();
        cmd.env("POD_STORE", self.pg.url())
            .args(["serve", "--lease-ttl", "2s"])
            .args(extra)
            .stdout(Stdio::piped())
            .stderr(Stdio::null());
        let mut child = cmd.spawn().expect("start pod serve");
        let rx = lines_of(&mut child);
        (child, rx)
    }

    pub fn show(&self, id: &str) -> Value {
        let out = self.pod().args(["show", id, "--json"]).output().unwrap();
        assert_success(&out);
        serde_json::from_slice(&out.stdout).unwrap()
    }

    /// Waits until the session's last item is the bash call: the worker is
    /// inside the tool.
    fn wait_in_bash(&self, id: &str) {
        let deadline = Instant::now() + PATIENCE;
        loop {
            let shown = self.show(id);
            let history = shown["history"].as_array().unwrap();
            let in_bash = history.last().is_some_and(|item| {
                item["type"] == "assistant" && item["tool_calls"][0]["name"] == "bash"
            });
            if in_bash {
                return;
            }
            assert!(Instant::now() < deadline, "the worker never reached bash");
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// (seq, epoch) of every record of the session.
    fn epochs(&self, id: &str) -> Vec<(i64, i64)> {
        let id: uuid::Uuid = id.parse().unwrap();
        self.query(
            "SELECT seq, epoch FROM pod_records WHERE session_id = $1 ORDER BY seq",
            &[&id],
        )
        .iter()
        .map(|row| (row.get(0), row.get(1)))
        .collect()
    }

    /// Runs `sql` on the fleet's database, from a test's thread.
    pub fn query(
        &self,
        sql: &str,
        params: &[&(dyn tokio_postgres::types::ToSql + Sync)],
    ) -> Vec<tokio_postgres::Row> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(async {
            let (client, connection) =
                tokio_postgres::connect(&self.pg.url(), tokio_postgres::NoTls)
                    .await
                    .unwrap();
            tokio::spawn(connection);
            client.query(sql, params).await.unwrap()
        })
    }
}

/// The child's stdout lines, as they come.
pub(crate) fn lines_of(child: &mut Child) -> mpsc::Receiver<String> {
    let stdout = child.stdout.take().expect("stdout");
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    rx
}

pub(crate) fn wait_line(rx: &mpsc::Receiver<String>, wanted: &str) -> String {
    let deadline = Instant::now() + PATIENCE;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match rx.recv_timeout(left) {
            Ok(line) if line.contains(wanted) => return line,
            Ok(_) => {}
            Err(err) => panic!("no line with {wanted:?}: {err}"),
        }
    }
}

/// Every call has exactly one result, the plan is done, the last answer is
/// the script's, and records were written by non-decreasing epochs.
pub(crate) fn check_finished(fleet: &Fleet, id: &str) -> Vec<Value> {
    let shown = fleet.show(id);
    assert_eq!(shown["session"]["status"], "done", "{shown}");
    assert_eq!(statuses(&shown["todos"]), ["completed"; 3]);
    let history = shown["history"].as_array().unwrap().clone();
    let mut calls = Vec::new();
    let mut results = Vec::new();
    for item in &history {
        for call in item["tool_calls"].as_array().into_iter().flatten() {
            calls.push(call["id"].as_str().unwrap().to_string());
        }
        if item["type"] == "tool_result" {
            results.push(item["call_id"].as_str().unwrap().to_string());
        }
    }
    assert_eq!(
        calls, results,
        "every call has exactly one result, in order"
    );
    assert_eq!(history.last().unwrap()["text"], "All done.");
    let epochs = fleet.epochs(id);
    assert!(
        epochs.windows(2).all(|w| w[0].1 <= w[1].1),
        "a record of an older lease after a newer one: {epochs:?}"
    );
    let seqs: Vec<i64> = epochs.iter().map(|(seq, _)| *seq).collect();
    assert_eq!(seqs, (0..epochs.len() as i64).collect::<Vec<_>>());
    history
}

pub(crate) fn bash_result(history: &[Value]) -> String {
    history
        .iter()
        .find(|item| {
            item["type"] == "tool_result"
                && history.iter().any(|call| {
                    call["tool_calls"][0]["name"] == "bash"
                        && call["tool_calls"][0]["id"] == item["call_id"]
                })
        })
        .map(|item| item["content"].as_str().unwrap_or_default().to_string())
        .expect("the bash call has a result")
}

#[test]
fn a_killed_workers_session_is_finished_by_another() {
    let fleet = Fleet::new();
    let id = fleet.submit(20);
    let (mut first, first_out) = fleet.worker(&[]);
    wait_line(&first_out, &format!("claimed {id} (queued)"));
    fleet.wait_in_bash(&id);
    first.kill().unwrap();
    first.wait().unwrap();

    let (mut second, second_out) = fleet.worker(&["--exit-when-idle"]);
    wait_line(&second_out, &format!("claimed {id} (its worker died)"));
    let finished = wait_line(&second_out, &format!("finished {id}"));
    assert!(finished.contains("3/3 todos done"), "{finished}");
    assert!(second.wait().unwrap().success());

    let history = check_finished(&fleet, &id);
    let result = bash_result(&history);
    assert!(result.contains("Interrupted"), "the killed call: {result}");
    // Two leases wrote it: the first worker's, then the second's.
    let epochs = fleet.epochs(&id);
    assert_eq!(epochs.last().unwrap().1, 2, "{epochs:?}");
}

#[test]
fn a_worker_paused_past_its_lease_never_writes_again() {
    let fleet = Fleet::new();
    let id = fleet.submit(3);
    let (mut paused, paused_out) = fleet.worker(&[]);
    wait_line(&paused_out, &format!("claimed {id} (queued)"));
    fleet.wait_in_bash(&id);
    let pid = paused.id().to_string();
    let signal = |name: &str| {
        assert!(std::process::Command::new("kill")
            .args([name, &pid])
            .status()
            .unwrap()
            .success())
    };
    signal("-STOP");

    let (mut other, other_out) = fleet.worker(&["--exit-when-idle"]);
    wait_line(&other_out, &format!("claimed {id} (its worker died)"));
    wait_line(&other_out, &format!("finished {id}"));
    assert!(other.wait().unwrap().success());
    let before = fleet.epochs(&id);

    // The paused worker wakes up with its bash result in hand: the append
    // is fenced off, it drops the session and goes on serving.
    signal("-CONT");
    let dropped = wait_line(&paused_out, &format!("dropped {id}"));
    assert!(dropped.contains("another worker took it over"), "{dropped}");
    signal("-TERM");
    assert!(paused.wait().unwrap().success());

    assert_eq!(
        fleet.epochs(&id),
        before,
        "nothing written after the takeover"
    );
    let history = check_finished(&fleet, &id);
    assert!(bash_result(&history).contains("Interrupted"));
}

#[test]
fn a_stopped_worker_gives_its_sessions_back() {
    let fleet = Fleet::new();
    let id = fleet.submit(20);
    let (mut worker, out) = fleet.worker(&[]);
    wait_line(&out, &format!("claimed {id} (queued)"));
    fleet.wait_in_bash(&id);
    let status = std::process::Command::new("kill")
        .args(["-TERM", &worker.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let line = wait_line(&out, &format!("finished {id}"));
    assert!(line.contains("queued again"), "{line}");
    assert!(worker.wait().unwrap().success());
    let shown = fleet.show(&id);
    assert_eq!(shown["session"]["status"], "queued", "{shown}");

    let (mut next, next_out) = fleet.worker(&["--exit-when-idle"]);
    wait_line(&next_out, &format!("claimed {id} (queued)"));
    wait_line(&next_out, &format!("finished {id}"));
    assert!(next.wait().unwrap().success());
    check_finished(&fleet, &id);
}

#[test]
fn show_follow_watches_a_session_run_by_a_worker() {
    let fleet = Fleet::new();
    let id = fleet.submit(1);
    let watch = |json: bool| {
        let mut cmd = fleet.env.pod_process();
        cmd.env("POD_STORE", fleet.pg.url())
            .args(["show", "--follow", &id])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        if json {
            cmd.arg("--json");
        }
        cmd.spawn().expect("start pod show --follow")
    };
    // Both watch from before a worker exists: the session is queued.
    let mut human = watch(false);
    let human_lines = lines_of(&mut human);
    wait_line(&human_lines, "queued");
    let mut json = watch(true);
    let json_lines = lines_of(&mut json);
    let first = wait_line(&json_lines, "\"seq\":1");
    let (mut worker, out) = fleet.worker(&["--exit-when-idle"]);
    wait_line(&out, &format!("finished {id}"));
    assert!(worker.wait().unwrap().success());

    assert!(human.wait().unwrap().success());
    let text: String = human_lines.iter().map(|l| l + "\n").collect();
    let at = |needle: &str| {
        text.find(needle)
            .unwrap_or_else(|| panic!("{needle}: {text}"))
    };
    assert!(at("1  user") < at("→ bash") && at("→ bash") < at("All done."));
    assert!(at("All done.") < at("ended done"), "{text}");

    assert!(json.wait().unwrap().success());
    let rest: Vec<String> = json_lines.iter().collect();
    let lines: Vec<Value> = std::iter::once(first)
        .chain(rest)
        .map(|l| serde_json::from_str(&l).unwrap())
        .collect();
    let seqs: Vec<u64> = lines.iter().map(|l| l["seq"].as_u64().unwrap()).collect();
    assert_eq!(seqs, (1..=lines.len() as u64).collect::<Vec<_>>());
    let shown = fleet.show(&id);
    // Every record is a line; the items among them are the history
    // (the others: the checkpoints around the bash call).
    let items = lines
        .iter()
        .filter(|l| l["record"].get("item").is_some())
        .count();
    assert_eq!(
        items,
        shown["history"].as_array().unwrap().len(),
        "one line per record, none missed, none twice"
    );
    assert_eq!(
        lines
            .iter()
            .filter(|l| l["record"].get("checkpoint").is_some())
            .count(),
        2
    );
    assert_eq!(lines.last().unwrap()["record"]["item"]["text"], "All done.");
}

#[test]
fn submit_needs_no_api_key_and_a_worker_without_one_sets_the_session_aside() {
    let fleet = Fleet::new();
    // No key anywhere: the submitter records the variable's name only.
    let out = fleet
        .pod()
        .env_remove("OPENAI_API_KEY")
        .args(["submit", "--provider", "openai", "--model", "gpt-test"])
        .arg("a task")
        .output()
        .unwrap();
    assert_success(&out);
    let id = String::from_utf8(out.stdout).unwrap().trim().to_string();
    let shown = fleet.show(&id);
    assert_eq!(shown["session"]["model"], "gpt-test");
    assert_eq!(shown["session"]["status"], "queued");

    // A worker without the key cannot run it: it says why and sets the
    // session aside (idle) instead of claiming it again and again.
    let (mut worker, out) = fleet.worker(&["--exit-when-idle"]);
    let dropped = wait_line(&out, &format!("dropped {id}"));
    assert!(dropped.contains("OPENAI_API_KEY"), "{dropped}");
    assert!(worker.wait().unwrap().success());
    let shown = fleet.show(&id);
    assert_ne!(shown["session"]["status"], "queued");
    assert_eq!(shown["history"].as_array().unwrap().len(), 1, "nothing ran");
}

#[test]
fn submit_and_serve_need_a_postgres_store() {
    let env = TestEnv::new();
    for args in [&["submit", "task"][..], &["serve"][..]] {
        env.pod()
            .args(args)
            .assert()
            .code(1)
            .stderr(predicates::str::contains("needs a PostgreSQL store"))
            .stderr(predicates::str::contains("--store postgres://"));
    }
}
