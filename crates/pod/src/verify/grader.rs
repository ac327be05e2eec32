//! The grader: one request to a model of its own, in a fresh context,
//! with the task, the rubric, the checks' results and what the session
//! changed, answered with a verdict as JSON.

use super::{check_line, Grader};
use crate::log::{CheckRecord, VerdictRecord};
use pod_llm::{Item, ItemKind, Usage};
use pod_worker::{Budget, NoopInterceptor, NullObserver, ToolRegistry, Worker, WorkerConfig};
use tokio_util::sync::CancellationToken;

/// The most of the session's diff the grader is shown: a large change is
/// cut, and the grader told so.
const DIFF_BYTES: usize = 60_000;

/// What the grader is and must answer.
const GRADER_PROMPT: &str = "You are a strict reviewer of a coding agent's finished work. You \
judge whether the work meets the operator's rubric, from what you are given: the task, the \
rubric, the results of the operator's checks (they all passed) and the diff of every file the \
agent changed. You cannot run commands or read files. Judge only against the rubric; do not \
ask for more than it asks. Answer with one JSON object and nothing else: \
{\"verdict\": \"pass\" or \"fail\", \"reasons\": [\"one short reason per point\"]}. On a fail, \
each reason says what is missing or wrong, so that the agent can fix it.";

/// Asks `grader` for a verdict on the work.
pub(crate) async fn grade(
    grader: &Grader,
    task: &str,
    checks: &[CheckRecord],
    diff: String,
    cancel: &CancellationToken,
) -> VerdictRecord {
    let model = grader.provider.model_name();
    let config = WorkerConfig {
        system_prompt: GRADER_PROMPT.into(),
        budget: Budget {
            requests_per_turn: 1,
            ..Budget::default()
        },
        ..WorkerConfig::default()
    };
    // A worker with no tools: the grader can only answer.
    let mut worker = Worker::new(grader.provider.clone(), ToolRegistry::new(), config);
    let input = input(task, &grader.rubric, checks, &diff);
    let outcome = worker
        .run_turn(
            Some(Item::user(input)),
            &mut NoopInterceptor,
            &mut NullObserver,
            cancel,
        )
        .await;
    let (usage, answer) = match outcome {
        Ok(outcome) => (outcome.usage, last_text(worker.history())),
        Err(err) => {
            return verdict_error(
                model,
                Usage::default(),
                grader,
                format!("the request failed: {}", pod_llm::error_chain(&err)),
            )
        }
    };
    match parse(&answer) {
        Ok((passed, reasons)) => VerdictRecord {
            passed,
            reasons,
            error: None,
            model,
            usage,
            cost: grader.prices.as_ref().map(|p| p.charge(&usage)),
        },
        Err(why) => verdict_error(model, usage, grader, why),
    }
}

fn verdict_error(model: String, usage: Usage, grader: &Grader, why: String) -> VerdictRecord {
    VerdictRecord {
        passed: false,
        reasons: Vec::new(),
        error: Some(why),
        model,
        usage,
        cost: grader.prices.as_ref().map(|p| p.charge(&usage)),
    }
}

/// The grader's one message.
fn input(task: &str, rubric: &str, checks: &[CheckRecord], diff: &str) -> String {
    let mut text = format!(
        "## Task\n\n{}\n\n## Rubric\n\n{}\n\n",
        task.trim(),
        rubric.trim()
    );
    if !checks.is_empty() {
        text.push_str("## The operator's checks (all passed)\n\n");
        for check in checks {
            text.push_str(&check_line(check));
            text.push('\n');
        }
        text.push('\n');
    }
    text.push_str("## What the work changed\n\n```diff\n");
    if diff.len() > DIFF_BYTES {
        let mut end = DIFF_BYTES;
        while !diff.is_char_boundary(end) {
            end -= 1;
        }
        text.push_str(&diff[..end]);
        text.push_str(&format!(
            "\n… (the diff goes on for {} more bytes)\n",
            diff.len() - end
        ));
    } else {
        text.push_str(diff);
    }
    text.push_str("\n```\n");
    text
}

fn last_text(history: &[Item]) -> String {
    history
        .iter()
        .rev()
        .find_map(|item| match &item.kind {
            ItemKind::Assistant { text, .. } => Some(text.clone()),
            _ => None,
        })
        .unwrap_or_default()
}

/// The verdict in an answer: its JSON object (the first `{` to the last
/// `}`, so a fenced block or a sentence around it is fine).
fn parse(answer: &str) -> Result<(bool, Vec<String>), String> {
    let shown: String = answer.chars().take(200).collect();
    let (Some(start), Some(end)) = (answer.find('{'), answer.rfind('}')) else {
        return Err(format!("its answer held no JSON verdict: {shown:?}"));
    };
    let value: serde_json::Value = answer
        .get(start..=end)
        .and_then(|json| serde_json::from_str(json).ok())
        .ok_or_else(|| format!("its answer held no JSON verdict: {shown:?}"))?;
    let passed = match value.get("verdict").and_then(|v| v.as_str()) {
        Some(v) if v.eq_ignore_ascii_case("pass") => true,
        Some(v) if v.eq_ignore_ascii_case("fail") => false,
        _ => {
            return Err(format!(
                "its verdict is neither \"pass\" nor \"fail\": {shown:?}"
            ))
        }
    };
    let reasons = match value.get("reasons") {
        Some(serde_json::Value::Array(items)) => items
            .iter()
            .map(|r| r.as_str().map_or_else(|| r.to_string(), str::to_string))
            .collect(),
        Some(serde_json::Value::String(one)) => vec![one.clone()],
        _ => Vec::new(),
    };
    Ok((passed, reasons))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_verdict_is_read_from_json_around_which_the_model_may_talk() {
        assert_eq!(
            parse("{\"verdict\": \"pass\", \"reasons\": [\"tests cover it\"]}"),
            Ok((true, vec!["tests cover it".to_string()]))
        );
        assert_eq!(
            parse("Here:\n```json\n{\"verdict\": \"FAIL\", \"reasons\": \"no docs\"}\n```"),
            Ok((false, vec!["no docs".to_string()]))
        );
        assert!(parse("looks good to me").is_err());
        assert!(parse("{\"verdict\": \"maybe\"}").is_err());
    }

    #[test]
    fn a_long_diff_is_cut_and_said_so() {
        let diff = "+x\n".repeat(30_000);
        let text = input("Task", "Rubric", &[], &diff);
        assert!(text.contains("the diff goes on for"), "{}", &text[..200]);
        assert!(text.len() < DIFF_BYTES + 1_000);
    }
}
