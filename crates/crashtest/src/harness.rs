//! The crash-injection loop: rounds of one long scripted session each, the
//! real `pod` binary killed with SIGKILL at seeded random points and resumed
//! until the plan is complete, the log checked after every kill.

use crate::ack::acknowledged;
use crate::check::{check_log, LogState};
use crate::process::{self, KillPoint, ProcessError, RunOutcome};
use crate::rng::Rng;
use crate::script::{self, SessionScript};
use pod::PodHome;
use std::path::PathBuf;
use std::process::Command;

/// When the log is fsynced (`pod --durability`). A SIGKILL loses nothing
/// under any of them; the harness runs each to prove it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Durability {
    /// fsync after every item.
    Always,
    /// fsync after every tool result (the default).
    Turn,
    /// Never fsync.
    Never,
}

impl Durability {
    /// The flag value.
    pub fn as_arg(self) -> &'static str {
        match self {
            Durability::Always => "always",
            Durability::Turn => "turn",
            Durability::Never => "never",
        }
    }
}

impl std::str::FromStr for Durability {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "always" => Ok(Durability::Always),
            "turn" => Ok(Durability::Turn),
            "never" => Ok(Durability::Never),
            other => Err(format!(
                "unknown durability {other:?} (always, turn, never)"
            )),
        }
    }
}

/// What to run.
#[derive(Debug, Clone)]
pub struct CrashConfig {
    /// The `pod` binary.
    pub pod: PathBuf,
    /// Kills to inject in total (over as many sessions as it takes).
    pub kills: u64,
    /// The seed of every choice (scripts and kill points).
    pub seed: u64,
    /// `--durability` for every run.
    pub durability: Durability,
    /// Items in each session's plan.
    pub items: usize,
    /// Keep the temporary directories (they are kept on failure anyway).
    pub keep: bool,
}

impl CrashConfig {
    /// A config with 20-item plans and durability `turn`.
    pub fn new(pod: impl Into<PathBuf>, kills: u64, seed: u64) -> Self {
        Self {
            pod: pod.into(),
            kills,
            seed,
            durability: Durability::Turn,
            items: 20,
            keep: false,
        }
    }
}

/// Counts of a finished run.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Report {
    /// The seed.
    pub seed: u64,
    /// Kills that landed (the process died of our SIGKILL).
    pub kills: u64,
    /// Kills that landed before the session was announced (a fresh session
    /// started over, or a resume re-run).
    pub kills_before_start: u64,
    /// Sessions driven to a complete plan.
    pub sessions_completed: u64,
    /// `pod` processes run.
    pub processes: u64,
    /// Processes that exited by themselves.
    pub natural_exits: u64,
    /// NDJSON lines read.
    pub events: u64,
    /// Acknowledgements checked against the log.
    pub acks_checked: u64,
    /// Logs found with a torn last line after a kill.
    pub torn_tails: u64,
    /// Torn last lines the harness appended after a kill (what a write cut
    /// by a power loss leaves), which the next resume must cut off.
    pub torn_injected: u64,
    /// Calls a kill left without a result (answered "interrupted" on resume).
    pub interrupted_calls: u64,
    /// Log checks run (one per process).
    pub checks: u64,
}

impl std::fmt::Display for Report {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "seed {}: {} kills ({} before the session was open), {} sessions completed, \
             {} processes ({} exited by themselves), {} log checks, {} events read, \
             {} acknowledgements verified, {} torn tails found ({} injected), \
             {} interrupted calls",
            self.seed,
            self.kills,
            self.kills_before_start,
            self.sessions_completed,
            self.processes,
            self.natural_exits,
            self.checks,
            self.events,
            self.acks_checked,
            self.torn_tails,
            self.torn_injected,
            self.interrupted_calls
        )
    }
}

/// A check failed: everything needed to reproduce and look.
#[derive(Debug)]
pub struct Violation {
    /// The seed of the whole run.
    pub seed: u64,
    /// Round (session) number, 1-based.
    pub round: u64,
    /// Process number within the round, 1-based.
    pub process: u64,
    /// Kills before this one.
    pub kill: u64,
    /// Where the process was to be killed (`None`: it ran to the end).
    pub point: Option<KillPoint>,
    /// Lines the process printed.
    pub events_read: usize,
    /// What is wrong.
    pub problems: Vec<String>,
    /// The kept directory (POD_HOME, workspace, script, stderr files).
    pub dir: PathBuf,
}

impl std::fmt::Display for Violation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let point = self
            .point
            .map_or("none (ran to the end)".to_string(), |p| p.to_string());
        writeln!(
            f,
            "crash check failed: seed {} round {} process {} (kill #{}), kill point {point}, \
             {} events read; files kept in {}",
            self.seed,
            self.round,
            self.process,
            self.kill + 1,
            self.events_read,
            self.dir.display()
        )?;
        for problem in &self.problems {
            writeln!(f, "  - {problem}")?;
        }
        write!(
            f,
            "reproduce: pod-crash --seed {} --kills N (same N)",
            self.seed
        )
    }
}

