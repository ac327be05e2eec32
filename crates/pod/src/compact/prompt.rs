//! What the compact worker is told, and how its input is kept within its
//! context window.

use pod_llm::tokens::estimate_text_tokens;
use pod_llm::{Item, ItemKind, SystemKind};
use pod_tools::{render_todos, TodoItem};
use std::fmt::Write;

/// System prompt of the compact worker.
pub const COMPACT_SYSTEM_PROMPT: &str = "You summarise the history of an autonomous agent's \
session so that the agent can continue the work from your summary alone, because its older \
context is about to be dropped. Write for that agent, not for a user. Cover, in this order:\n\
1. Goal: what the user asked for, with every constraint and preference they stated.\n\
2. Decisions: what was decided and why, including approaches that were tried and rejected.\n\
3. State: files and other things created or changed, and their current state; commands that \
matter; errors still open.\n\
4. Remaining work: what is left to do and the next concrete step.\n\
You are also given the agent's todo list at this moment. Use it as a source for the remaining \
work: check it against the history and add what the history shows, but do not copy the list \
out item by item (the agent keeps the list itself). You have no tools. Answer with the summary \
only.";

/// Bytes kept from each end of a tool output or reasoning that is cut to fit.
const CUT_KEEP: usize = 600;

/// Builds the compact worker's single user message: the transcript of
/// `items` and the todo snapshot, clearly labelled, within about `budget`
/// tokens. Old tool outputs and reasoning are cut first, then the oldest
/// items are dropped; the todo snapshot is never cut.
pub fn compact_input(items: &[Item], todos: &[TodoItem], budget: u64) -> String {
    let snapshot = format!(
        "<todo-snapshot>\n{}\n</todo-snapshot>\n\nWrite the summary now.",
        render_todos(todos)
    );
    let fixed = estimate_text_tokens(&snapshot) + 50;
    let mut entries: Vec<String> = items.iter().map(|i| render_item(i, false)).collect();
    let mut total: u64 = entries.iter().map(|e| estimate_text_tokens(e)).sum();
    // Cut bulky outputs oldest first until it fits.
    for (entry, item) in entries.iter_mut().zip(items) {
        if total + fixed <= budget {
            break;
        }
        let cut = render_item(item, true);
        total -= estimate_text_tokens(entry);
        total += estimate_text_tokens(&cut);
        *entry = cut;
    }
    let mut first = 0;
    while total + fixed > budget && first < entries.len() {
        total -= estimate_text_tokens(&entries[first]);
        first += 1;
    }
    let mut out = String::from("<transcript>\n");
    if first > 0 {
        let _ = writeln!(out, "[{first} older entries omitted to fit]");
    }
    for entry in &entries[first..] {
        out.push_str(entry);
        out.push('\n');
    }
    out.push_str("</transcript>\n\n");
    out.push_str(&snapshot);
    out
}

fn render_item(item: &Item, cut: bool) -> String {
    let shorten = |text: &str| {
        if cut {
            cut_middle(text)
        } else {
            text.to_string()
        }
    };
    match &item.kind {
        ItemKind::User { text } => format!("[user] {text}"),
        ItemKind::System { kind, text } => {
            let label = match kind {
                SystemKind::Reminder => "reminder",
                SystemKind::Notification => "notification",
                SystemKind::Summary => "earlier summary",
                SystemKind::CarryOver => "carried over",
                SystemKind::Verification => "checks failed",
                SystemKind::Loop => "loop",
                SystemKind::Other => "runtime",
            };
            format!("[{label}] {text}")
        }
        ItemKind::Assistant {
            text,
            reasoning,
            tool_calls,
            ..
        } => {
            let mut out = String::new();
            if let Some(reasoning) = reasoning.as_ref().filter(|r| !r.text.is_empty() && !cut) {
                let _ = writeln!(out, "[assistant reasoning] {}", reasoning.text);
            }
            if !text.is_empty() {
                let _ = writeln!(out, "[assistant] {text}");
            }
            for call in tool_calls {
                let _ = writeln!(
                    out,
                    "[tool call {} {}] {}",
                    call.name,
                    call.id,
                    shorten(&call.arguments)
                );
            }
            out.trim_end().to_string()
        }
        ItemKind::ToolResult {
            call_id,
            content,
            is_error,
            ..
        } => {
            let label = if *is_error {
                "tool error"
            } else {
                "tool result"
            };
            format!("[{label} {call_id}] {}", shorten(content))
        }
    }
}

fn cut_middle(text: &str) -> String {
    if text.len() <= 2 * CUT_KEEP + 50 {
        return text.to_string();
    }
    let head_end = floor_char_boundary(text, CUT_KEEP);
    let tail_start = floor_char_boundary(text, text.len() - CUT_KEEP);
    format!(
        "{} [... {} bytes cut ...] {}",
        &text[..head_end],
        tail_start - head_end,
        &text[tail_start..]
    )
}

fn floor_char_boundary(text: &str, mut index: usize) -> usize {
    while index > 0 && !text.is_char_boundary(index) {
        index -= 1;
    }
    index
}

#[cfg(test)]
mod tests {
    use super::*;
    use pod_tools::TodoStatus;

    #[test]
    fn input_fits_the_budget_and_keeps_the_snapshot() {
        let todos = vec![TodoItem {
            id: "next".into(),
            content: "Ship the release".into(),
            status: TodoStatus::InProgress,
        }];
        let items: Vec<Item> = (0..200)
            .map(|i| Item::tool_result(format!("c{i}"), "output ".repeat(500), false))
            .collect();
        let input = compact_input(&items, &todos, 8_000);
        assert!(
            estimate_text_tokens(&input) <= 8_000 + 100,
            "{}",
            input.len()
        );
        assert!(input.contains("[>] next: Ship the release"));
        assert!(input.contains("older entries omitted"));
        assert!(input.contains("bytes cut"));
        // The most recent entry survives.
        assert!(input.contains("[tool result c199]"));
    }
}
