//! What a session spent, read from its log: every answer's usage, summed.
//!
//! The log is the ledger: each assistant item carries the usage its
//! provider reported (whole prompt, cache reads and writes, output,
//! reasoning), so totals survive a crash and a resume with nothing stored
//! elsewhere. Items repeated in a compaction boundary's tail carry no usage
//! and boundaries are not items, so nothing is counted twice.

use crate::log::LogRecord;
use pod_llm::{ItemKind, Usage};

/// The usage of every answer in `records`, summed, and how many answers.
pub fn session_usage(records: &[LogRecord]) -> (Usage, u64) {
    let mut total = Usage::default();
    let mut answers = 0;
    for record in records {
        if let LogRecord::Item(item) = record {
            if let ItemKind::Assistant { usage, .. } = &item.kind {
                answers += 1;
                if let Some(usage) = usage {
                    total += *usage;
                }
            }
        }
    }
    (total, answers)
}

#[cfg(test)]
mod tests {
    use super::*;
    use pod_llm::Item;

    fn answer(prompt: u64, read: u64) -> LogRecord {
        LogRecord::Item(Item::new(ItemKind::Assistant {
            text: "a".into(),
            reasoning: None,
            tool_calls: Vec::new(),
            usage: Some(Usage {
                prompt_tokens: prompt,
                completion_tokens: 10,
                cache_read_tokens: read,
                ..Default::default()
            }),
        }))
    }

    #[test]
    fn sums_every_answer_and_skips_the_rest() {
        let records = vec![
            LogRecord::Item(Item::user("go")),
            answer(1_000, 0),
            answer(1_200, 1_000),
        ];
        let (usage, answers) = session_usage(&records);
        assert_eq!(answers, 2);
        assert_eq!(usage.prompt_tokens, 2_200);
        assert_eq!(usage.cache_read_tokens, 1_000);
        assert_eq!(usage.completion_tokens, 20);
        assert_eq!(usage.fresh_input(), 1_200);
    }
}
