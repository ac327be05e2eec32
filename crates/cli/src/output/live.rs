//! The bottom of the screen while a run works, on a terminal: the plan's
//! checklist and one status line (what the agent is doing, for how long,
//! tokens and cost so far, how to stop it), redrawn in place. Everything
//! else is printed above it: before each write the region is cleared, and
//! it is drawn again once the cursor is back at the start of a line (it
//! stays hidden while an answer's line is still streaming).

use crate::render::{self, safe};
use crate::style::Style;
use pod_tools::{TodoItem, TodoStatus};
use std::time::{Duration, Instant};

/// Frames of the spinner, one per tick.
const SPINNER: &[char] = &['⠋', '⠙', '⠹', '⠸', '⠼', '⠴', '⠦', '⠧', '⠇', '⠏'];

/// Checklist lines shown at most; a longer plan shows the items around the
/// one in progress and says how many more there are.
const MAX_PLAN_LINES: usize = 12;

/// What the agent is doing now.
#[derive(Debug, Clone, PartialEq)]
pub enum Phase {
    /// Waiting for the model.
    Thinking,
    /// The model's answer is streaming.
    Writing,
    /// The model is writing a call of this tool.
    Calling(String),
    /// A tool runs: the call in a few words.
    Running(String),
    /// The context is being compacted.
    Compacting,
}

/// The live region's state.
pub struct Live {
    style: Style,
    phase: Phase,
    since: Instant,
    tokens: u64,
    // Tokens of the answer streaming now (an estimate until its usage
    // arrives).
    streaming: u64,
    cost: Option<f64>,
    prices: Option<pod_llm::Prices>,
    todos: Vec<TodoItem>,
    frame: usize,
    // Lines the region takes on screen now (0: not drawn).
    drawn: usize,
}

impl Live {
    /// A region styled with `style`, pricing tokens with `prices`.
    pub fn new(style: Style, prices: Option<pod_llm::Prices>) -> Self {
        Self {
            style,
            phase: Phase::Thinking,
            since: Instant::now(),
            tokens: 0,
            streaming: 0,
            cost: prices.map(|_| 0.0),
            prices,
            todos: Vec::new(),
            frame: 0,
            drawn: 0,
        }
    }

    /// The agent does something else now.
    pub fn phase(&mut self, phase: Phase) {
        if self.phase != phase {
            self.phase = phase;
            self.since = Instant::now();
        }
    }

    /// Streamed text of the current answer (for the running token count).
    pub fn streamed(&mut self, text: &str) {
        self.streaming += pod_llm::tokens::estimate_text_tokens(text);
    }

    /// An answer's usage arrived: it replaces the streaming estimate.
    pub fn usage(&mut self, usage: &pod_llm::Usage) {
        self.streaming = 0;
        self.tokens += usage.prompt_tokens + usage.completion_tokens;
        if let (Some(prices), Some(cost)) = (&self.prices, &mut self.cost) {
            *cost += prices.cost(usage);
        }
    }

    /// The plan changed.
    pub fn plan(&mut self, todos: &[TodoItem]) {
        self.todos = todos.to_vec();
    }

    /// The next spinner frame.
    pub fn tick(&mut self) {
        self.frame = self.frame.wrapping_add(1);
    }

    /// What clears the region from the screen (the cursor ends where its
    /// first line was); empty when it is not drawn.
    pub fn clear(&mut self) -> String {
        let lines = std::mem::take(&mut self.drawn);
        match lines {
            0 => String::new(),
            1 => "\r\x1b[J".to_string(),
            n => format!("\x1b[{}F\x1b[J", n - 1),
        }
    }

    /// What draws the region at the cursor (at the start of a line) for a
    /// terminal `width` columns wide; the cursor stays on its last line.
    pub fn draw(&mut self, width: usize) -> String {
        let width = width.max(20) - 1;
        let mut lines: Vec<String> = self.plan_lines(width);
        lines.push(self.status_line(width));
        self.drawn = lines.len();
        lines.join("\n")
    }

    fn plan_lines(&self, width: usize) -> Vec<String> {
        if self.todos.is_empty() {
            return Vec::new();
        }
        let s = self.style;
        let now = self
            .todos
            .iter()
            .position(|t| t.status == TodoStatus::InProgress)
            .unwrap_or(0);
        // A window of the plan around the item in progress.
        let first = now
            .saturating_sub(MAX_PLAN_LINES / 2)
            .min(self.todos.len().saturating_sub(MAX_PLAN_LINES));
        let shown = &self.todos[first..(first + MAX_PLAN_LINES).min(self.todos.len())];
        let mut lines = Vec::new();
        for todo in shown {
            let (mark, paint): (&str, fn(Style, &str) -> String) = match todo.status {
                TodoStatus::Completed => ("[x]", Style::green),
                TodoStatus::InProgress => ("[>]", Style::yellow),
                TodoStatus::Pending => ("[ ]", |_, t| t.to_string()),
            };
            let text = format!("  {mark} {}", safe::line(&todo.content));
            lines.push(paint(s, &fit(&text, width)));
        }
        let more = self.todos.len() - shown.len();
        if more > 0 {
            lines.push(s.dim(&fit(&format!("  … and {more} more"), width)));
        }
        lines
    }

