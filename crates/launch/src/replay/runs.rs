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
    match records.last() {
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

    #[test]
    fn a_log_ending_in_calls_or_prompts_was_cut() {
        assert!(is_whole(&[prompt("go"), answer("done")]));
        assert!(!is_whole(&[prompt("go")]));
        assert!(!is_whole(&[]));
    }
}
