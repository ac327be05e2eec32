//! What people read: the todo checklist, tool calls in one line, history.
//!
//! Everything here returns strings and does no IO, so it can be snapshot.

pub mod history;
pub mod safe;

use crate::style::Style;
use pod_tools::{render_todos, TodoItem, TodoStatus, TODO_WRITE};

/// The todo checklist in the readback form the model also sees
/// (`[x]` completed, `[>]` in progress, `[ ]` pending, "n of m completed"),
/// indented by two spaces; on a terminal the item in progress is
/// highlighted and completed items are dimmed.
pub fn checklist(todos: &[TodoItem], style: Style) -> String {
    let plain = render_todos(todos);
    let plain = safe::text(&plain);
    let mut lines = plain.lines();
    let mut out = String::new();
    if let Some(title) = lines.next() {
        out.push_str("  ");
        out.push_str(&style.bold(title));
    }
    for (line, todo) in lines.zip(todos) {
        out.push_str("\n  ");
        let styled = match todo.status {
            TodoStatus::InProgress => style.yellow(line),
            TodoStatus::Completed => style.green(line),
            TodoStatus::Pending => line.to_string(),
        };
        out.push_str(&styled);
    }
    out
}

/// A plan in one line: `2/5 done, now: Write the tests`.
pub fn plan_line(todos: &[TodoItem]) -> String {
    let done = todos
        .iter()
        .filter(|t| t.status == TodoStatus::Completed)
        .count();
    let mut line = format!("plan {done}/{} done", todos.len());
    if let Some(now) = todos.iter().find(|t| t.status == TodoStatus::InProgress) {
        line.push_str(&format!(", now: {}", shorten(&now.content, 60)));
    }
    line
}

/// "2 of 5" style progress, or "-" without a list.
pub fn progress(todos: &[TodoItem]) -> String {
    if todos.is_empty() {
        return "-".to_string();
    }
    let done = todos
        .iter()
        .filter(|t| t.status == TodoStatus::Completed)
        .count();
    format!("{done}/{}", todos.len())
}

/// A tool call in one line: `name(arguments)`, arguments shortened; a
/// `todo_write` call is summarized by its item count.
pub fn tool_call(name: &str, arguments: &str) -> String {
    if name == pod::TASK {
        if let Ok(value) = serde_json::from_str::<serde_json::Value>(arguments) {
            let text = ["description", "prompt"]
                .iter()
                .filter_map(|key| value.get(*key).and_then(|v| v.as_str()))
                .find(|text| !text.trim().is_empty());
            if let Some(text) = text {
                let mode = match value.get("read_only").and_then(|v| v.as_bool()) {
                    Some(true) => " (read-only)",
                    _ => "",
                };
                return format!("task: {}{mode}", shorten(text.trim(), 60));
            }
        }
    }
    if name == TODO_WRITE {
        if let Some(count) = pod_tools::items_in_call(arguments) {
            return format!("{TODO_WRITE}({})", plural(count, "item"));
        }
    }
    format!(
        "{}({})",
        safe::line(&display_name(name)),
        shorten(arguments.trim(), 60)
    )
}

/// A tool's name for people: an MCP tool's (SERVER__TOOL) as `SERVER › TOOL`.
pub fn display_name(name: &str) -> String {
    match name.split_once(pod_mcp::names::SEPARATOR) {
        Some((server, tool)) if !server.is_empty() && !tool.is_empty() => {
            format!("{server} › {tool}")
        }
        _ => name.to_string(),
    }
}

/// "1 line", "2 lines": a count and its noun, in the right number.
pub fn plural(count: usize, noun: &str) -> String {
    match count {
        1 => format!("1 {noun}"),
        n => format!("{n} {noun}s"),
    }
}

/// The first line of `text`, at most `max` characters, with a marker when
/// something was left out.
pub fn first_line(text: &str, max: usize) -> String {
    let mut lines = text.trim().lines();
    let first = lines.next().unwrap_or_default();
    let rest = lines.count();
    let line = shorten(first, max);
    if rest > 0 {
        format!("{line} (+{})", plural(rest, "line"))
    } else {
        line
    }
}

