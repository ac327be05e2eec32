//! Text for people: streamed answers, one line per tool call, the plan.
//! On a terminal the bottom of the screen is live ([`super::live`]): the
//! checklist and a status line (what the agent does, for how long, tokens
//! and cost so far), redrawn in place, with everything else printed above
//! it. Elsewhere (a pipe, a file, `NO_COLOR`) it is plain lines: the
//! checklist printed in full at each change, no status line.

use super::live::{self, Live, Phase};
use super::{Finished, Output, Started};
use crate::render::{self, plural, safe};
use crate::style::Style;
use anyhow::{Context, Result};
use pod::PodEvent;
use pod_tools::TODO_WRITE;
use pod_worker::TurnEndReason;
use std::io::Write;

/// Human-readable output on stdout.
pub struct HumanOutput {
    style: Style,
    // Whether the cursor is at the start of a line.
    at_line_start: bool,
    // Whether the current line is streamed reasoning (set apart from text).
    in_reasoning: bool,
    // The bottom of the screen, on a terminal.
    live: Option<Live>,
    // The profile's prices, for the end line's cost.
    prices: Option<pod_llm::Prices>,
    // The plan as it stands, printed once more at the end on a terminal.
    todos: Vec<pod_tools::TodoItem>,
    // Calls whose refusal was shown (their "not run" result is not).
    refused: std::collections::HashSet<String>,
}

impl HumanOutput {
    /// Output decorated with `style`; cursor movement only when it allows
    /// colours (a terminal).
    pub fn new(style: Style) -> Self {
        Self {
            style,
            at_line_start: true,
            in_reasoning: false,
            live: None,
            prices: None,
            todos: Vec::new(),
            refused: std::collections::HashSet::new(),
        }
    }

    /// Writes `text` above the live region (cleared first, drawn again
    /// once the cursor is back at the start of a line), in one write.
    fn write(&mut self, text: &str) -> Result<()> {
        if text.is_empty() {
            return Ok(());
        }
        let mut all = String::new();
        if let Some(live) = &mut self.live {
            all.push_str(&live.clear());
        }
        all.push_str(text);
        self.at_line_start = text.ends_with('\n');
        if let (Some(live), true) = (&mut self.live, self.at_line_start) {
            all.push_str(&live.draw(live::terminal_width()));
        }
        let mut out = std::io::stdout().lock();
        out.write_all(all.as_bytes())
            .and_then(|()| out.flush())
            .context("cannot write to stdout")
    }

    /// Draws the live region again (after its state changed), when the
    /// cursor is at the start of a line.
    fn redraw(&mut self) -> Result<()> {
        let Some(live) = &mut self.live else {
            return Ok(());
        };
        if !self.at_line_start {
            return Ok(());
        }
        let text = format!("{}{}", live.clear(), live.draw(live::terminal_width()));
        let mut out = std::io::stdout().lock();
        out.write_all(text.as_bytes())
            .and_then(|()| out.flush())
            .context("cannot write to stdout")
    }

    /// Moves the live region to `phase` and shows it.
    fn phase(&mut self, phase: Phase) -> Result<()> {
        match &mut self.live {
            Some(live) => {
                live.phase(phase);
                self.redraw()
            }
            None => Ok(()),
        }
    }

    /// Writes whole lines, starting on a fresh line.
    fn lines(&mut self, text: &str) -> Result<()> {
        let lead = if self.at_line_start { "" } else { "\n" };
        self.write(&format!("{lead}{text}\n"))
    }

    fn checklist(&mut self, todos: &[pod_tools::TodoItem]) -> Result<()> {
        self.todos = todos.to_vec();
        if let Some(live) = &mut self.live {
            // Redrawn in place at the bottom.
            live.plan(todos);
            return self.redraw();
        }
        let text = render::checklist(todos, self.style);
        self.lines(&text)
    }

