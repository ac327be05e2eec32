//! Where to cut the history: an old part to summarise and a recent tail kept
//! verbatim.

use pod_llm::tokens::estimate_item_tokens;
use pod_llm::{Item, ItemKind};

/// The index where the kept tail starts: the longest suffix within
/// `tail_tokens` that does not start with a tool result (so a call is never
/// separated from its result), and that holds the last user prompt if the
/// model has not answered it yet (a prompt is never summarised before the
/// model has seen it, whatever its size). Returns 0 when nothing can be
/// summarised.
pub fn tail_start(history: &[Item], tail_tokens: u64) -> usize {
    let mut start = history.len();
    let mut used = 0u64;
    while start > 0 {
        let cost = estimate_item_tokens(&history[start - 1]);
        if used + cost > tail_tokens {
            break;
        }
        used += cost;
        start -= 1;
    }
    if let Some(prompt) = unanswered_prompt(history) {
        start = start.min(prompt);
    }
    // Results follow their call directly, so moving the cut back over results
    // (and onto their assistant item) keeps every pair on one side.
    while start < history.len() && matches!(history[start].kind, ItemKind::ToolResult { .. }) {
        start += 1;
    }
    start
}

/// The index of the last user prompt when no model answer follows it.
fn unanswered_prompt(history: &[Item]) -> Option<usize> {
    for (index, item) in history.iter().enumerate().rev() {
        match item.kind {
            ItemKind::Assistant { .. } => return None,
            ItemKind::User { .. } => return Some(index),
            _ => {}
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use pod_llm::ToolCall;

    fn call(id: &str) -> Item {
        Item::new(ItemKind::Assistant {
            text: String::new(),
            reasoning: None,
            tool_calls: vec![ToolCall {
                id: id.into(),
                name: "echo".into(),
                arguments: "{}".into(),
            }],
            usage: None,
        })
    }

    #[test]
    fn never_starts_the_tail_on_a_tool_result() {
        let history = vec![
            Item::user("a long prompt ".repeat(50)),
            call("1"),
            Item::tool_result("1", "x".repeat(400), false),
            Item::user("short"),
        ];
        for budget in 0..400 {
            let start = tail_start(&history, budget);
            assert!(
                start == 0
                    || start == history.len()
                    || !matches!(history[start].kind, ItemKind::ToolResult { .. }),
                "budget {budget} gave {start}"
            );
        }
        // The short prompt at the end is not answered yet: it always stays.
        assert_eq!(tail_start(&history, 0), 3);
        assert_eq!(tail_start(&history, 10), 3);
        // Enough for the result but not its call: the pair moves out whole.
        assert_eq!(tail_start(&history, 110), 3);
        assert_eq!(tail_start(&history, 120), 1);
        assert_eq!(tail_start(&history, 1_000_000), 0);
    }

    #[test]
    fn an_unanswered_prompt_is_kept_whatever_its_size() {
        let huge = Item::user("task ".repeat(20_000));
        let history = vec![
            Item::user("old"),
            call("1"),
            Item::tool_result("1", "ok", false),
            huge,
        ];
        assert_eq!(tail_start(&history, 100), 3);
        // Alone, it leaves nothing to summarise.
        assert_eq!(tail_start(&history[3..], 100), 0);
        // Once answered, it may be summarised like the rest.
        let mut answered = history.clone();
        answered.push(call("2"));
        answered.push(Item::tool_result("2", "ok", false));
        assert_eq!(tail_start(&answered, 100), 4);
    }
}
