//! Which run the replay starts next: a recording is a series of runs, each
//! begun by a prompt or by a continuation (`pod resume` without text), and
//! ended by an answer, a budget, an error or a crash.

use pod::log::LogRecord;
use pod_llm::ItemKind;

/// How a run begins.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Start {
    /// With this prompt.
    Prompt(String),
    /// Without one: the model goes on from the history.
    Continue,
}

/// Where the replay stands in its recording.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Cursor {
    /// Records of the recording consumed as run starts (prompts given).
    pub consumed: usize,
}

/// Whether a recording ends where its last run ended (an answer without
/// calls, a budget stop, an ended record); otherwise it was cut short (a
/// crash, a kill, a torn line) and a replay may go past it.
pub(crate) fn is_whole(records: &[LogRecord]) -> bool {
    // A raise of the session's limits after its last run changes nothing
    // of how it ended.
    let last = records
        .iter()
        .rev()
        .find(|record| !matches!(record, LogRecord::Limits(_)));
    match last {
        Some(LogRecord::Stopped(_) | LogRecord::Ended(_)) => true,
        Some(LogRecord::Item(item)) => matches!(
            &item.kind,
            ItemKind::Assistant { tool_calls, .. } if tool_calls.is_empty()
        ),
        _ => false,
    }
}

/// The run to start after the replay's model gave `answered` answers:
/// the first prompt after the recording's `answered`-th answer (and after
/// the prompts already given), else a continuation if the recording has
/// answers left, else none.
pub(crate) fn next(
    records: &[LogRecord],
    answered: usize,
    cursor: Cursor,
) -> Option<(Start, Cursor)> {
    let mut seen = 0;
    let mut from = 0;
    if answered > 0 {
        from = records.iter().position(|record| {
            if is_answer(record) {
                seen += 1;
            }
            seen == answered
        })? + 1;
    }
    for (index, record) in records.iter().enumerate().skip(from.max(cursor.consumed)) {
        if let LogRecord::Item(item) = record {
            match &item.kind {
                ItemKind::User { text } => {
                    let next = Cursor {
                        consumed: index + 1,
                    };
                    return Some((Start::Prompt(text.clone()), next));
                }
                ItemKind::Assistant { .. } => return Some((Start::Continue, cursor)),
                _ => {}
            }
        }
    }
    None
}

/// What the model says where the replay plays a crash: the error its run
/// ends with (an ended record the comparison leaves out).
pub(crate) const CRASH: &str = "pod replay: the recorded session's process stopped here";

/// What a replay's model says where the recording's model request failed
/// (a 401, an unreachable server): the run fails there too.
pub(crate) const MODEL_FAILED: &str = "pod replay: the recorded model request failed here";

/// Whether `ended` (after `before`, the records ahead of it) is a run that
/// failed because its model request did: it failed with a turn error
/// while no answer was streaming, the model's turn being next.
pub(crate) fn is_model_failure(before: &[LogRecord], ended: &pod::log::EndedRecord) -> bool {
    if ended.how != pod::log::EndedHow::Failed || ended.partial_answer.is_some() {
        return false;
    }
    if !ended
        .reason
        .as_deref()
        .is_some_and(|r| r.starts_with("turn failed"))
    {
        return false;
    }
    let last_item = before.iter().rev().find_map(|record| match record {
        LogRecord::Item(item) => Some(item),
        _ => None,
    });
    !matches!(last_item, Some(item) if matches!(item.kind, ItemKind::Assistant { .. }))
}

/// The answers after which the recording's model request failed, one per
/// failure: a replay fails its request there too.
pub(crate) fn model_failures(records: &[LogRecord]) -> Vec<usize> {
    let mut answers = 0;
    let mut points = Vec::new();
    for (index, record) in records.iter().enumerate() {
        match record {
            LogRecord::Item(item) if matches!(item.kind, ItemKind::Assistant { .. }) => {
                answers += 1;
            }
            LogRecord::Ended(ended) if is_model_failure(&records[..index], ended) => {
                points.push(answers);
            }
            _ => {}
        }
    }
    points
}

/// Where the recording's process stopped mid-run and a resume started a
/// new run without a prompt, as the number of answers before it. The log
/// does not record a crash; its traces do: results a resume gave calls the
/// crash cut short, and a reminder only a run's start explains (one that
/// neither follows a prompt or an ended run, nor is due by the cadence
/// `every`, rule 3 of the reminders).
pub(crate) fn crash_points(records: &[LogRecord], every: u32) -> Vec<usize> {
    let mut points = Vec::new();
    let mut answers = 0;
    // Whether a run start is already explained since the last answer.
    let mut started = true;
    for (index, record) in records.iter().enumerate() {
        match record {
            LogRecord::Stopped(_) | LogRecord::Ended(_) => started = true,
            LogRecord::Item(item) => match &item.kind {
                ItemKind::Assistant { .. } => {
                    answers += 1;
                    started = false;
                }
                ItemKind::User { .. } => started = true,
                ItemKind::ToolResult { content, .. }
                    if content == pod::replay::INTERRUPTED_RESULT && !started =>
                {
                    points.push(answers);
                    started = true;
                }
                ItemKind::System {
                    kind: pod_llm::SystemKind::Reminder,
                    ..
                } if !started && !after_final_answer(&records[..index]) => {
                    let before = pod::replay::full_history(&records[..index]);
                    if !pod::interceptors::answered_since_plan(&before, every) {
                        points.push(answers);
                    }
                    started = true;
                }
                _ => {}
            },
            _ => {}
        }
    }
    points.dedup();
    points
}

