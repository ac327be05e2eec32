//! Tree mode: a parent session whose first answer starts two subagents in
//! parallel (`task` calls), the real `pod` binary killed with SIGKILL at
//! seeded random points and resumed until the parent has its answer.
//!
//! After every process, every session log in the home is checked as the
//! single-session harness checks one ([`check_log`]: it parses, its history
//! is valid, nothing committed before was lost or changed, the todos equal
//! the last accepted `todo_write`), and the tree is checked as a whole:
//! - there are never more than the two children, each named after one of
//!   the parent's `task` calls (its id derived from the parent's id and the
//!   call id, its header linking back);
//! - a child's log holds its task once: it was resumed, never started
//!   over (a log holding only its header is a child the kill caught before
//!   its task was appended; the resumed parent prompts it);
//! - a child's answers follow its script in order, none played twice from
//!   scratch;
//! - at the end, the parent's `task` results carry each child's final
//!   answer, and the parent gave its own.

use crate::check::{check_log, LogState};
use crate::harness::CrashError;
use crate::process::{self, KillPoint};
use crate::rng::Rng;
use crate::script::{plan, todo_call, workspace_call, write_workspace};
use pod::log::LogRecord;
use pod::PodHome;
use pod_llm::ItemKind;
use serde_json::{json, Value};
use std::collections::HashMap;
use std::path::PathBuf;
use std::process::Command;
use uuid::Uuid;

/// What to run.
#[derive(Debug, Clone)]
pub struct TreeConfig {
    /// The `pod` binary.
    pub pod: PathBuf,
    /// Kills to inject in total (over as many trees as it takes).
    pub kills: u64,
    /// The seed of every choice.
    pub seed: u64,
    /// Items in each child's plan.
    pub items: usize,
    /// Keep the temporary directories (kept on failure anyway).
    pub keep: bool,
}

impl TreeConfig {
    /// A config with 6-item plans per child.
    pub fn new(pod: impl Into<PathBuf>, kills: u64, seed: u64) -> Self {
        Self {
            pod: pod.into(),
            kills,
            seed,
            items: 6,
            keep: false,
        }
    }
}

/// Counts of a finished run.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TreeReport {
    /// The seed.
    pub seed: u64,
    /// Kills that landed.
    pub kills: u64,
    /// Kills that landed while a child was running (its session existed
    /// and had not answered).
    pub kills_in_children: u64,
    /// Trees driven to the parent's answer.
    pub trees_completed: u64,
    /// `pod` processes run.
    pub processes: u64,
    /// Child logs checked (one per child per process).
    pub child_checks: u64,
}

impl std::fmt::Display for TreeReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "seed {}: {} kills ({} while a child ran), {} trees completed, {} processes, \
             {} child log checks",
            self.seed,
            self.kills,
            self.kills_in_children,
            self.trees_completed,
            self.processes,
            self.child_checks
        )
    }
}

/// The two children's tasks: a key the script matches and the items each
/// checks.
const CHILDREN: [(&str, &str); 2] = [
    ("left", "Check the left half"),
    ("right", "Check the right half"),
];

/// The parent's final answer.
const PARENT_ANSWER: &str = "Both halves are checked.";

/// The script: the parent delegates both halves at once, then answers;
/// each child plans its half, works through it with read-only tools and
/// answers `"<name> half: N items checked"`.
fn script(rng: &mut Rng, items: usize) -> Value {
    let calls: Vec<Value> = CHILDREN
        .iter()
        .map(|(name, task)| {
            json!({"name": "task", "arguments": {"description": format!("{name} half"), "prompt": format!("{task} of notes/.")}})
        })
        .collect();
    let agents: Vec<Value> = CHILDREN
        .iter()
        .map(|(name, task)| {
            let mut steps = vec![json!({"text": format!("Planning the {name} half."), "tool_calls": [todo_call(plan(items, 0))]})];
            for i in 1..=items {
                let mut calls = vec![workspace_call(rng, i)];
                if rng.one_in(2) {
                    calls.push(workspace_call(rng, i));
                }
                steps.push(json!({"text": format!("{name} step {i}: looking."), "tool_calls": calls}));
                let mut step = json!({"text": format!("{name} step {i}: done."), "tool_calls": [todo_call(plan(items, i))]});
                if rng.one_in(4) {
                    step["delay_ms"] = json!(rng.range(1, 6));
                }
                steps.push(step);
            }
            steps.push(json!({"text": answer(name, items)}));
            json!({"task": task, "steps": steps})
        })
        .collect();
    json!({
        "model": crate::script::MODEL,
        "steps": [
            {"text": "Two independent halves: delegating both.", "tool_calls": calls},
            {"text": PARENT_ANSWER}
        ],
        "agents": agents
    })
}

fn answer(name: &str, items: usize) -> String {
    format!("{name} half: {items} items checked")
}

