//! A recording's model outputs as a [`Script`]: each answer of the root
//! session a step, in log order; each subagent's answers an
//! [`AgentScript`] chosen by its task; every compaction's summary a
//! `compaction` step, in the order they were written.

use super::Recorded;
use pod::log::LogRecord;
use pod_llm::{AgentScript, Item, ItemKind, Script, ScriptStep, ScriptedCall};

/// What the compaction wraps a summary in (`pod::compact`): the scripted
/// compactor answers with the text inside, and the runtime wraps it again.
const SUMMARY_OPEN: &str =
    "<summary>\nThe earlier part of this session was compacted into this summary.\n\n";
const SUMMARY_CLOSE: &str = "\n</summary>";

/// The script that plays `root`'s and its subagents' recorded answers.
/// `model` is the name the recording reported, `context_window` the one its
/// model had (compaction starts from it).
pub(crate) fn script(
    root: &Recorded,
    children: &[Recorded],
    model: String,
    context_window: Option<u64>,
    crashes: &[usize],
) -> Script {
    let mut compactions: Vec<(chrono::DateTime<chrono::Utc>, ScriptStep)> = Vec::new();
    for session in std::iter::once(root).chain(children) {
        compactions.extend(summaries(session));
    }
    // Children run inside their parent's `task` call: ordered by when they
    // were written, the summaries come in the order the compactor is asked.
    compactions.sort_by_key(|(at, _)| *at);
    Script {
        model,
        context_window,
        steps: with_failures(
            answers(&root.records),
            crashes,
            &super::runs::model_failures(&root.records),
        ),
        compaction: compactions.into_iter().map(|(_, step)| step).collect(),
        agents: children
            .iter()
            .filter_map(|child| {
                Some(AgentScript {
                    task: task_of(&child.records)?,
                    steps: answers(&child.records),
                })
            })
            .collect(),
    }
}

/// The assistant items of `records`, in order, as steps that answer the
/// same: the same text, reasoning, calls (with their ids and raw
/// arguments) and reported usage.
pub(crate) fn answers(records: &[LogRecord]) -> Vec<ScriptStep> {
    // Answers a person cut short (Ctrl-C, a cancel) never got a usage.
    let cut: std::collections::HashSet<uuid::Uuid> = records
        .iter()
        .filter_map(|record| match record {
            LogRecord::Ended(ended) => ended.partial_answer,
            _ => None,
        })
        .collect();
    records
        .iter()
        .filter_map(|record| match record {
            LogRecord::Item(item) => step_of(item).map(|mut step| {
                step.no_usage = cut.contains(&item.id);
                step
            }),
            _ => None,
        })
        .collect()
}

/// `steps` with a failing step after each number of answers in `crashes`
/// (the run ends there, as the recording's process did) and in `failures`
/// (the recording's model request failed there).
fn with_failures(steps: Vec<ScriptStep>, crashes: &[usize], failures: &[usize]) -> Vec<ScriptStep> {
    let failing = |message: &str| ScriptStep {
        fail: Some(pod_llm::ScriptFailure {
            status: None,
            message: message.into(),
        }),
        ..ScriptStep::default()
    };
    let count = steps.len();
    let mut out = Vec::with_capacity(count + crashes.len() + failures.len());
    let mut steps = steps.into_iter();
    for index in 0..=count {
        for _ in crashes.iter().filter(|at| **at == index) {
            out.push(failing(super::runs::CRASH));
        }
        for _ in failures.iter().filter(|at| **at == index) {
            out.push(failing(super::runs::MODEL_FAILED));
        }
        out.extend(steps.next());
    }
    out
}

fn step_of(item: &Item) -> Option<ScriptStep> {
    let ItemKind::Assistant {
        text,
        reasoning,
        tool_calls,
        usage,
    } = &item.kind
    else {
        return None;
    };
    Some(ScriptStep {
        text: text.clone(),
        reasoning: reasoning.as_ref().map(|r| r.text.clone()),
        tool_calls: tool_calls
            .iter()
            .map(|call| ScriptedCall {
                id: Some(call.id.clone()),
                name: call.name.clone(),
                arguments: None,
                raw_arguments: Some(call.arguments.clone()),
            })
            .collect(),
        usage: *usage,
        ..ScriptStep::default()
    })
}

/// A subagent's task: its first prompt.
fn task_of(records: &[LogRecord]) -> Option<String> {
    records.iter().find_map(|record| match record {
        LogRecord::Item(item) => match &item.kind {
            ItemKind::User { text } => Some(text.clone()),
            _ => None,
        },
        _ => None,
    })
}

/// Each compaction's summary as the compactor answered it, with the time
/// of the record before it (a boundary has none of its own).
fn summaries(session: &Recorded) -> Vec<(chrono::DateTime<chrono::Utc>, ScriptStep)> {
    let mut at = session.header.created_at;
    let mut out = Vec::new();
    for record in &session.records {
        match record {
            LogRecord::Compaction(boundary) => {
                if let ItemKind::System { text, .. } = &boundary.summary.kind {
                    out.push((at, ScriptStep::text(unwrap_summary(text))));
                }
            }
            other => at = other.at().unwrap_or(at),
        }
    }
    out
}

/// The model's summary inside the runtime's wrapping (the whole text when
/// it is not wrapped).
fn unwrap_summary(text: &str) -> &str {
    text.strip_prefix(SUMMARY_OPEN)
        .and_then(|inner| inner.strip_suffix(SUMMARY_CLOSE))
        .unwrap_or(text)
}

#[cfg(test)]
mod tests {
    use super::*;
    use pod_llm::{ToolCall, Usage};

    fn assistant(text: &str, calls: &[(&str, &str, &str)], usage: Option<Usage>) -> LogRecord {
        LogRecord::Item(Item::new(ItemKind::Assistant {
            text: text.into(),
            reasoning: None,
            tool_calls: calls
                .iter()
                .map(|(id, name, arguments)| ToolCall {
                    id: (*id).into(),
                    name: (*name).into(),
                    arguments: (*arguments).into(),
                })
                .collect(),
            usage,
        }))
    }

    #[test]
    fn answers_keep_call_ids_raw_arguments_and_usage() {
        let usage = Usage {
            prompt_tokens: 120,
            completion_tokens: 7,
            ..Usage::default()
        };
        let records = vec![
            LogRecord::Item(Item::user("go")),
            assistant("", &[("c1", "read_file", "{\"path\": \"a\"")], Some(usage)),
            LogRecord::Item(Item::tool_result("c1", "bad json", true)),
            assistant("done", &[], None),
        ];
        let steps = answers(&records);
        assert_eq!(steps.len(), 2);
        let call = &steps[0].tool_calls[0];
        assert_eq!(call.id.as_deref(), Some("c1"));
        assert_eq!(call.raw_arguments.as_deref(), Some("{\"path\": \"a\""));
        assert_eq!(steps[0].usage, Some(usage));
        assert_eq!(steps[1].text, "done");
        assert_eq!(steps[1].usage, None);
    }

    #[test]
    fn a_wrapped_summary_is_answered_with_its_inside() {
        let wrapped = format!("{SUMMARY_OPEN}We read a.{SUMMARY_CLOSE}");
        assert_eq!(unwrap_summary(&wrapped), "We read a.");
        assert_eq!(unwrap_summary("plain"), "plain");
    }
}