/// Whether the last item of `records` is an answer without calls: a
/// reminder after it is until-done's continuation, within the run.
fn after_final_answer(records: &[LogRecord]) -> bool {
    records
        .iter()
        .rev()
        .find_map(|record| match record {
            LogRecord::Item(item) => Some(matches!(
                &item.kind,
                ItemKind::Assistant { tool_calls, .. } if tool_calls.is_empty()
            )),
            _ => None,
        })
        .unwrap_or(false)
}

fn is_answer(record: &LogRecord) -> bool {
    matches!(record, LogRecord::Item(item) if matches!(item.kind, ItemKind::Assistant { .. }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use pod_llm::Item;

    fn answer(text: &str) -> LogRecord {
        LogRecord::Item(Item::new(ItemKind::Assistant {
            text: text.into(),
            reasoning: None,
            tool_calls: Vec::new(),
            usage: None,
        }))
    }

    fn prompt(text: &str) -> LogRecord {
        LogRecord::Item(Item::user(text))
    }

    #[test]
    fn prompts_start_runs_and_answers_left_without_one_continue() {
        let records = vec![
            prompt("one"),
            answer("a"),
            prompt("two"),
            answer("b"),
            answer("c"),
        ];
        let (start, cursor) = next(&records, 0, Cursor::default()).unwrap();
        assert_eq!(start, Start::Prompt("one".into()));
        // The first run stopped after its answer: the second prompt.
        let (start, cursor) = next(&records, 1, cursor).unwrap();
        assert_eq!(start, Start::Prompt("two".into()));
        // The second run stopped after one answer; the recording's went on
        // (a resume without text).
        let (start, cursor) = next(&records, 2, cursor).unwrap();
        assert_eq!(start, Start::Continue);
        assert_eq!(next(&records, 3, cursor), None);
    }

    #[test]
    fn a_prompt_is_given_once() {
        let records = vec![prompt("one")];
        let (_, cursor) = next(&records, 0, Cursor::default()).unwrap();
        assert_eq!(next(&records, 0, cursor), None);
    }

    fn reminder() -> LogRecord {
        LogRecord::Item(Item::system(pod_llm::SystemKind::Reminder, "plan"))
    }

    fn call(id: &str, name: &str) -> LogRecord {
        LogRecord::Item(Item::new(ItemKind::Assistant {
            text: String::new(),
            reasoning: None,
            tool_calls: vec![pod_llm::ToolCall {
                id: id.into(),
                name: name.into(),
                arguments: "{}".into(),
            }],
            usage: None,
        }))
    }

    fn result(id: &str, text: &str) -> LogRecord {
        LogRecord::Item(Item::tool_result(id, text, false))
    }

    #[test]
    fn a_reminder_the_cadence_does_not_explain_is_a_resume_after_a_crash() {
        let records = vec![
            prompt("go"),
            reminder(),
            call("t", pod_tools::TODO_WRITE),
            result("t", "ok"),
            call("r", "read_file"),
            result("r", "text"),
            // Two answers since the plan: not due at 5, so a run began.
            reminder(),
            answer("done"),
        ];
        assert_eq!(crash_points(&records, 5), vec![2]);
        // Due at 1 (one answer after the plan's): the cadence explains it.
        assert_eq!(crash_points(&records, 1), Vec::<usize>::new());
    }

    #[test]
    fn until_dones_continuation_after_a_final_answer_is_no_crash() {
        let records = vec![
            prompt("go"),
            call("t", pod_tools::TODO_WRITE),
            result("t", "ok"),
            answer("stopping here"),
            reminder(),
            answer("done"),
        ];
        assert_eq!(crash_points(&records, 5), Vec::<usize>::new());
    }

    #[test]
    fn a_call_the_crash_cut_is_a_resume_after_its_answer() {
        let records = vec![
            prompt("go"),
            call("b", "bash"),
            result("b", pod::replay::INTERRUPTED_RESULT),
            answer("done"),
        ];
        assert_eq!(crash_points(&records, 5), vec![1]);
    }

    #[test]
    fn a_log_ending_in_calls_or_prompts_was_cut() {
        assert!(is_whole(&[prompt("go"), answer("done")]));
        assert!(!is_whole(&[prompt("go")]));
        assert!(!is_whole(&[]));
    }
}
