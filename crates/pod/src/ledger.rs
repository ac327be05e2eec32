//! What a session spent, read from its log: every answer's usage, summed.
//!
//! The log is the ledger: each assistant item carries the usage its
//! provider reported (whole prompt, cache reads and writes, output,
//! reasoning), so totals survive a crash and a resume with nothing stored
//! elsewhere. Items repeated in a compaction boundary's tail carry no usage
//! and boundaries are not items, so nothing is counted twice.

use crate::error::PodError;
use crate::log::LogRecord;
use crate::store::Store;
use pod_llm::{Cost, ItemKind, Prices, Usage};
use uuid::Uuid;

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

/// What the answers, compaction summaries and graders of `records` cost
/// at `prices` (a
/// grader's verdict counts at its own prices, when its profile has them).
pub fn records_cost(records: &[LogRecord], prices: &Prices) -> Cost {
    records
        .iter()
        .map(|record| match record {
            LogRecord::Item(item) => match &item.kind {
                ItemKind::Assistant {
                    usage: Some(usage), ..
                } => prices.charge(usage),
                _ => Cost::default(),
            },
            LogRecord::Compaction(compaction) => compaction
                .usage
                .as_ref()
                .map(|usage| prices.charge(usage))
                .unwrap_or_default(),
            LogRecord::Verify(verify) => verify
                .grader
                .as_ref()
                .and_then(|verdict| verdict.cost)
                .unwrap_or_default(),
            _ => Cost::default(),
        })
        .sum()
}

/// The ids of the subagents `task` calls in `records` started (whether or
/// not they got to write a log).
fn children(session: Uuid, records: &[LogRecord]) -> Vec<Uuid> {
    records
        .iter()
        .filter_map(|record| match record {
            LogRecord::Item(item) => Some(item.tool_calls()),
            _ => None,
        })
        .flatten()
        .filter(|call| call.name == crate::subagents::TASK)
        .map(|call| crate::subagents::child_session_id(session, &call.id))
        .collect()
}

/// What session `session` (whose log holds `records`) spent over its
/// life, at `prices`: its answers and graders, and its subagents' (read
/// from their logs in `store`, however deep), counted at the session's
/// prices as the live meter counts them.
pub async fn session_cost(
    store: &Store,
    session: Uuid,
    records: &[LogRecord],
    prices: &Prices,
) -> Result<Cost, PodError> {
    let mut total = records_cost(records, prices);
    let mut pending = children(session, records);
    while let Some(child) = pending.pop() {
        let contents = match store.read(child).await {
            Ok(contents) => contents,
            // A call the crash cut before its child wrote anything.
            Err(PodError::NoSuchSession { .. }) => continue,
            Err(err) => return Err(err),
        };
        total += records_cost(&contents.records, prices);
        pending.extend(children(child, &contents.records));
    }
    Ok(total)
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