    fn turn_ended(&mut self, reason: &TurnEndReason) -> Result<()> {
        let note = match reason {
            TurnEndReason::EndTurn => None,
            TurnEndReason::Cancelled => Some("turn cancelled".to_string()),
            TurnEndReason::MaxTokens => Some("the answer hit the output token limit".into()),
            TurnEndReason::Refusal => Some("the provider refused the answer".into()),
            TurnEndReason::Limit(limit) => Some(limit.stop_line()),
            TurnEndReason::Aborted(why) => Some(format!("turn aborted: {}", safe::line(why))),
            TurnEndReason::Paused(why) => Some(format!("turn paused: {}", safe::line(why))),
            TurnEndReason::Parked(why) => Some(safe::line(why).into_owned()),
            TurnEndReason::Yielded(_) => Some("turn yielded".into()),
            TurnEndReason::Stalled => Some("no progress on the unfinished plan".into()),
            TurnEndReason::GoalUnmet(why) => Some(format!("unverified: {}", safe::line(why))),
            TurnEndReason::Rejected(why) => Some(format!("prompt rejected: {}", safe::line(why))),
        };
        match note {
            Some(note) => self.lines(&self.style.yellow(&format!("({note})"))),
            None if !self.at_line_start => self.write("\n"),
            None => Ok(()),
        }
    }
}

impl Output for HumanOutput {
    fn started(&mut self, started: &Started) -> Result<()> {
        self.prices = started.prices;
        if self.style.ansi {
            self.live = Some(Live::new(self.style, started.prices));
        }
        let verb = if started.resumed {
            "resumed"
        } else {
            "session"
        };
        self.lines(&format!(
            "{} {} {}",
            self.style.bold(verb),
            started.session_id,
            self.style.dim(&format!("({})", started.model))
        ))
    }

    fn event(&mut self, event: &PodEvent) -> Result<()> {
        let s = self.style;
        let was_reasoning = std::mem::take(&mut self.in_reasoning);
        if let (Some(live), PodEvent::TextDelta { text }) = (&mut self.live, event) {
            live.phase(Phase::Writing);
            live.streamed(text);
        }
        match event {
            PodEvent::TurnStarted { .. } => self.phase(Phase::Thinking),
            PodEvent::Usage { usage } => match &mut self.live {
                Some(live) => {
                    live.usage(usage);
                    self.redraw()
                }
                None => Ok(()),
            },
            PodEvent::ToolCallStreaming { name } => {
                // The answer's text is over: its line ends, and the status
                // line says which call is being written.
                if !self.at_line_start && self.live.is_some() {
                    self.write("\n")?;
                }
                self.phase(Phase::Calling(name.clone()))
            }
            // The driver reports a failed turn once, with how to go on.
            PodEvent::TurnFailed { .. } => Ok(()),
            PodEvent::TextDelta { text } if was_reasoning => {
                self.write(&format!("\n{}", safe::text(text)))
            }
            PodEvent::TextDelta { text } => self.write(&safe::text(text)),
            PodEvent::ReasoningDelta { text } => {
                // Reasoning gets its own dim line, so it never runs into the answer.
                self.in_reasoning = true;
                let lead = match (was_reasoning, self.at_line_start) {
                    (true, _) => "",
                    (false, true) => "thinking: ",
                    (false, false) => "\nthinking: ",
                };
                self.write(&s.dim(&format!("{lead}{}", safe::text(text))))
            }
            PodEvent::ToolCallStarted {
                name, arguments, ..
            } => {
                let call = render::tool_call(name, arguments);
                if let Some(live) = &mut self.live {
                    live.phase(Phase::Running(call.clone()));
                }
                self.lines(&s.dim(&format!("  → {call}")))
            }
            PodEvent::CallNotRun {
                call_id,
                name,
                arguments,
                by,
                reason,
            } => {
                self.refused.insert(call_id.clone());
                // A hook's reason is its own; the approval's result says
                // what allows this very tool (--allow write_file).
                let why = match by {
                    pod::NotRunBy::Hook => {
                        format!(
                            "not run: blocked by a PreToolUse hook: {}",
                            safe::line(reason)
                        )
                    }
                    _ => render::first_line(reason, 240),
                };
                let line = format!("  ✗ {} {why}", render::tool_call(name, arguments));
                self.lines(&s.red(&line))
            }
            // Its refusal was shown, with the call.
            PodEvent::ToolCallFinished { call_id, .. } if self.refused.remove(call_id) => {
                if let Some(live) = &mut self.live {
                    live.phase(Phase::Thinking);
                }
                Ok(())
            }
            PodEvent::ToolCallFinished {
                name,
                content,
                is_error,
                ..
            } => {
                if let Some(live) = &mut self.live {
                    live.phase(Phase::Thinking);
                }
                if *is_error {
                    // Wide enough for a refusal and its advice (--yes, --allow TOOL).
                    let line = format!(
                        "  ✗ {}: {}",
                        safe::line(name),
                        render::first_line(content, 240)
                    );
                    self.lines(&s.red(&line))
                } else if name == TODO_WRITE {
                    // The checklist that follows says it all.
                    Ok(())
                } else {
                    let line = format!("  ✓ {}", render::first_line(content, 100));
                    self.lines(&s.dim(&line))
                }
            }
            PodEvent::TodosChanged { todos } => self.checklist(todos),
            PodEvent::ReminderInjected { text } => {
                let line = format!("  ⏰ reminder: {}", reminder_gist(text));
                self.lines(&s.cyan(&line))
            }
            PodEvent::Hook {
                hook_event,
                message,
                failed,
            } => {
                let line = format!(
                    "  ⚓ {}: {}",
                    safe::line(hook_event),
                    render::first_line(message, 160)
                );
                match failed {
                    true => self.lines(&s.yellow(&line)),
                    false => self.lines(&s.cyan(&line)),
                }
            }
            PodEvent::NotificationDelivered { text } => {
                let line = format!("  ✉ notification: {}", render::first_line(text, 100));
                self.lines(&s.cyan(&line))
            }
            PodEvent::TurnEnded { reason, .. } => self.turn_ended(reason),
            PodEvent::VerifyStarted { round, checks } => self.lines(&s.cyan(&format!(
                "  ⧗ verifying (round {round}): {}",
                plural(*checks, "check")
            ))),
            PodEvent::Verified { record } => {
                let text = render::history::verify_lines(record, s);
                self.lines(text.trim_end_matches('\n'))
            }
            PodEvent::RequestRetried { attempt, error } => self.lines(&s.yellow(&format!(
                "  ↻ the model's stream broke ({}); retry {attempt}, the text above is void",
                render::first_line(error, 80)
            ))),
            PodEvent::CompactionStarted => {
                if let Some(live) = &mut self.live {
                    live.phase(Phase::Compacting);
                }
                self.lines(&s.cyan("  ⇣ compacting the context…"))
            }
            PodEvent::Compacted {
                tokens_before,
                tokens_after,
                summary_chars,
            } => self.lines(&s.cyan(&format!(
                "  ⇣ compacted: ~{tokens_before} → ~{tokens_after} tokens \
                 (summary of {summary_chars} chars; the plan is carried over)"
            ))),
            PodEvent::CompactionFailed { reason } => self.lines(&s.yellow(&format!(
                "  compaction failed, history kept: {}",
                render::first_line(reason, 120)
            ))),
            PodEvent::Error { message } => {
                self.lines(&s.red(&format!("  error: {}", render::first_line(message, 200))))
            }
            PodEvent::Subagent { .. } => match subagent_line(event, s) {
                Some(line) => self.lines(&line),
                None => Ok(()),
            },
            // Events newer than this front end are shown in --json only.
            #[allow(unreachable_patterns)]
            _ => Ok(()),
        }
    }

