//! Done means verified: when a run would end (the model answered without
//! a tool call and its plan, if it has one, is complete), the operator's
//! checks run in the workspace under the session's sandbox, and, when they
//! all pass and a grader is set, a separate model judges the work against a
//! rubric. All pass: the run ends, verified. One fails: what it said goes
//! back to the model as a `<system-reminder>` and the run goes on. After
//! [`VerifyConfig::max_rounds`] failed rounds in a row the run stops,
//! unverified ([`pod_worker::TurnEndReason::GoalUnmet`]).
//!
//! Each round is a [`VerifyRecord`] in the log, written when it is over: a
//! recorded verdict is never computed again, and a round a crash cut short
//! (no record) runs again, once, when the session is continued
//! ([`Verifier::on_resume`]).
//!
//! [`VerifyGate`] puts it in the stack: it wraps the Pod's other
//! interceptors and asks for a round only when they would all let the turn
//! end, so a `Stop` hook that blocks, or until-done continuing an
//! unfinished plan, goes first.

pub(crate) mod gate;
mod grader;
mod round;

pub use gate::VerifyGate;
pub use round::{final_answer, gave_up};
pub(crate) use round::{Resume, Verifier, VerifierParts};

use crate::log::VerifyRecord;
use pod_llm::{Prices, Provider};
use std::sync::Arc;
use std::time::Duration;

/// What verifies a session's runs.
#[derive(Clone)]
pub struct VerifyConfig {
    /// The checks, run in order; a round stops at the first that fails.
    pub checks: Vec<Check>,
    /// How long one check may run.
    pub timeout: Duration,
    /// Failed rounds in a row after which the run stops, unverified.
    pub max_rounds: u32,
    /// The grader, asked when every check passed.
    pub grader: Option<Grader>,
}

impl std::fmt::Debug for VerifyConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("VerifyConfig")
            .field("checks", &self.checks)
            .field("timeout", &self.timeout)
            .field("max_rounds", &self.max_rounds)
            .field("grader", &self.grader.as_ref().map(|g| &g.profile))
            .finish()
    }
}

/// Failed rounds in a row after which a run stops unverified, by default.
pub const DEFAULT_MAX_ROUNDS: u32 = 3;

/// How long a check may run, by default.
pub const DEFAULT_CHECK_TIMEOUT: Duration = Duration::from_secs(600);

/// The end of a check's output kept in its record and told to the model:
/// errors are at the end, and a long test log would crowd the context.
pub const OUTPUT_TAIL_BYTES: usize = 4_000;

/// One check: a command line, run with `bash -c` in the workspace.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Check {
    /// Its name, when the config named it.
    pub name: Option<String>,
    /// The command line.
    pub command: String,
}

/// A model that judges the work against a rubric, in a context of its own.
#[derive(Clone)]
pub struct Grader {
    /// Its model.
    pub provider: Arc<dyn Provider>,
    /// The profile it comes from (for what people read).
    pub profile: String,
    /// What "done" means, in the operator's words.
    pub rubric: String,
    /// Its prices, when its profile has them: its cost is the session's.
    pub prices: Option<Prices>,
}

/// How a round went.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Round {
    /// Every check (and the grader) passed.
    Passed,
    /// One failed: this reminder goes to the model.
    Failed {
        /// The `<system-reminder>` text.
        reminder: String,
    },
    /// One failed and the rounds are spent, or the grader could not be
    /// asked: the run stops, unverified, for this reason.
    GaveUp {
        /// What, in words.
        why: String,
    },
    /// The run was cancelled while a check ran: nothing was recorded.
    Cancelled,
}

/// What a failed round tells the model.
pub fn reminder(record: &VerifyRecord, max_rounds: u32) -> String {
    let mut text = format!(
        "<system-reminder>\nYou ended your turn, but the operator's checks did not pass \
         (verification round {} of at most {max_rounds}). The work is not done until they pass.\n",
        record.round
    );
    for check in &record.checks {
        text.push('\n');
        text.push_str(&check_line(check));
        text.push('\n');
        if !check.passed() && !check.output_tail.is_empty() {
            text.push_str("Its output ends with:\n");
            text.push_str(check.output_tail.trim_end());
            text.push('\n');
        }
    }
    if let Some(verdict) = record.grader.as_ref().filter(|v| !v.passed) {
        text.push_str("\nEvery check passed, but the grader judged the work against the rubric ");
        text.push_str("and found it not done:\n");
        for reason in &verdict.reasons {
            text.push_str(&format!("- {reason}\n"));
        }
    }
    text.push_str(
        "\nReopen the plan items this concerns (todo_write), fix the cause, run the failing \
         check yourself to see it pass, then end your turn again: the checks run again then.\n\
         </system-reminder>",
    );
    text
}

/// One check's outcome, in a line.
pub fn check_line(check: &crate::log::CheckRecord) -> String {
    let how = match (&check.error, check.timed_out, check.exit_code, check.signal) {
        (Some(error), ..) => format!("could not run: {error}"),
        (None, true, ..) => "timed out and was killed".to_string(),
        (None, false, Some(code), _) => format!("exit code {code}"),
        (None, false, None, Some(signal)) => format!("killed by signal {signal}"),
        (None, false, None, None) => "ended without an exit code".to_string(),
    };
    format!("$ {}  ->  {how}", check.command)
}

/// The end of a check's output as a round keeps it.
pub fn output_tail(output: &str) -> String {
    tail(output, OUTPUT_TAIL_BYTES)
}

/// The last `max` bytes of `text` (cut at a character boundary), marked
/// when cut.
pub(crate) fn tail(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_string();
    }
    let mut start = text.len() - max;
    while !text.is_char_boundary(start) {
        start += 1;
    }
    format!("[… {} bytes before]\n{}", start, &text[start..])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::log::CheckRecord;

    fn check(exit: i32, output: &str) -> CheckRecord {
        CheckRecord {
            name: None,
            command: "python3 test_x.py".into(),
            exit_code: Some(exit),
            signal: None,
            timed_out: false,
            error: None,
            output_tail: output.into(),
            duration_ms: 420,
        }
    }

    #[test]
    fn a_failed_round_tells_the_model_the_command_its_exit_and_its_output() {
        let record = VerifyRecord {
            round: 2,
            answer: uuid::Uuid::nil(),
            checks: vec![check(0, "ok\n"), check(1, "AssertionError: 3 != 4\n")],
            grader: None,
            passed: false,
            at: chrono::Utc::now(),
        };
        let text = reminder(&record, 3);
        assert!(text.starts_with("<system-reminder>"), "{text}");
        assert!(text.contains("round 2 of at most 3"), "{text}");
        assert!(
            text.contains("$ python3 test_x.py  ->  exit code 1\n"),
            "{text}"
        );
        assert!(text.contains("AssertionError: 3 != 4"), "{text}");
        // A passing check's output is not repeated.
        assert!(!text.contains("ok\n"), "{text}");
        assert!(text.ends_with("</system-reminder>"), "{text}");
    }

    #[test]
    fn a_tail_keeps_the_end_at_a_character_boundary() {
        assert_eq!(tail("short", 10), "short");
        let long = format!("{}é-end", "a".repeat(20));
        let cut = tail(&long, 5);
        assert!(cut.ends_with("-end"), "{cut}");
        assert!(cut.starts_with("[… "), "{cut}");
    }
}
