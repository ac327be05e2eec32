//! Token estimates used where no provider count is at hand.
//!
//! The heuristic is one token per four bytes of UTF-8 text, rounded up, plus a
//! small fixed cost per item. It overestimates English prose slightly and
//! code a little more, which is the safe side for a compaction trigger.

use crate::item::{Item, ItemKind};
use crate::provider::{ProviderRequest, ToolSpec};
use parking_lot::Mutex;
use std::sync::{Arc, LazyLock, Weak};

/// Fixed per-item overhead (role markers, ids) in tokens.
const PER_ITEM_TOKENS: u64 = 4;

/// Estimated tokens of a text.
pub fn estimate_text_tokens(text: &str) -> u64 {
    (text.len() as u64).div_ceil(4)
}

/// Estimated tokens of one history item as a model would see it.
pub fn estimate_item_tokens(item: &Item) -> u64 {
    PER_ITEM_TOKENS
        + match &item.kind {
            ItemKind::User { text } | ItemKind::System { text, .. } => estimate_text_tokens(text),
            ItemKind::Assistant {
                text,
                reasoning,
                tool_calls,
                ..
            } => {
                estimate_text_tokens(text)
                    + reasoning
                        .as_ref()
                        .map_or(0, |r| estimate_text_tokens(&r.text))
                    + tool_calls
                        .iter()
                        .map(|c| {
                            estimate_text_tokens(&c.name)
                                + estimate_text_tokens(&c.arguments)
                                + PER_ITEM_TOKENS
                        })
                        .sum::<u64>()
            }
            ItemKind::ToolResult { content, .. } => estimate_text_tokens(content),
        }
}

/// Estimated prompt tokens of a whole request.
pub fn estimate_request_tokens(request: &ProviderRequest) -> u64 {
    estimate_text_tokens(&request.system_prompt)
        + estimate_tools_tokens(&request.tools)
        + request
            .history
            .iter()
            .map(estimate_item_tokens)
            .sum::<u64>()
}

/// Estimated tokens of a tools array: names, descriptions and schemas.
///
/// Worked out once per array: every session of a process with the same
/// tools shares one (`ToolRegistry::share_specs`), and writing out the
/// schemas to measure them was about 118,000 instructions at every
/// session's start (callgrind).
pub fn estimate_tools_tokens(tools: &Arc<[ToolSpec]>) -> u64 {
    // Held to look through the few live arrays, or to add one; the
    // estimate is made outside it.
    static ESTIMATES: LazyLock<Mutex<Vec<Estimate>>> = LazyLock::new(Default::default);
    let find = |table: &[Estimate]| {
        table
            .iter()
            // The weak pointer holds the allocation: the same address is
            // the same array.
            .find(|(specs, _)| std::ptr::addr_eq(specs.as_ptr(), Arc::as_ptr(tools)))
            .map(|(_, tokens)| *tokens)
    };
    if let Some(tokens) = find(&ESTIMATES.lock()) {
        return tokens;
    }
    let tokens = tools
        .iter()
        .map(|t| {
            estimate_text_tokens(&t.name)
                + estimate_text_tokens(&t.description)
                + (json_len(&t.parameters) as u64).div_ceil(4)
        })
        .sum();
    let mut table = ESTIMATES.lock();
    table.retain(|(specs, _)| specs.strong_count() > 0);
    if find(&table).is_none() {
        table.push((Arc::downgrade(tools), tokens));
    }
    tokens
}

/// A tools array (weak: kept only while some session holds it) and its
/// estimate.
type Estimate = (Weak<[ToolSpec]>, u64);

/// The length of `value`'s JSON, counted as it is written (no copy kept).
fn json_len(value: &serde_json::Value) -> usize {
    struct Count(usize);
    impl std::io::Write for Count {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            self.0 += bytes.len();
            Ok(bytes.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut count = Count(0);
    // Counting never fails, and a `Value` always serializes.
    let _ = serde_json::to_writer(&mut count, value);
    count.0
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(name: &str, parameters: serde_json::Value) -> ToolSpec {
        ToolSpec {
            name: name.into(),
            description: "Reads a file.".into(),
            parameters: parameters.into(),
        }
    }

    #[test]
    fn a_tools_array_is_estimated_from_its_text() {
        let schema =
            serde_json::json!({"type": "object", "properties": {"path": {"type": "string"}}});
        let text = schema.to_string();
        let tools: Arc<[ToolSpec]> = vec![spec("read_file", schema)].into();
        let expected = estimate_text_tokens("read_file")
            + estimate_text_tokens("Reads a file.")
            + estimate_text_tokens(&text);
        assert_eq!(estimate_tools_tokens(&tools), expected);
        // Asked again, the same array gives the same answer.
        assert_eq!(estimate_tools_tokens(&tools), expected);
        // Another array is estimated for itself, not taken for the first.
        let other: Arc<[ToolSpec]> = vec![spec("x", serde_json::json!({}))].into();
        assert_eq!(
            estimate_tools_tokens(&other),
            1 + estimate_text_tokens("Reads a file.") + 1
        );
        let request = ProviderRequest {
            system_prompt: "four".into(),
            history: Arc::new(vec![Item::user("12345678")]),
            tools,
            cache_key: None,
            history_id: None,
        };
        assert_eq!(
            estimate_request_tokens(&request),
            1 + expected + PER_ITEM_TOKENS + 2
        );
    }
}
