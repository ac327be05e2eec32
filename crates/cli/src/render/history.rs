//! A session's history for `pod show`: numbered items (the numbers `pod fork
//! --at` takes), with reminders, notifications and compaction boundaries
//! marked.

use super::{first_line, tool_call};
use crate::style::Style;
use pod::log::{CompactionRecord, LogRecord};
use pod_llm::{Item, ItemKind, SystemKind};
use std::collections::HashMap;

/// Renders every record after the header, with what each call changed in
/// the workspace (by call id) under its result.
pub fn history_with_files(
    records: &[LogRecord],
    files: &HashMap<String, String>,
    style: Style,
) -> String {
    let items = records
        .iter()
        .filter(|r| matches!(r, LogRecord::Item(_)))
        .count();
    let mut numbered = Numbered::after(0).wide_enough_for(items);
    numbered.files = files.clone();
    numbered.render(records, style)
}

/// Renders records as they arrive (`pod show --follow`), numbering items
/// across calls as [`history_with_files`] numbers them.
#[derive(Debug)]
pub struct Numbered {
    number: usize,
    /// Columns of the number: every item's text starts in the same column.
    width: usize,
    /// What calls changed in the workspace, by call id.
    files: HashMap<String, String>,
}

impl Numbered {
    /// A renderer whose next item is number `seen + 1`.
    pub fn after(seen: usize) -> Self {
        Self {
            number: seen,
            width: NUMBER_WIDTH,
            files: HashMap::new(),
        }
        .wide_enough_for(seen + 1)
    }

    /// Numbers as wide as `last`'s (at least [`NUMBER_WIDTH`] columns).
    pub fn wide_enough_for(mut self, last: usize) -> Self {
        self.width = self.width.max(last.to_string().len());
        self
    }

    /// The lines of `records`, the next items numbered after those before.
    pub fn render(&mut self, records: &[LogRecord], style: Style) -> String {
        let mut out = String::new();
        for record in records {
            out.push_str(&self.record(record, style));
        }
        out
    }

    fn record(&mut self, record: &LogRecord, style: Style) -> String {
        let mut out = String::new();
        match record {
            LogRecord::Item(item) => {
                self.number += 1;
                out.push_str(&item_lines(self.number, self.width, item, style));
            }
            LogRecord::Compaction(boundary) => out.push_str(&boundary_lines(boundary, style)),
            LogRecord::Stopped(stopped) => out.push_str(&style.yellow(&format!(
                "── run {} after {} ──\n",
                stopped.limit.stop_line(),
                super::plural(stopped.requests as usize, "model request")
            ))),
            LogRecord::Question(question) => out.push_str(&style.yellow(&format!(
                "      ? question {} about {}: {}\n",
                &question.id.to_string()[..8],
                question.request.call_id,
                super::safe::line(&question.request.summary)
            ))),
            LogRecord::Answer(answer) => out.push_str(&style.yellow(&format!(
                "      ✓ answered {}: {} (via {}{}){}\n",
                &answer.question.to_string()[..8],
                answer.decision.as_str(),
                super::safe::line(&answer.via),
                answer
                    .by
                    .as_deref()
                    .map(|by| format!(", by {}", super::safe::line(by)))
                    .unwrap_or_default(),
                if answer.pending {
                    " — runs when the session continues"
                } else {
                    ""
                }
            ))),
            LogRecord::Ended(ended) => out.push_str(&style.red(&ended_line(ended))),
            // A hook that decided nothing changed nothing: not a line.
            LogRecord::Hook(hook)
                if hook.decision == pod::log::HookDecision::None && hook.reason.is_none() => {}
            LogRecord::Hook(hook) => out.push_str(&style.yellow(&format!(
                "      ⚓ hook on {} ({}): {}{}\n",
                super::safe::line(&hook.call_id),
                super::safe::line(&hook.tool),
                match hook.decision {
                    pod::log::HookDecision::Allow => "allowed",
                    pod::log::HookDecision::Ask => "asks a person",
                    pod::log::HookDecision::Deny => "denied",
                    pod::log::HookDecision::None => "no decision",
                },
                hook.reason
                    .as_deref()
                    .map(|r| format!(" ({})", super::safe::line(r)))
                    .unwrap_or_default()
            ))),
            // The files a call changed, once: at its "after" snapshot.
            LogRecord::Checkpoint(c) if c.phase == pod::log::CheckpointPhase::After => {
                if let Some(files) = self.files.get(&c.call_id) {
                    out.push_str(
                        &style.dim(&format!("      files: {}\n", super::safe::line(files))),
                    );
                }
            }
            LogRecord::Checkpoint(_) => {}
            LogRecord::Verify(verify) => out.push_str(&verify_lines(verify, style)),
            LogRecord::Limits(limits) => out.push_str(&style.dim(&format!(
                "── limits: {} ({}) ──\n",
                limits_text(&limits.limits),
                super::safe::line(&limits.via)
            ))),
            LogRecord::Header(_) | LogRecord::Trace(_) => {}
        }
        out
    }
}

