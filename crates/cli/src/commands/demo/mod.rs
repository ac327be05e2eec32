//! `pod demo`: a scripted agent plans, works with its hands (writes, reads,
//! edits and tests a script in a temporary workspace), is killed with
//! SIGKILL, resumes from its log with its plan intact, passes through a
//! compaction and finishes, narrated one line per stage.
//!
//! The agent runs as real child processes of this binary (`pod run --json
//! --yes`, then `pod resume --json --yes`: running the demo is the user's
//! opt-in to the agent's edits and commands in its own temporary
//! workspace) on the embedded script. The session goes to a POD_HOME of
//! the demo's own in the same temporary directory, so it never joins the
//! user's sessions, and without the user's config file; `--keep` keeps that directory for `pod show` and tells
//! how to reach it. The script's step after the kill
//! point waits for ten minutes before answering, so the kill always lands
//! while the model is "thinking"; the resume plays the same script without
//! that wait. At the end the demo checks its own result ([`check`]): the
//! edited file's exact content, every todo completed in `pod show --json`,
//! exactly [`COMPACTIONS`] compactions and none failed.

mod check;

use crate::cli::DemoArgs;
use crate::error::Outcome;
use crate::render;
use crate::style::Style;
use anyhow::{bail, ensure, Context, Result};
use pod_launch::sessions::{self as session, Status};
use pod_llm::Script;
use pod_tools::{TodoItem, TodoStatus};
use serde_json::Value;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use uuid::Uuid;

/// The demo's model: a script of todo updates, workspace tool calls and
/// answers, with one `compaction` step per compaction it has.
///
/// Its `context_window` (4250 tokens, so compaction starts past 3400) is
/// tuned to the story: the tool specs alone are about 1400 tokens, the
/// requests before the test peak near 2470, the 130-line output of
/// `sh test.sh` takes the resumed run to about 4500 (more than the rest of
/// the history, so it is summarised whole), and after that one compaction
/// the context stays near 2200 at most. Each margin is about 1000 tokens;
/// the `demo` test fails if a change to the script moves a compaction.
const DEMO_SCRIPT: &str = include_str!("demo.json");

/// Compactions the story has (all in the resumed run): the script's
/// `compaction` steps.
const COMPACTIONS: usize = 1;

/// The task the scripted agent is given.
const TASK: &str = "Add a --json flag to the `report` tool";

/// Todo updates the first run makes before it is killed.
const KILL_AFTER_UPDATES: usize = 3;

/// Runs the demo.
pub async fn run(args: DemoArgs) -> Result<Outcome> {
    let say = Narrator::new(Style::for_stdout());
    let dir = tempfile::Builder::new()
        .prefix("pod-demo-")
        .tempdir()
        .context("cannot create the demo's temporary directory")?;
    let files = DemoFiles::write(dir.path())?;
    let store = pod::FileStore::new(pod::PodHome::new(&files.home));
    say.stage(&format!(
        "a scripted agent (no key, no network) starts on \"{TASK}\" in {}, with --yes: \
         running the demo allows its edits and commands there",
        files.workspace.display()
    ));

    let (id, before_kill) = first_run(&files, &say)?;
    let loaded = session::load(&store, id).await?;
    ensure!(
        loaded.summary.status == Status::Interrupted,
        "after the kill the session should be interrupted, not {}",
        loaded.summary.status.as_str()
    );
    ensure!(
        loaded.todos == before_kill,
        "the replayed plan differs from the one the agent had when it was killed"
    );
    say.stage(&format!(
        "its log replays to the same plan: {} — the todos survived the crash",
        plan_gist(&loaded.todos)
    ));

    resume(&files, id, &say)?;
    let loaded = session::load(&store, id).await?;
    ensure!(
        loaded.summary.status == Status::Done,
        "the resumed session should be done, not {}",
        loaded.summary.status.as_str()
    );
    check::edited_file(&files.workspace)?;
    let completed = check::shown_todos_completed(&files.home, id)?;
    say.stage(&format!(
        "finished: {} of {} todos completed; checked: {} has every edit, pod show --json lists \
         {completed} of {completed} completed",
        loaded.summary.todos.completed,
        loaded.summary.todos.total,
        check::EDITED_FILE
    ));
    let mut out = format!("{}\n\n", render::checklist(&loaded.todos, say.style));
    if args.keep {
        let dir = dir.keep();
        out.push_str(&format!(
            "session {id}\nlog     {}\nkept in {}\nsee it: POD_HOME={} pod show {id}\n",
            loaded.summary.log_path,
            dir.display(),
            files.home.display()
        ));
    } else {
        out.push_str(
            "the demo's session and workspace were temporary and are removed now \
             (`pod demo --keep` keeps them); start your own with `pod run`\n",
        );
    }
    crate::output::print(&out)?;
    Ok(Outcome::Done)
}