    fn status_line(&self, width: usize) -> String {
        let s = self.style;
        let elapsed = clock(self.since.elapsed());
        let doing = match &self.phase {
            Phase::Thinking => format!("thinking {elapsed}"),
            Phase::Writing => format!("writing {elapsed}"),
            Phase::Calling(tool) => format!("writing a {} call {elapsed}", safe::line(tool)),
            Phase::Running(call) => format!("running {call} {elapsed}"),
            Phase::Compacting => format!("compacting the context {elapsed}"),
        };
        let mut parts = vec![doing];
        let tokens = self.tokens + self.streaming;
        if tokens > 0 {
            parts.push(format!("{} tokens", render::tokens(tokens)));
        }
        if let Some(cost) = self.cost.filter(|c| *c > 0.0) {
            parts.push(format!("{cost:.2}"));
        }
        if !self.todos.is_empty() {
            let done = self
                .todos
                .iter()
                .filter(|t| t.status == TodoStatus::Completed)
                .count();
            parts.push(format!("plan {done}/{}", self.todos.len()));
        }
        parts.push("Ctrl-C to stop".into());
        let spinner = SPINNER[self.frame % SPINNER.len()];
        let line = fit(&format!("{spinner} {}", parts.join(" · ")), width);
        s.cyan(&line)
    }
}

/// `12s`, `3m05s`, `1h02m`.
fn clock(elapsed: Duration) -> String {
    let secs = elapsed.as_secs();
    match secs {
        0..=59 => format!("{secs}s"),
        60..=3599 => format!("{}m{:02}s", secs / 60, secs % 60),
        _ => format!("{}h{:02}m", secs / 3600, (secs % 3600) / 60),
    }
}

/// `text` cut to `width` characters (with `…`), so a line never wraps and
/// the region's height is what was drawn.
fn fit(text: &str, width: usize) -> String {
    if text.chars().count() <= width {
        return text.to_string();
    }
    let mut cut: String = text.chars().take(width.saturating_sub(1)).collect();
    cut.push('…');
    cut
}

/// The terminal's width in columns (80 when it cannot be asked).
pub fn terminal_width() -> usize {
    // SAFETY: TIOCGWINSZ writes a `winsize` into the struct we pass, and
    // nothing else; stdout's descriptor outlives the call.
    let mut size: libc::winsize = unsafe { std::mem::zeroed() };
    let asked = unsafe { libc::ioctl(libc::STDOUT_FILENO, libc::TIOCGWINSZ, &mut size) };
    match (asked, size.ws_col) {
        (0, cols) if cols > 0 => cols as usize,
        _ => 80,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn todo(id: &str, status: TodoStatus) -> TodoItem {
        TodoItem {
            id: id.into(),
            content: format!("Item {id}"),
            status,
        }
    }

    #[test]
    fn the_region_fits_the_width_and_clears_what_it_drew() {
        let mut live = Live::new(Style { ansi: false }, None);
        live.plan(&[
            todo("a", TodoStatus::Completed),
            todo("b", TodoStatus::InProgress),
            todo("c", TodoStatus::Pending),
        ]);
        live.phase(Phase::Running(
            "bash: cargo test --workspace --all-features".into(),
        ));
        let drawn = live.draw(30);
        let lines: Vec<&str> = drawn.lines().collect();
        assert_eq!(lines.len(), 4, "{drawn}");
        assert!(lines.iter().all(|l| l.chars().count() <= 29), "{drawn}");
        assert!(lines[3].starts_with("⠋ running bash"), "{drawn}");
        assert_eq!(live.clear(), "\x1b[3F\x1b[J");
        assert_eq!(live.clear(), "", "nothing left to clear");
    }

    #[test]
    fn a_long_plan_shows_a_window_around_the_item_in_progress() {
        let mut live = Live::new(Style { ansi: false }, None);
        let todos: Vec<TodoItem> = (0..40)
            .map(|i| {
                let status = match i {
                    0..20 => TodoStatus::Completed,
                    20 => TodoStatus::InProgress,
                    _ => TodoStatus::Pending,
                };
                todo(&i.to_string(), status)
            })
            .collect();
        live.plan(&todos);
        let drawn = live.draw(80);
        assert!(drawn.contains("[>] Item 20"), "{drawn}");
        assert!(drawn.contains("… and 28 more"), "{drawn}");
        assert!(drawn.contains("plan 20/40"), "{drawn}");
        assert_eq!(drawn.lines().count(), MAX_PLAN_LINES + 2);
    }

    #[test]
    fn tokens_and_cost_add_up_and_the_estimate_gives_way_to_usage() {
        let prices = pod_llm::Prices {
            input: 1_000_000.0,
            ..Default::default()
        };
        let mut live = Live::new(Style { ansi: false }, Some(prices));
        live.streamed("some streamed words here");
        assert!(live.draw(80).contains(" tokens"));
        live.usage(&pod_llm::Usage {
            prompt_tokens: 2,
            ..Default::default()
        });
        let drawn = live.draw(80);
        assert!(drawn.contains("2 tokens · 2.00"), "{drawn}");
    }

    #[test]
    fn clocks_read_as_people_write_them() {
        assert_eq!(clock(Duration::from_secs(12)), "12s");
        assert_eq!(clock(Duration::from_secs(185)), "3m05s");
        assert_eq!(clock(Duration::from_secs(3720)), "1h02m");
    }
}