/// Runs trees until `config.kills` kills have landed.
pub fn run(config: &TreeConfig) -> Result<TreeReport, CrashError> {
    let mut rng = Rng::new(config.seed);
    let mut report = TreeReport {
        seed: config.seed,
        ..TreeReport::default()
    };
    let mut number = 0;
    while report.kills < config.kills {
        number += 1;
        let mut tree_rng = rng.fork();
        let dir = tempfile::Builder::new()
            .prefix("pod-crash-tree-")
            .tempdir()
            .map_err(|source| CrashError::Setup {
                path: std::env::temp_dir(),
                source,
            })?;
        let tree = Tree {
            config,
            number,
            root: dir.path().to_path_buf(),
        };
        tree.setup(&mut tree_rng)
            .map_err(|source| CrashError::Setup {
                path: tree.root.clone(),
                source,
            })?;
        let result = tree.run(&mut tree_rng, &mut report);
        if result.is_err() || config.keep {
            let _ = dir.keep();
        }
        result?;
        report.trees_completed += 1;
    }
    Ok(report)
}

struct Tree<'a> {
    config: &'a TreeConfig,
    number: u64,
    root: PathBuf,
}

/// What the checks remember between processes.
#[derive(Default)]
struct Seen {
    parent: Option<Uuid>,
    states: HashMap<Uuid, LogState>,
}