/// Why a harness run stopped.
#[derive(Debug, thiserror::Error)]
pub enum CrashError {
    /// A check failed.
    #[error("{0}")]
    Violation(Box<Violation>),
    /// A process could not be run.
    #[error("{0}")]
    Process(#[from] ProcessError),
    /// Setting up a round failed.
    #[error("cannot set up a round in {path}: {source}")]
    Setup {
        /// Where.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
}

/// Running averages that size the kill-point distributions.
#[derive(Debug, Clone)]
struct Pace {
    events_per_step: f64,
    us_per_step: f64,
    startup_us: f64,
}

impl Pace {
    fn learn(&mut self, outcome: &RunOutcome, steps: usize) {
        if steps == 0 {
            return;
        }
        let steps = steps as f64;
        let events = outcome.lines.len() as f64 / steps;
        let us = outcome.elapsed.as_micros() as f64 / steps;
        self.events_per_step = 0.8 * self.events_per_step + 0.2 * events;
        self.us_per_step = 0.8 * self.us_per_step + 0.2 * us;
    }

    fn choose(&self, rng: &mut Rng, steps_left: usize) -> KillPoint {
        let steps_left = steps_left.max(1) as f64;
        if rng.one_in(4) {
            let span = self.startup_us + steps_left * self.us_per_step;
            KillPoint::AfterTime {
                us: rng.below(span.max(1.0) as u64),
            }
        } else {
            let span = (steps_left * self.events_per_step).max(2.0) as u64;
            KillPoint::AfterEvents {
                events: rng.range(1, span),
                delay_us: if rng.one_in(2) { rng.below(2_000) } else { 0 },
            }
        }
    }
}

/// Runs rounds until `config.kills` kills have landed; returns the counts
/// or the first violation.
pub fn run(config: &CrashConfig) -> Result<Report, CrashError> {
    let mut rng = Rng::new(config.seed);
    let mut report = Report {
        seed: config.seed,
        ..Report::default()
    };
    let mut pace = Pace {
        events_per_step: 6.0,
        us_per_step: 2_000.0,
        startup_us: 30_000.0,
    };
    let mut number = 0;
    while report.kills < config.kills {
        number += 1;
        let mut round_rng = rng.fork();
        let mut round = Round::new(config, number, &mut round_rng)?;
        let result = round.run(&mut round_rng, &mut pace, &mut report);
        if result.is_err() || config.keep {
            round.keep();
        }
        result?;
        report.sessions_completed += 1;
    }
    Ok(report)
}

/// One session from its first `run` to its completed plan.
struct Round<'a> {
    config: &'a CrashConfig,
    number: u64,
    root: PathBuf,
    // Removed on drop unless kept (failures keep it for the post-mortem).
    dir: Option<tempfile::TempDir>,
    script: SessionScript,
}

impl<'a> Round<'a> {
    fn new(config: &'a CrashConfig, number: u64, rng: &mut Rng) -> Result<Self, CrashError> {
        let dir = tempfile::Builder::new()
            .prefix("pod-crash-")
            .tempdir()
            .map_err(|source| CrashError::Setup {
                path: std::env::temp_dir(),
                source,
            })?;
        let round = Self {
            config,
            number,
            script: script::generate(rng, config.items),
            root: dir.path().to_path_buf(),
            dir: Some(dir),
        };
        round.setup().map_err(|source| CrashError::Setup {
            path: round.root.clone(),
            source,
        })?;
        Ok(round)
    }

    fn path(&self, name: &str) -> PathBuf {
        self.root.join(name)
    }

    fn setup(&self) -> std::io::Result<()> {
        for sub in ["home", "pod-home", "config", "data"] {
            std::fs::create_dir_all(self.path(sub))?;
        }
        script::write_workspace(&self.path("workspace"), self.config.items)?;
        let script =
            serde_json::to_vec_pretty(&self.script.script).map_err(std::io::Error::other)?;
        std::fs::write(self.path("script.json"), script)
    }

    /// `pod` in this round's isolated environment.
    fn pod(&self) -> Command {
        process::isolated_pod(&self.config.pod, &self.root)
    }

    fn command(&self, session: Option<&str>) -> Command {
        let mut cmd = self.pod();
        match session {
            None => {
                cmd.args(["run", "--json", "--until-done", "--provider", "scripted"])
                    .arg("--workspace")
                    .arg(self.path("workspace"));
            }
            Some(id) => {
                cmd.args([
                    "resume",
                    id,
                    "--json",
                    "--until-done",
                    "--provider",
                    "scripted",
                ]);
            }
        }
        cmd.args(["--durability", self.config.durability.as_arg()])
            .arg("--script")
            .arg(self.path("script.json"));
        if session.is_none() {
            cmd.arg(format!("Check the {} items in notes/.", self.config.items));
        }
        cmd
    }