    fn lagged(&mut self, count: u64) -> Result<()> {
        self.lines(&self.style.dim(&format!("  ({count} events not shown)")))
    }

    fn note(&mut self, text: &str) -> Result<()> {
        self.lines(&self.style.yellow(&safe::text(text)))
    }

    fn prompting(&mut self) -> Result<()> {
        if !self.at_line_start {
            self.write("\n")?;
        }
        // The question is asked below: the live region goes away (it is
        // drawn again with the next output, after the answer).
        if let Some(live) = &mut self.live {
            let clear = live.clear();
            let mut out = std::io::stdout().lock();
            out.write_all(clear.as_bytes())
                .and_then(|()| out.flush())
                .context("cannot write to stdout")?;
        }
        Ok(())
    }

    fn tick(&mut self) -> Result<()> {
        if let Some(live) = &mut self.live {
            live.tick();
        }
        self.redraw()
    }

    fn ticks(&self) -> bool {
        self.live.is_some()
    }

    fn finished(&mut self, finished: &Finished) -> Result<()> {
        let s = self.style;
        // The live region goes; the plan stays on screen as it ended.
        if let Some(mut live) = self.live.take() {
            let clear = live.clear();
            self.write(&clear)?;
            if !self.todos.is_empty() {
                let text = render::checklist(&self.todos, self.style);
                self.lines(&text)?;
            }
        }
        let todos = &finished.todos;
        let mut state = if finished.interrupted {
            "interrupted".to_string()
        } else if finished.reason.is_none() {
            "the turn failed".to_string()
        } else if finished.stopped.is_some() {
            format!(
                "stopped after {}",
                plural(finished.requests as usize, "model request")
            )
        } else {
            plural(finished.requests as usize, "model request")
        };
        let tokens = finished.usage.prompt_tokens + finished.usage.completion_tokens;
        if tokens > 0 {
            state.push_str(&format!(", {} tokens", render::tokens(tokens)));
            if let Some(prices) = &self.prices {
                state.push_str(&format!(", cost {:.2}", prices.cost(&finished.usage)));
            }
        }
        if todos.total > 0 {
            state.push_str(&format!(
                ", {} of {} todos completed",
                todos.completed, todos.total
            ));
        }
        match finished.verified {
            Some(true) => state.push_str(", verified"),
            Some(false) => state.push_str(", not verified"),
            None => {}
        }
        let mut text = format!(
            "{} {} {}\n  log: {}",
            s.bold("session"),
            finished.session_id,
            s.dim(&format!("({state})")),
            finished.log_path
        );
        for line in super::not_run_lines(finished) {
            text.push_str(&format!("\n  {}", s.yellow(&line)));
        }
        if let Some(stopped) = &finished.stopped {
            text.push_str(&format!("\n  {}", s.yellow(&stopped.message)));
        }
        let failed = finished.reason.is_none();
        if finished.interrupted || failed || finished.stopped.is_some() || todos.unfinished() {
            text.push_str(&format!(
                "\n  continue with: pod resume {}",
                finished.session_id
            ));
        }
        self.lines(&text)
    }