/// `text` cut to at most `max` characters, ending in `…` when cut, on one
/// line: control characters become spaces, and what else would act on a
/// terminal is shown escaped ([`safe`]).
pub fn shorten(text: &str, max: usize) -> String {
    let flat: String = text
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    let flat = safe::line(&flat).into_owned();
    if flat.chars().count() <= max {
        return flat;
    }
    let mut cut: String = flat.chars().take(max.saturating_sub(1)).collect();
    cut.push('…');
    cut
}

#[cfg(test)]
mod tests {
    use super::*;

    fn todo(id: &str, status: TodoStatus) -> TodoItem {
        TodoItem {
            id: id.into(),
            content: format!("Do {id}"),
            status,
        }
    }

    #[test]
    fn checklist_marks_each_status_and_counts() {
        let todos = [
            todo("a", TodoStatus::Completed),
            todo("b", TodoStatus::InProgress),
            todo("c", TodoStatus::Pending),
        ];
        assert_eq!(
            checklist(&todos, Style::PLAIN),
            "  Todo list (1 of 3 completed):\n  [x] a: Do a\n  [>] b: Do b\n  [ ] c: Do c"
        );
        let coloured = checklist(&todos, Style { ansi: true });
        assert!(coloured.contains("\x1b[1;33m[>] b: Do b\x1b[0m"));
        assert_eq!(progress(&todos), "1/3");
        assert_eq!(progress(&[]), "-");
    }

    #[test]
    fn tool_calls_are_one_short_line() {
        assert_eq!(
            tool_call("todo_write", r#"{"todos":[{},{}]}"#),
            "todo_write(2 items)"
        );
        let long = format!("{{\"path\":\"{}\"}}", "x".repeat(100));
        let line = tool_call("read_file", &long);
        assert!(line.ends_with("…)"), "{line}");
        assert_eq!(line.chars().count(), "read_file()".len() + 60);
        assert_eq!(first_line("one\ntwo\nthree", 80), "one (+2 lines)");
        assert_eq!(first_line("one\ntwo", 80), "one (+1 line)");
    }
}

/// A token count in few characters: `950`, `12.3k`, `1.5M`.
pub fn tokens(n: u64) -> String {
    match n {
        0..=999 => n.to_string(),
        1_000..=999_999 => format!("{:.1}k", n as f64 / 1e3),
        _ => format!("{:.1}M", n as f64 / 1e6),
    }
}

/// What a session's answers used, in one line: `1.5M in (91% cached), 20.1k
/// out`, with the cost when prices are known.
pub fn usage(usage: &pod_llm::Usage, cost: Option<f64>) -> String {
    let mut line = format!("{} in", tokens(usage.prompt_tokens));
    if usage.prompt_tokens > 0 && (usage.cache_read_tokens > 0 || usage.cache_write_tokens > 0) {
        let share = usage.cache_read_tokens as f64 * 100.0 / usage.prompt_tokens as f64;
        line.push_str(&format!(" ({share:.0}% read from cache"));
        if usage.cache_write_tokens > 0 {
            line.push_str(&format!(", {} written", tokens(usage.cache_write_tokens)));
        }
        line.push(')');
    }
    line.push_str(&format!(", {} out", tokens(usage.completion_tokens)));
    if usage.reasoning_tokens > 0 {
        line.push_str(&format!(" ({} reasoning)", tokens(usage.reasoning_tokens)));
    }
    if let Some(cost) = cost {
        line.push_str(&format!("; cost {cost:.4}"));
    }
    line
}

#[cfg(test)]
mod usage_tests {
    #[test]
    fn usage_lines_name_the_cache_share_and_cost() {
        let usage = pod_llm::Usage {
            prompt_tokens: 1_500_000,
            completion_tokens: 20_100,
            cache_read_tokens: 1_365_000,
            cache_write_tokens: 30_000,
            reasoning_tokens: 0,
        };
        assert_eq!(
            super::usage(&usage, Some(1.23456)),
            "1.5M in (91% read from cache, 30.0k written), 20.1k out; cost 1.2346"
        );
        let plain = pod_llm::Usage {
            prompt_tokens: 950,
            completion_tokens: 12,
            ..Default::default()
        };
        assert_eq!(super::usage(&plain, None), "950 in, 12 out");
    }
}