/// A session's limits in words: `money 2.00, wall time 7200s`.
pub fn limits_text(limits: &pod::SessionBudget) -> String {
    let parts: Vec<String> = [
        limits.cost.map(|cost| format!("money {cost}")),
        limits.wall_secs.map(|secs| format!("wall time {secs}s")),
        limits.requests.map(|n| format!("{n} requests")),
        limits.tokens.map(|n| format!("{n} tokens")),
    ]
    .into_iter()
    .flatten()
    .collect();
    match parts.is_empty() {
        true => "none".into(),
        false => parts.join(", "),
    }
}

/// A verification round: one line for the round, one per check and the
/// grader.
pub fn verify_lines(verify: &pod::log::VerifyRecord, style: Style) -> String {
    let head = match verify.passed {
        true => style.green(&format!("      ✓ verified (round {})\n", verify.round)),
        false => style.red(&format!("      ✗ not verified (round {})\n", verify.round)),
    };
    let mut out = head;
    for check in &verify.checks {
        let (mark, how) = match (check.passed(), &check.error, check.timed_out) {
            (true, _, _) => ("✓", "exit 0".to_string()),
            (false, Some(error), _) => ("✗", format!("not run: {}", super::safe::line(error))),
            (false, None, true) => ("✗", "timed out".to_string()),
            (false, None, false) => match (check.exit_code, check.signal) {
                (Some(code), _) => ("✗", format!("exit {code}")),
                (None, Some(signal)) => ("✗", format!("killed by signal {signal}")),
                (None, None) => ("✗", "no exit code".to_string()),
            },
        };
        out.push_str(&style.dim(&format!(
            "        {mark} {} ({how}, {:.1}s)\n",
            super::safe::line(&check.command),
            check.duration_ms as f64 / 1000.0
        )));
    }
    if let Some(verdict) = &verify.grader {
        let said = match (&verdict.error, verdict.passed) {
            (Some(error), _) => format!("no verdict: {}", super::safe::line(error)),
            (None, true) => "pass".to_string(),
            (None, false) => "fail".to_string(),
        };
        let reasons = match verdict.reasons.is_empty() {
            true => String::new(),
            false => format!(": {}", super::safe::line(&verdict.reasons.join("; "))),
        };
        out.push_str(&style.dim(&format!(
            "        grader {}: {said}{reasons}\n",
            super::safe::line(&verdict.model)
        )));
    }
    out
}

/// A run that did not finish, and what it cut.
pub fn ended_line(ended: &pod::log::EndedRecord) -> String {
    let how = match ended.how {
        pod::log::EndedHow::Failed => "run failed",
        pod::log::EndedHow::Cancelled => "run cancelled",
        pod::log::EndedHow::Interrupted => "run interrupted",
    };
    let mut line = format!("── {how}");
    if let Some(reason) = &ended.reason {
        line.push_str(&format!(": {}", super::safe::line(reason)));
    }
    if ended.partial_answer.is_some() {
        line.push_str("; the answer above is cut short");
    }
    if !ended.calls_not_made.is_empty() {
        let calls: Vec<String> = ended
            .calls_not_made
            .iter()
            .map(|c| super::safe::line(c).into_owned())
            .collect();
        line.push_str(&format!("; not made: {}", calls.join(", ")));
    }
    line.push_str(" ──\n");
    line
}

/// A compaction boundary: what it saved and the summary the model now sees.
fn boundary_lines(boundary: &CompactionRecord, style: Style) -> String {
    let summary = match &boundary.summary.kind {
        ItemKind::System { text, .. } => text.as_str(),
        _ => "",
    };
    let mut out = style.cyan(&format!(
        "  ──── compacted: ~{} → ~{} tokens; {} kept, {} carried over ────\n",
        boundary.tokens_before,
        boundary.tokens_after,
        super::plural(boundary.tail.len(), "recent item"),
        boundary.carry_over.len()
    ));
    out.push_str(&style.cyan(&format!(
        "        summary: {}\n",
        first_line(gist(summary), 100)
    )));
    out
}

/// Columns of an item's number unless there are more items.
const NUMBER_WIDTH: usize = 4;

