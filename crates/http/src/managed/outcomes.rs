//! `user.define_outcome`: the Managed Agents API's outcomes are pod's
//! verified goals. The outcome's description is the session's task, its
//! text rubric the grader's rubric, `max_iterations` its failed rounds
//! before the run stops unverified, and the grader the agent's model (a
//! profile of the server's config). Each verification round the log
//! records (`LogRecord::Verify`) is told as a `span.outcome_evaluation_start`
//! and `span.outcome_evaluation_end` pair, and summed up in the session's
//! `outcome_evaluations`.

use super::error::Error;
use chrono::{DateTime, Utc};
use pod::log::VerifyRecord;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

/// `max_iterations` when the client gives none (the API's default).
const DEFAULT_ITERATIONS: u32 = 3;
/// The most `max_iterations` the API allows.
const MAX_ITERATIONS: u32 = 20;

/// An outcome a session works toward, as pod keeps it.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub(crate) struct Outcome {
    /// `outc_` and 32 hex digits.
    pub id: String,
    pub description: String,
    /// The rubric's text.
    pub rubric: String,
    pub max_iterations: u32,
}

impl Outcome {
    /// The outcome a `user.define_outcome` event defines.
    pub fn parse(event: &Value) -> Result<Self, Error> {
        let description = event
            .get("description")
            .and_then(Value::as_str)
            .filter(|d| !d.trim().is_empty())
            .ok_or_else(|| Error::invalid("a user.define_outcome needs a `description`"))?;
        let rubric = event
            .get("rubric")
            .ok_or_else(|| Error::invalid("a user.define_outcome needs a `rubric`"))?;
        let rubric = match rubric.get("type").and_then(Value::as_str) {
            Some("text") => rubric
                .get("content")
                .and_then(Value::as_str)
                .filter(|c| !c.trim().is_empty())
                .ok_or_else(|| Error::invalid("a text rubric needs its `content`"))?,
            Some("file") => return Err(Error::unsupported("file rubrics (send the text)")),
            _ => return Err(Error::invalid("`rubric.type` must be text or file")),
        };
        let max_iterations = match event.get("max_iterations") {
            None | Some(Value::Null) => DEFAULT_ITERATIONS,
            Some(n) => n
                .as_u64()
                .and_then(|n| u32::try_from(n).ok())
                .filter(|n| (1..=MAX_ITERATIONS).contains(n))
                .ok_or_else(|| {
                    Error::invalid(format!(
                        "`max_iterations` must be from 1 to {MAX_ITERATIONS}"
                    ))
                })?,
        };
        Ok(Self {
            id: format!("outc_{}", uuid::Uuid::new_v4().simple()),
            description: description.to_string(),
            rubric: rubric.to_string(),
            max_iterations,
        })
    }

    /// The `user.define_outcome` event of the session's first prompt.
    pub fn defined(&self, id: String, at: DateTime<Utc>) -> Value {
        json!({
            "id": id, "type": "user.define_outcome", "processed_at": at,
            "outcome_id": self.id,
            "description": self.description,
            "rubric": {"type": "text", "content": self.rubric},
            "max_iterations": self.max_iterations,
        })
    }

    /// What round `round` of verification concluded.
    fn result(&self, round: &VerifyRecord) -> &'static str {
        match (round.passed, round.round >= self.max_iterations) {
            (true, _) => "satisfied",
            (false, true) => "max_iterations_reached",
            (false, false) => "needs_revision",
        }
    }

    /// The two span events of a verification round recorded at `seq`.
    pub fn spans(&self, seq: usize, round: &VerifyRecord) -> [Value; 2] {
        let start = format!("sevt_{seq:08}_eval_start");
        let iteration = round.round.saturating_sub(1);
        let usage = round.grader.as_ref().map(|g| g.usage).unwrap_or_default();
        [
            json!({
                "id": start, "type": "span.outcome_evaluation_start", "processed_at": round.at,
                "outcome_id": self.id, "iteration": iteration,
            }),
            json!({
                "id": format!("sevt_{seq:08}_eval_end"), "type": "span.outcome_evaluation_end",
                "processed_at": round.at, "outcome_id": self.id, "iteration": iteration,
                "outcome_evaluation_start_id": start,
                "result": self.result(round),
                "explanation": explanation(round),
                "usage": {
                    "input_tokens": usage.prompt_tokens.saturating_sub(usage.cache_read_tokens),
                    "output_tokens": usage.completion_tokens,
                    "cache_read_input_tokens": usage.cache_read_tokens,
                    "cache_creation_input_tokens": 0,
                },
            }),
        ]
    }

    /// The session's `outcome_evaluations`: this outcome, as its last
    /// verification round left it (`running` before the first).
    pub fn evaluations(&self, last: Option<&VerifyRecord>) -> Value {
        let (iteration, result, explanation, completed_at) = match last {
            None => (0, "running", None, None),
            Some(round) => {
                let result = self.result(round);
                let done = result != "needs_revision";
                (
                    round.round.saturating_sub(1),
                    if done { result } else { "running" },
                    Some(explanation(round)),
                    done.then_some(round.at),
                )
            }
        };
        json!([{
            "type": "outcome_evaluation", "outcome_id": self.id,
            "description": self.description, "iteration": iteration,
            "result": result, "explanation": explanation, "completed_at": completed_at,
        }])
    }
}

/// Why a round ended as it did: the grader's reasons, or the check that
/// failed.
fn explanation(round: &VerifyRecord) -> String {
    if let Some(grader) = &round.grader {
        if let Some(error) = &grader.error {
            return format!("no verdict: {error}");
        }
        if !grader.reasons.is_empty() {
            return grader.reasons.join("; ");
        }
    }
    match round.checks.iter().find(|c| c.exit_code != Some(0)) {
        Some(check) => format!("the check `{}` failed", check.command),
        None if round.passed => "every check and the grader passed".into(),
        None => "the grader found the work unfinished".into(),
    }
}
