//! Where `run` and `resume` report: human text or NDJSON on stdout.

mod human;
mod json;
mod live;

pub use human::HumanOutput;
pub use json::JsonOutput;

use anyhow::Result;
use pod::PodEvent;
use pod_launch::sessions::Progress;
use pod_worker::{Limit, TurnEndReason};
use serde::Serialize;
use uuid::Uuid;

/// A session is being driven.
#[derive(Debug, Clone, Serialize)]
pub struct Started {
    /// Session id.
    pub session_id: Uuid,
    /// Where its log is.
    pub log_path: String,
    /// The store it is in.
    #[serde(skip)]
    pub store: pod::Store,
    /// Whether it was resumed (else it is new).
    pub resumed: bool,
    /// The model's name.
    pub model: String,
    /// The profile's prices, when it has them (for the cost shown).
    #[serde(skip)]
    pub prices: Option<pod_llm::Prices>,
    /// Where the model's key comes from (for a refused key's hint).
    #[serde(skip)]
    pub key: Option<String>,
}

/// Driving ended.
#[derive(Debug, Clone, Serialize)]
pub struct Finished {
    /// Session id.
    pub session_id: Uuid,
    /// Where its log is.
    pub log_path: String,
    /// How the last turn ended (none when it failed).
    pub reason: Option<TurnEndReason>,
    /// Model requests made.
    pub requests: u32,
    /// Tokens this run's answers used.
    pub usage: pod_llm::Usage,
    /// Tokens of every answer of the session so far (from its log).
    pub session_usage: pod_llm::Usage,
    /// Todo progress at the end.
    pub todos: Progress,
    /// Whether it was interrupted (Ctrl-C, end of input at a prompt, a
    /// closed stdout).
    pub interrupted: bool,
    /// Why it stopped with work left, when it did.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stopped: Option<Stopped>,
    /// Tools whose calls were answered without running (refused by the
    /// approval policy, or not run after the turn was stopped), in order.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub not_run: Vec<String>,
    /// Calls refused before they ran, with who refused them and why.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub refused: Vec<Refused>,
    /// Whether the run's last verification round passed (`--verify`); none
    /// when no round ran.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub verified: Option<bool>,
}

/// A run that ended by itself before its work was done.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Stopped {
    /// The budget limit that stopped it; `None` when the model ended its
    /// turn with the plan unfinished in `--until-done` mode.
    pub limit: Option<Limit>,
    /// One line for people.
    pub message: String,
}

/// A front end for one driven session.
pub trait Output: Send {
    /// The session id is known.
    fn started(&mut self, started: &Started) -> Result<()>;
    /// Something happened in the Pod.
    fn event(&mut self, event: &PodEvent) -> Result<()>;
    /// The front end missed `count` events (it fell behind).
    fn lagged(&mut self, count: u64) -> Result<()>;
    /// A message from the CLI itself (e.g. "cancelling").
    fn note(&mut self, text: &str) -> Result<()>;
    /// A question is about to be asked on stderr: end the current line and
    /// stop treating what is on screen as ours to redraw.
    fn prompting(&mut self) -> Result<()> {
        Ok(())
    }
    /// Whether it wants [`tick`](Self::tick)s (a live status line).
    fn ticks(&self) -> bool {
        false
    }
    /// Time passed (a live status line's clock and spinner).
    fn tick(&mut self) -> Result<()> {
        Ok(())
    }
    /// Driving is over.
    fn finished(&mut self, finished: &Finished) -> Result<()>;
    /// Whether `finished` shows people how to continue on stdout (else the
    /// driver says it on stderr).
    fn shows_hints_on_stdout(&self) -> bool {
        false
    }
}

/// Writes `text` to stderr; an error (a closed stderr) is returned, never
/// a panic as with `eprint!`.
pub fn eprint(text: &str) -> std::io::Result<()> {
    use std::io::Write;
    let mut err = std::io::stderr().lock();
    err.write_all(text.as_bytes()).and_then(|()| err.flush())
}

/// Writes `text` to stdout; a closed pipe is an error (reported silently by
/// `error::report`), never a panic as with `print!`.
pub fn print(text: &str) -> Result<()> {
    use anyhow::Context;
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    out.write_all(text.as_bytes())
        .and_then(|()| out.flush())
        .context("cannot write to stdout")
}

/// The output `--json` selects.
pub fn for_flags(json: bool) -> Box<dyn Output> {
    if json {
        Box::new(JsonOutput::new())
    } else {
        Box::new(HumanOutput::new(crate::style::Style::for_stdout()))
    }
}

/// A call refused before it ran.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Refused {
    /// Its tool.
    pub tool: String,
    /// What refused it.
    pub by: pod::NotRunBy,
    /// Why, in words.
    pub reason: String,
}

/// The lines that say which calls did not run and what changes that: one
/// per cause (a hook, the policy, a person, nobody to ask, a timeout), and
/// one for calls that did not run for want of a turn (it was stopped).
pub fn not_run_lines(finished: &Finished) -> Vec<String> {
    use crate::render::{plural, safe};
    let mut lines = Vec::new();
    let mut causes: Vec<pod::NotRunBy> = Vec::new();
    for refused in &finished.refused {
        if !causes.contains(&refused.by) {
            causes.push(refused.by);
        }
    }
    let mut counted = 0;
    for by in causes {
        let of: Vec<&Refused> = finished.refused.iter().filter(|r| r.by == by).collect();
        counted += of.len();
        let tools = distinct(of.iter().map(|r| r.tool.as_str()));
        let why = match by {
            pod::NotRunBy::Hook => format!(
                "blocked by the operator's PreToolUse hook: {} (change the hook, or its --hooks file)",
                safe::line(&of[0].reason)
            ),
            other => other.remedy().to_string(),
        };
        lines.push(format!(
            "{} not run ({}): {why}",
            plural(of.len(), "tool call"),
            safe::line(&tools.join(", "))
        ));
    }
    let rest = finished.not_run.len().saturating_sub(counted);
    if rest > 0 {
        let refused: Vec<&str> = finished.refused.iter().map(|r| r.tool.as_str()).collect();
        let tools = distinct(
            finished
                .not_run
                .iter()
                .map(String::as_str)
                .filter(|t| !refused.contains(t)),
        );
        lines.push(format!(
            "{} not run{}: the turn ended before they could",
            plural(rest, "tool call"),
            match tools.is_empty() {
                true => String::new(),
                false => format!(" ({})", safe::line(&tools.join(", "))),
            }
        ));
    }
    lines
}

/// The names once each, in first-seen order.
fn distinct<'a>(names: impl Iterator<Item = &'a str>) -> Vec<&'a str> {
    let mut seen: Vec<&str> = Vec::new();
    for name in names {
        if !seen.contains(&name) {
            seen.push(name);
        }
    }
    seen
}