fn item_lines(number: usize, width: usize, item: &Item, style: Style) -> String {
    let tag = |label: &str| format!("{number:>width$}  {label:<13} ");
    // Continuation lines start under the text: the number, two spaces, the
    // label's 13 columns and one.
    let margin = " ".repeat(width + 16);
    let indent = |text: &str| indent(text, &margin);
    match &item.kind {
        ItemKind::User { text } => {
            format!("{}{}\n", style.bold(&tag("user")), indent(text))
        }
        ItemKind::Assistant {
            text,
            reasoning,
            tool_calls,
            ..
        } => {
            let mut out = style.bold(&tag("assistant"));
            let mut first = true;
            if let Some(reasoning) = reasoning.as_ref().filter(|r| !r.text.is_empty()) {
                out.push_str(
                    &style.dim(&format!("(thinking) {}", first_line(&reasoning.text, 80))),
                );
                out.push('\n');
                first = false;
            }
            if !text.is_empty() {
                if !first {
                    out.push_str(&margin);
                }
                out.push_str(&indent(text));
                out.push('\n');
                first = false;
            }
            for call in tool_calls {
                if !first {
                    out.push_str(&margin);
                }
                out.push_str(&style.dim(&format!("→ {}", tool_call(&call.name, &call.arguments))));
                out.push('\n');
                first = false;
            }
            if first {
                out.push('\n');
            }
            out
        }
        ItemKind::ToolResult {
            content, is_error, ..
        } => {
            let (label, line) = if *is_error {
                ("tool error", style.red(&first_line(content, 100)))
            } else {
                ("tool result", style.dim(&first_line(content, 100)))
            };
            format!("{}{line}\n", tag(label))
        }
        ItemKind::System { kind, text } => {
            let label = match kind {
                SystemKind::Reminder => "⏰ reminder",
                SystemKind::Notification => "✉ notification",
                SystemKind::Summary => "⇣ summary",
                SystemKind::CarryOver => "⇣ carry-over",
                SystemKind::Verification => "✗ checks failed",
                SystemKind::Loop => "↻ loop",
                SystemKind::Other => "system",
            };
            let body = first_line(gist(text), 100);
            style.cyan(&format!("{}{body}\n", tag(label)))
        }
    }
}

/// At most [`MAX_LINES`] lines, continuation lines aligned under the first,
/// made safe for a terminal ([`super::safe`]).
fn indent(text: &str, margin: &str) -> String {
    let text = super::safe::text(text);
    let lines: Vec<&str> = text.trim_end().lines().collect();
    let mut out = lines
        .iter()
        .take(MAX_LINES)
        .copied()
        .collect::<Vec<_>>()
        .join(&format!("\n{margin}"));
    if lines.len() > MAX_LINES {
        out.push_str(&format!(
            " (+{})",
            super::plural(lines.len() - MAX_LINES, "line")
        ));
    }
    out
}

/// Lines of a message shown before the rest is counted, not printed.
const MAX_LINES: usize = 6;

/// The first line that says something: XML-ish wrapper tags are skipped.
fn gist(text: &str) -> &str {
    let text = text.trim();
    let start = text
        .lines()
        .position(|l| {
            let l = l.trim();
            let tag = l.starts_with('<') && l.ends_with('>');
            !l.is_empty() && !tag
        })
        .unwrap_or(0);
    let offset: usize = text.lines().take(start).map(|l| l.len() + 1).sum();
    &text[offset.min(text.len())..]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gist_skips_wrapper_tags() {
        assert_eq!(
            gist("<summary>\nDone: a\n</summary>"),
            "Done: a\n</summary>"
        );
        assert_eq!(gist("plain"), "plain");
        assert_eq!(gist("<only>"), "<only>");
    }

    #[test]
    fn long_messages_are_cut() {
        let text = (0..10)
            .map(|i| i.to_string())
            .collect::<Vec<_>>()
            .join("\n");
        let shown = indent(&text, "  ");
        assert_eq!(shown.lines().count(), MAX_LINES);
        assert!(shown.ends_with("5 (+4 lines)"), "{shown}");
    }

    #[test]
    fn text_starts_in_one_column_past_ten_thousand_items() {
        let records: Vec<LogRecord> = (1..=10_001)
            .map(|n| LogRecord::Item(Item::user(format!("text {n}\nmore {n}"))))
            .collect();
        let shown = history_with_files(&records, &HashMap::new(), Style::PLAIN);
        let columns: std::collections::BTreeSet<usize> = shown
            .lines()
            .map(|line| {
                line.find("text ")
                    .or_else(|| line.find("more "))
                    .expect("each line holds text")
            })
            .collect();
        assert_eq!(columns.len(), 1, "{columns:?}");
        // Numbers below 10,000 are padded to the widest.
        assert!(shown.starts_with("    1  user"), "{}", &shown[..40]);
        // Followed from item 10,000 on, numbers take five columns.
        let mut follow = Numbered::after(9_999);
        let next = follow.render(&records[..1], Style::PLAIN);
        assert!(next.starts_with("10000  user"), "{next}");
    }
}
