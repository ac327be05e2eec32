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