    fn shows_hints_on_stdout(&self) -> bool {
        true
    }
}

/// A reminder in a few words: how much of the plan is left.
fn reminder_gist(text: &str) -> String {
    let unfinished = text
        .lines()
        .filter(|l| l.starts_with("[>]") || l.starts_with("[ ]"))
        .count();
    if unfinished > 0 {
        return format!("{unfinished} todo(s) unfinished");
    }
    // The first line that says something: not the tag around it.
    let said = text
        .lines()
        .map(str::trim)
        .find(|line| {
            !line.is_empty()
                && !line.starts_with("<system-reminder")
                && !line.starts_with("</system-reminder")
        })
        .unwrap_or_default();
    render::first_line(said, 80)
}

/// A subagent's event as one line under its `task` call, indented by depth
/// and named by the task's description (`    │ alpha › beta → read_file(…)`);
/// `None` for what is not shown (its streamed text: its answer is the
/// call's result).
fn subagent_line(event: &PodEvent, s: Style) -> Option<String> {
    let mut path = Vec::new();
    let mut event = event;
    while let PodEvent::Subagent {
        description, inner, ..
    } = event
    {
        path.push(description.as_str());
        event = inner;
    }
    let lead = format!(
        "{}│ {}",
        "  ".repeat(path.len() + 1),
        safe::line(&path.join(" › "))
    );
    let line = match event {
        PodEvent::TurnStarted { .. } => s.dim(&format!("{lead}: started")),
        PodEvent::ToolCallStarted {
            name, arguments, ..
        } => s.dim(&format!("{lead} → {}", render::tool_call(name, arguments))),
        PodEvent::ToolCallFinished {
            name,
            content,
            is_error: true,
            ..
        } => s.red(&format!(
            "{lead} ✗ {}: {}",
            safe::line(name),
            render::first_line(content, 160)
        )),
        PodEvent::TodosChanged { todos } => {
            s.cyan(&format!("{lead}: {}", render::plan_line(todos)))
        }
        PodEvent::Compacted { .. } => s.cyan(&format!("{lead}: ⇣ compacted")),
        PodEvent::TurnEnded { reason, .. } => match reason {
            TurnEndReason::EndTurn => s.dim(&format!("{lead}: finished")),
            reason => s.yellow(&format!(
                "{lead}: ended ({})",
                safe::line(&format!("{reason:?}"))
            )),
        },
        PodEvent::Error { message } => s.red(&format!(
            "{lead}: error: {}",
            render::first_line(message, 160)
        )),
        _ => return None,
    };
    Some(line)
}