/// The scripts and workspace in the temporary directory.
struct DemoFiles {
    home: PathBuf,
    workspace: PathBuf,
    run_script: PathBuf,
    resume_script: PathBuf,
    stderr: PathBuf,
}

impl DemoFiles {
    fn write(dir: &Path) -> Result<Self> {
        let script: Script =
            serde_json::from_str(DEMO_SCRIPT).context("the embedded demo script is invalid")?;
        let workspace = dir.join("workspace");
        std::fs::create_dir(&workspace).context("cannot create the demo workspace")?;
        let run_script = dir.join("run.json");
        write_json(&run_script, &script)?;
        // The resumed model answers at once where the first one hung.
        let mut resumed = script;
        for step in &mut resumed.steps {
            step.delay_ms = None;
        }
        let resume_script = dir.join("resume.json");
        write_json(&resume_script, &resumed)?;
        Ok(Self {
            home: dir.join("home"),
            workspace,
            run_script,
            resume_script,
            stderr: dir.join("stderr.log"),
        })
    }

    /// `pod ARGS --json --until-done --yes --provider scripted --script SCRIPT`,
    /// stdout piped, stderr to a file shown if something fails.
    fn child(&self, args: &[&str], script: &Path) -> Result<Child> {
        let exe = std::env::current_exe().context("cannot find the pod binary")?;
        let stderr = std::fs::File::create(&self.stderr).context("cannot create stderr log")?;
        Command::new(exe)
            .env("POD_HOME", &self.home)
            // The demo keeps to its own files, whatever store the user has,
            // and to its own settings: the user's config file (its approval,
            // sandbox and budget tables, or a broken one) has no say.
            .env_remove("POD_STORE")
            .env(pod_providers::CONFIG_ENV, "/dev/null")
            .args(args)
            .args([
                "--json",
                "--until-done",
                // The demo's own temporary workspace: running it is the opt-in.
                "--yes",
                "--provider",
                "scripted",
                "--script",
            ])
            .arg(script)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(stderr)
            .spawn()
            .context("cannot start the agent process")
    }

    fn child_stderr(&self) -> String {
        std::fs::read_to_string(&self.stderr).unwrap_or_default()
    }
}

/// Runs the agent until its `KILL_AFTER_UPDATES`-th todo update, then kills
/// it with SIGKILL. Returns the session id and the plan at the kill.
fn first_run(files: &DemoFiles, say: &Narrator) -> Result<(Uuid, Vec<TodoItem>)> {
    let workspace = files.workspace.to_string_lossy().into_owned();
    let mut child = files.child(&["run", "--workspace", &workspace, TASK], &files.run_script)?;
    let stdout = child.stdout.take().context("no stdout from the agent")?;
    let mut id = None;
    let mut updates = 0;
    let mut plan = Vec::new();
    let mut hands = Hands::default();
    for line in BufReader::new(stdout).lines() {
        let event = parse_event(&line.context("cannot read the agent's output")?)?;
        match event["event"].as_str().unwrap_or_default() {
            "session_started" => {
                let started = session_id(&event)?;
                say.stage(&format!("session {started} started (pid {})", child.id()));
                id = Some(started);
            }
            "todos_changed" => {
                updates += 1;
                plan = todos(&event)?;
                let did = hands.take();
                if updates == 1 {
                    say.stage(&format!(
                        "it plans {} steps with todo_write{did}: {}",
                        plan.len(),
                        plan_gist(&plan)
                    ));
                } else {
                    say.stage(&format!(
                        "it works through the plan{did}: {}",
                        plan_gist(&plan)
                    ));
                }
                if updates == KILL_AFTER_UPDATES {
                    break;
                }
            }
            "reminder_injected" => say.stage(
                "it ends a turn with work left; the runtime reminds it of the plan and it goes on",
            ),
            _ => hands.observe(&event),
        }
    }
    if updates < KILL_AFTER_UPDATES {
        let _ = child.kill();
        let _ = child.wait();
        bail!(
            "the agent stopped before its {KILL_AFTER_UPDATES}th todo update: {}",
            files.child_stderr().trim()
        );
    }
    // On unix this is SIGKILL: no cleanup, no flush, like a crash.
    child.kill().context("cannot kill the agent")?;
    child.wait().context("cannot reap the agent")?;
    hands.check()?;
    let id = id.context("the agent never said its session id")?;
    say.stage(&format!(
        "kill -9 while the model is answering: the process is gone mid-task ({})",
        progress_words(&plan)
    ));
    Ok((id, plan))
}

