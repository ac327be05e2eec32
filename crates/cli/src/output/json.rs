//! `--json`: one JSON object per line on stdout.
//!
//! The stream is framed by two objects of the CLI's own, tagged like the
//! `PodEvent`s between them: `{"event":"session_started",...}` first and
//! `{"event":"session_finished",...}` last. Diagnostics never go here.

use super::{Finished, Output, Started};
use anyhow::{Context, Result};
use pod::PodEvent;
use serde::Serialize;
use std::io::Write;

/// NDJSON on stdout.
pub struct JsonOutput {
    out: std::io::Stdout,
}

#[derive(Serialize)]
#[serde(tag = "event", rename_all = "snake_case")]
enum Frame<'a> {
    SessionStarted(&'a Started),
    SessionFinished(&'a Finished),
    Lagged { missed: u64 },
}

impl JsonOutput {
    /// Writes to stdout.
    pub fn new() -> Self {
        Self {
            out: std::io::stdout(),
        }
    }

    fn line(&mut self, value: &impl Serialize) -> Result<()> {
        let line = crate::render::safe::json(value, false).context("cannot encode an event")?;
        let mut out = self.out.lock();
        // A reader acts on each event as it comes: flush per line.
        out.write_all(line.as_bytes())
            .and_then(|()| out.write_all(b"\n"))
            .and_then(|()| out.flush())
            .context("cannot write to stdout")
    }
}

impl Output for JsonOutput {
    fn started(&mut self, started: &Started) -> Result<()> {
        self.line(&Frame::SessionStarted(started))
    }

    fn event(&mut self, event: &PodEvent) -> Result<()> {
        self.line(event)
    }

    fn lagged(&mut self, missed: u64) -> Result<()> {
        self.line(&Frame::Lagged { missed })
    }

    fn note(&mut self, text: &str) -> Result<()> {
        // Notes are for people; stdout stays machine-readable. A closed
        // stderr loses them.
        let _ = super::eprint(&format!("{}\n", crate::render::safe::text(text)));
        Ok(())
    }

    fn finished(&mut self, finished: &Finished) -> Result<()> {
        self.line(&Frame::SessionFinished(finished))
    }
}