impl Tree<'_> {
    fn path(&self, name: &str) -> PathBuf {
        self.root.join(name)
    }

    fn setup(&self, rng: &mut Rng) -> std::io::Result<()> {
        for sub in ["home", "pod-home", "config", "data"] {
            std::fs::create_dir_all(self.path(sub))?;
        }
        write_workspace(&self.path("workspace"), self.config.items * 2)?;
        let script = script(rng, self.config.items);
        let bytes = serde_json::to_vec_pretty(&script).map_err(std::io::Error::other)?;
        std::fs::write(self.path("script.json"), bytes)
    }

    fn command(&self, parent: Option<Uuid>) -> Command {
        let mut cmd = process::isolated_pod(&self.config.pod, &self.root);
        match parent {
            None => {
                cmd.args(["run", "--json", "--provider", "scripted"])
                    .arg("--workspace")
                    .arg(self.path("workspace"));
            }
            Some(id) => {
                cmd.args([
                    "resume",
                    &id.to_string(),
                    "--json",
                    "--provider",
                    "scripted",
                ]);
            }
        }
        cmd.arg("--script").arg(self.path("script.json"));
        if parent.is_none() {
            cmd.arg("Check every note, the two halves in parallel.");
        }
        cmd
    }

    fn run(&self, rng: &mut Rng, report: &mut TreeReport) -> Result<(), CrashError> {
        let home = PodHome::new(self.path("pod-home"));
        let mut seen = Seen::default();
        // A full tree prints a few hundred events; kills land anywhere in
        // the first part of what is left.
        let events = (self.config.items as u64 * 2 * 14).max(20);
        let mut process = 0u64;
        loop {
            process += 1;
            let point = (report.kills < self.config.kills).then(|| match rng.one_in(4) {
                true => KillPoint::AfterTime {
                    us: rng.below(400_000),
                },
                false => KillPoint::AfterEvents {
                    events: rng.range(1, events),
                    delay_us: if rng.one_in(2) { rng.below(3_000) } else { 0 },
                },
            });
            let stderr = self.path(&format!("stderr-{process}.txt"));
            let outcome = process::run(self.command(seen.parent), point, &stderr)?;
            report.processes += 1;
            let kill = report.kills;
            let fail = |problems: Vec<String>| {
                CrashError::Violation(Box::new(crate::harness::Violation {
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
                return Err(fail(vec![problem]));
            }
            let children_running = self.check(&home, &mut seen, report).map_err(fail)?;
            if outcome.killed {
                report.kills += 1;
                report.kills_in_children += u64::from(children_running);
            }
            let Some(parent) = seen.parent else {
                // Killed before the parent's log existed: start over.
                continue;
            };
            if self.parent_answered(&seen, parent) {
                return self.final_check(&home, &seen, parent).map_err(fail);
            }
            if !outcome.killed {
                return Err(fail(vec!["pod exited 0 before the parent answered".into()]));
            }
        }
    }

    /// Checks every log; returns whether a child was mid-task.
    fn check(
        &self,
        home: &PodHome,
        seen: &mut Seen,
        report: &mut TreeReport,
    ) -> Result<bool, Vec<String>> {
        let mut problems = Vec::new();
        let ids = home
            .session_ids()
            .map_err(|e| vec![format!("cannot list sessions: {e}")])?;
        let mut running = false;
        let mut children = Vec::new();
        for id in ids {
            let previous = seen.states.remove(&id).unwrap_or_default();
            let state = match check_log(&home.log_path(id), &previous, &[]) {
                Ok(state) => state,
                Err(found) => {
                    problems.extend(found.into_iter().map(|p| format!("session {id}: {p}")));
                    continue;
                }
            };
            let header = read_header(home, id);
            match header.and_then(|h| h.parent) {
                None => match seen.parent {
                    Some(parent) if parent != id => {
                        problems.push(format!("a second top-level session {id} besides {parent}"))
                    }
                    _ => seen.parent = Some(id),
                },
                Some(link) => {
                    children.push((id, link));
                    report.child_checks += 1;
                    // No prompt yet is a state a kill leaves when it lands
                    // between the child's log creation and its task's
                    // append (the resumed parent prompts it then); the
                    // final check requires both children's answers.
                    let prompts = user_prompts(&state.records);
                    let holds_items = items(&state.records).next().is_some();
                    if prompts > 1 || (prompts == 0 && holds_items) {
                        problems.push(format!(
                            "child {id} holds its task {prompts} times: it was started over or lost it"
                        ));
                    }
                    problems.extend(script_order(id, &state.records));
                    running |= !answered(&state.records);
                }
            }
            seen.states.insert(id, state);
        }
        if children.len() > CHILDREN.len() {
            problems.push(format!(
                "{} children for {} task calls",
                children.len(),
                CHILDREN.len()
            ));
        }
        for (id, link) in &children {
            if Some(link.session_id) != seen.parent {
                problems.push(format!(
                    "child {id} names parent {}, not the tree's",
                    link.session_id
                ));
            }
            if pod::child_session_id(link.session_id, &link.call_id) != *id {
                problems.push(format!(
                    "child {id} is not the id its call {} derives",
                    link.call_id
                ));
            }
        }
        match problems.is_empty() {
            true => Ok(running),
            false => Err(problems),
        }
    }

    fn parent_answered(&self, seen: &Seen, parent: Uuid) -> bool {
        seen.states.get(&parent).is_some_and(|state| {
            state.records.iter().any(|r| matches!(r,
                LogRecord::Item(item) if matches!(&item.kind, ItemKind::Assistant { text, .. } if text == PARENT_ANSWER)))
        })
    }

    /// The parent's `task` results carry both children's final answers.
    fn final_check(&self, home: &PodHome, seen: &Seen, parent: Uuid) -> Result<(), Vec<String>> {
        let state = &seen.states[&parent];
        let results: Vec<&str> = state
            .records
            .iter()
            .filter_map(|r| match r {
                LogRecord::Item(item) => match &item.kind {
                    ItemKind::ToolResult {
                        content,
                        is_error: false,
                        ..
                    } => Some(content.as_str()),
                    _ => None,
                },
                _ => None,
            })
            .collect();
        let mut problems = Vec::new();
        for (name, _) in CHILDREN {
            let expected = answer(name, self.config.items);
            if !results.iter().any(|r| r.starts_with(&expected)) {
                problems.push(format!(
                    "the parent has no task result with {expected:?}: {results:?}"
                ));
            }
        }
        let children = home
            .session_ids()
            .unwrap_or_default()
            .len()
            .saturating_sub(1);
        if children != CHILDREN.len() {
            problems.push(format!(
                "{children} child sessions at the end, not {}",
                CHILDREN.len()
            ));
        }
        match problems.is_empty() {
            true => Ok(()),
            false => Err(problems),
        }
    }
}

fn read_header(home: &PodHome, id: Uuid) -> Option<pod::log::SessionHeader> {
    let path = home.log_path(id);
    let bytes = std::fs::read(&path).ok()?;
    pod::log::parse_log(&path, &bytes).ok()?.header
}

fn items(records: &[LogRecord]) -> impl Iterator<Item = &pod_llm::Item> {
    records.iter().filter_map(|r| match r {
        LogRecord::Item(item) => Some(item),
        _ => None,
    })
}

fn user_prompts(records: &[LogRecord]) -> usize {
    items(records)
        .filter(|i| matches!(i.kind, ItemKind::User { .. }))
        .count()
}

/// Whether the child's last item is its answer (no calls).
fn answered(records: &[LogRecord]) -> bool {
    matches!(items(records).last().map(|i| &i.kind),
        Some(ItemKind::Assistant { tool_calls, .. }) if tool_calls.is_empty())
}

/// A child's answers are its script's steps in order: the n-th answer's
/// text is step n's, so a child started over (or a step played twice)
/// shows as an answer out of place.
fn script_order(id: Uuid, records: &[LogRecord]) -> Vec<String> {
    let texts: Vec<&str> = items(records)
        .filter_map(|i| match &i.kind {
            ItemKind::Assistant { text, .. } => Some(text.as_str()),
            _ => None,
        })
        .collect();
    let mut problems = Vec::new();
    for (n, text) in texts.iter().enumerate() {
        let expected_step = match n {
            0 => text.starts_with("Planning the"),
            n if n == texts.len() - 1 && text.contains("items checked") => true,
            n => {
                let i = n.div_ceil(2);
                let kind = if n % 2 == 1 { "looking" } else { "done" };
                text.ends_with(&format!("step {i}: {kind}."))
            }
        };
        if !expected_step {
            problems.push(format!(
                "child {id}: answer {n} is {text:?}, out of its script's order"
            ));
        }
    }
    problems
}