/// `pod resume ID` with no text: it continues the unfinished plan.
fn resume(files: &DemoFiles, id: Uuid, say: &Narrator) -> Result<()> {
    let id_text = id.to_string();
    say.stage(&format!(
        "pod resume {id_text}: the log is replayed and the agent goes on"
    ));
    let mut child = files.child(&["resume", &id_text], &files.resume_script)?;
    let stdout = child.stdout.take().context("no stdout from the agent")?;
    let mut compactions = 0;
    let mut failed = Vec::new();
    let mut hands = Hands::default();
    for line in BufReader::new(stdout).lines() {
        let event = parse_event(&line.context("cannot read the agent's output")?)?;
        match event["event"].as_str().unwrap_or_default() {
            "compacted" => {
                compactions += 1;
                say.stage(&format!(
                    "its context nears the model's window: compacted ~{} → ~{} tokens, \
                     the unfinished plan carried over, the files to read again listed",
                    event["tokens_before"], event["tokens_after"]
                ));
            }
            "compaction_failed" => {
                failed.push(event["reason"].as_str().unwrap_or_default().to_string());
            }
            "todos_changed" => {
                let plan = todos(&event)?;
                let did = hands.take();
                say.stage(&format!(
                    "it works through the plan{did}: {}",
                    plan_gist(&plan)
                ));
            }
            _ => hands.observe(&event),
        }
    }
    let status = child.wait().context("cannot wait for the agent")?;
    ensure!(
        status.success(),
        "the resumed agent failed ({status}): {}",
        files.child_stderr().trim()
    );
    hands.check()?;
    ensure!(
        failed.is_empty(),
        "the story's compaction failed: {}",
        failed.join("; ")
    );
    ensure!(
        compactions == COMPACTIONS,
        "the resumed agent compacted {compactions} times, the story has {COMPACTIONS}"
    );
    Ok(())
}

/// The agent's tool calls since the last todo update (todo_write aside),
/// for the narration, and the ones that failed.
#[derive(Default)]
struct Hands {
    calls: Vec<String>,
    failures: Vec<String>,
}

impl Hands {
    fn observe(&mut self, event: &Value) {
        let name = event["name"].as_str().unwrap_or_default();
        match event["event"].as_str().unwrap_or_default() {
            "tool_call_started" if name != pod_tools::TODO_WRITE => {
                let arguments = event["arguments"].as_str().unwrap_or_default();
                // The one-line view a prompt would show: tool and main argument.
                self.calls
                    .push(pod::ApprovalRequest::new("", name, arguments).summary);
            }
            "tool_call_finished" if event["is_error"] == true => {
                self.failures.push(name.to_string());
            }
            _ => {}
        }
    }

    /// " (list_dir, write_file: report.sh)" or nothing.
    fn take(&mut self) -> String {
        let calls = std::mem::take(&mut self.calls);
        if calls.is_empty() {
            String::new()
        } else {
            format!(" ({})", calls.join(", "))
        }
    }

    fn check(&self) -> Result<()> {
        ensure!(
            self.failures.is_empty(),
            "the agent's calls failed ({}); the story expects every call to succeed",
            self.failures.join(", ")
        );
        Ok(())
    }
}

fn todos(event: &Value) -> Result<Vec<TodoItem>> {
    serde_json::from_value(event["todos"].clone()).context("a todos_changed event without todos")
}

/// One line per stage.
struct Narrator {
    style: Style,
}

impl Narrator {
    fn new(style: Style) -> Self {
        Self { style }
    }

    fn stage(&self, text: &str) {
        // A closed stdout does not stop the story, which checks itself.
        let _ = crate::output::print(&format!("{} {text}\n", self.style.cyan("▸")));
    }
}

fn write_json(path: &Path, script: &Script) -> Result<()> {
    let json = serde_json::to_vec_pretty(script).context("cannot encode the demo script")?;
    std::fs::write(path, json).with_context(|| format!("cannot write {}", path.display()))
}

fn parse_event(line: &str) -> Result<Value> {
    serde_json::from_str(line).with_context(|| format!("the agent printed a non-JSON line: {line}"))
}

fn session_id(event: &Value) -> Result<Uuid> {
    let text = event["session_id"].as_str().unwrap_or_default();
    Uuid::parse_str(text).with_context(|| format!("bad session id {text:?}"))
}

/// "2 of 5 done, now: Add a --json flag".
fn plan_gist(plan: &[TodoItem]) -> String {
    let current = plan
        .iter()
        .find(|t| t.status == TodoStatus::InProgress)
        .map(|t| format!(", now: {}", t.content))
        .unwrap_or_default();
    format!("{}{current}", progress_words(plan))
}

fn progress_words(plan: &[TodoItem]) -> String {
    let p = session::progress(plan);
    format!("{} of {} done", p.completed, p.total)
}
