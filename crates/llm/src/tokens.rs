//! Token estimates used where no provider count is at hand.
//!
//! The heuristic is one token per four bytes of UTF-8 text, rounded up, plus a
//! small fixed cost per item. It overestimates English prose slightly and
//! code a little more, which is the safe side for a compaction trigger.

use crate::item::{Item, ItemKind};
use crate::provider::ProviderRequest;

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
        + request
            .tools
            .iter()
            .map(|t| {
                estimate_text_tokens(&t.name)
                    + estimate_text_tokens(&t.description)
                    + estimate_text_tokens(&t.parameters.to_string())
            })
            .sum::<u64>()
        + request
            .history
            .iter()
            .map(estimate_item_tokens)
            .sum::<u64>()
}