    fn run(&self, rng: &mut Rng, pace: &mut Pace, report: &mut Report) -> Result<(), CrashError> {
        let home = PodHome::new(self.path("pod-home"));
        let mut state = LogState::default();
        let mut session: Option<String> = None;
        let mut process = 0u64;
        loop {
            process += 1;
            let done_steps = state.assistant_items();
            let steps_left = self.script.steps.saturating_sub(done_steps);
            // Stop killing once the budget is spent, or when the script's
            // tail is nearly used up: each kill may swallow one step, and
            // the session must still be able to finish.
            let point = (report.kills < self.config.kills && steps_left > 4)
                .then(|| pace.choose(rng, steps_left));
            let stderr = self.path(&format!("stderr-{process}.txt"));
            let outcome = process::run(self.command(session.as_deref()), point, &stderr)?;
            report.processes += 1;
            report.events += outcome.lines.len() as u64;
            let fail = |problems: Vec<String>, kill: u64| {
                CrashError::Violation(Box::new(Violation {
                    seed: self.config.seed,
                    round: self.number,
                    process,
                    kill,
                    point,
                    events_read: outcome.lines.len(),
                    problems,
                    dir: self.root.clone(),
                }))
            };
            if let Some(problem) = outcome.unexpected_exit(&stderr) {
                return Err(fail(vec![problem], report.kills));
            }
            let announced = announced_session(&outcome.lines);
            if session.is_none() {
                session = announced.clone();
            }
            let Some(id) = session.clone() else {
                // Killed before the session was announced: nothing was
                // acknowledged. A half-created session is left behind;
                // start over in a clean home.
                report.kills += u64::from(outcome.killed);
                report.kills_before_start += u64::from(outcome.killed);
                for stale in home.session_ids().unwrap_or_default() {
                    let _ = std::fs::remove_dir_all(home.session_dir(stale));
                }
                continue;
            };
            let log = match uuid::Uuid::parse_str(&id) {
                Ok(uuid) => home.log_path(uuid),
                Err(_) => return Err(fail(vec![format!("bad session id {id:?}")], report.kills)),
            };
            let acks = acknowledged(&outcome.lines);
            state = check_log(&log, &state, &acks).map_err(|p| fail(p, report.kills))?;
            report.checks += 1;
            report.acks_checked += acks.len() as u64;
            report.torn_tails += u64::from(state.torn_tail);
            pace.learn(&outcome, state.assistant_items().saturating_sub(done_steps));
            if outcome.killed {
                report.kills += 1;
                report.interrupted_calls += state.unanswered as u64;
                if announced.is_none() {
                    report.kills_before_start += 1;
                }
                if !state.complete() && rng.one_in(5) {
                    tear_tail(&log, rng).map_err(|e| fail(vec![e.to_string()], report.kills))?;
                    report.torn_injected += 1;
                }
            } else {
                report.natural_exits += 1;
                if !state.complete() {
                    return Err(fail(
                        vec!["pod exited 0 but the plan is not complete".into()],
                        report.kills,
                    ));
                }
            }
            if state.complete() {
                return self
                    .final_check(&id, &state)
                    .map_err(|p| fail(p, report.kills));
            }
        }
    }

    /// `pod show --json` agrees with the log's oracle.
    fn final_check(&self, id: &str, state: &LogState) -> Result<(), Vec<String>> {
        let out = self
            .pod()
            .args(["show", id, "--json"])
            .output()
            .map_err(|e| vec![format!("pod show: {e}")])?;
        if !out.status.success() {
            return Err(vec![format!(
                "pod show failed: {}",
                String::from_utf8_lossy(&out.stderr)
            )]);
        }
        let shown: serde_json::Value =
            serde_json::from_slice(&out.stdout).map_err(|e| vec![format!("pod show: {e}")])?;
        let todos: Vec<pod_tools::TodoItem> = serde_json::from_value(shown["todos"].clone())
            .map_err(|e| vec![format!("pod show todos: {e}")])?;
        let oracle = crate::oracle::last_accepted_todos(&state.records);
        if todos != oracle {
            return Err(vec![format!(
                "pod show lists {todos:?}, the last accepted todo_write is {oracle:?}"
            )]);
        }
        Ok(())
    }

    fn keep(&mut self) {
        if let Some(dir) = self.dir.take() {
            let _ = dir.keep();
        }
    }
}

/// Appends the start of a log line, cut short: a write that a power loss
/// interrupted. Nothing acknowledged is touched; the next resume must cut
/// these bytes off before it appends.
fn tear_tail(log: &std::path::Path, rng: &mut Rng) -> std::io::Result<()> {
    use std::io::Write;
    let record = pod::log::LogRecord::Item(pod_llm::Item::user("a line cut by a power loss"));
    let line = pod::log::encode_line(&record).map_err(std::io::Error::other)?;
    // Anything from one byte to all but the newline.
    let cut = 1 + rng.below(line.len() as u64 - 1) as usize;
    let mut file = std::fs::OpenOptions::new().append(true).open(log)?;
    file.write_all(&line[..cut])
}

fn announced_session(lines: &[String]) -> Option<String> {
    let first: serde_json::Value = serde_json::from_str(lines.first()?).ok()?;
    (first["event"] == "session_started")
        .then(|| first["session_id"].as_str().map(String::from))
        .flatten()
}
