//! The loop guard: a model that repeats itself is reminded once, then
//! stopped, whether its calls succeed or fail (`repeated_failures` in the
//! worker only counts failures).
//!
//! What counts as a loop, read from the run's committed history before
//! each request (so it costs nothing to keep and a crash loses nothing):
//!
//! - the same call (tool and arguments, compared as JSON) `repeats` times
//!   in a row: `bash "echo pending"` ×5;
//! - a short cycle of calls (two or three) repeated `repeats` times in a
//!   row: `read_file a`, `bash make`, `read_file a`, `bash make`, …;
//! - the same non-empty text in `repeats` answers in a row.
//!
//! At `repeats` the model gets a `<system-reminder>` naming the loop; if
//! it goes on [`LOOP_GRACE`] more times, the run stops before the next
//! request with [`Limit::Loop`] (`stopped: loop (bash "echo pending" ×7)`).
//! Breaking the pattern starts over. Only the run's own items count: a
//! resume (a person's decision to go on) starts a new window. A tool the
//! operator exempts (`loop_exempt`, a polling tool) breaks every pattern
//! instead of making one. `repeats = 0` turns the guard off.
//!
//! False positives, and why this shape avoids them (tickets/governor.md has
//! the analysis): a plan worked item by item repeats its work calls
//! (`list_dir .` twice per item) but its `todo_write` calls differ, so no
//! run of five identical calls and no exact cycle forms; "Pausing." said
//! after every item is separated by answers without text, so no text
//! repeats in a row; a retry after an edit differs in the edit.

use async_trait::async_trait;
use pod_llm::{Item, ItemKind, SystemKind};
use pod_worker::{Interceptor, Limit, PreRequestAction, RunStart};
use std::sync::Arc;
use uuid::Uuid;

/// Repeats after the reminder before the run stops: one more may be the
/// model finishing what it started when the reminder came; two is a model
/// that did not take it in.
pub const LOOP_GRACE: u32 = 2;

/// Default of [`LoopGuardConfig::repeats`]: five identical calls in a row
/// is more than any retry of a flaky step (the worker's failure guard
/// uses the same number) and the loops seen in the wild are hundreds long.
pub const DEFAULT_LOOP_REPEATS: u32 = 5;

/// The longest cycle of calls looked for. Longer cycles are rare in
/// practice and more often legitimate (a build-test-fix round).
const MAX_CYCLE: usize = 3;

/// What the loop guard looks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoopGuardConfig {
    /// Repeats before the reminder; 0 turns the guard off.
    pub repeats: u32,
    /// Tools never counted (their calls break every pattern).
    pub exempt: Vec<String>,
}

impl Default for LoopGuardConfig {
    fn default() -> Self {
        Self {
            repeats: DEFAULT_LOOP_REPEATS,
            exempt: Vec::new(),
        }
    }
}

/// A loop found in the history: what repeats, for people, and how often.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Found {
    what: String,
    times: u32,
}

/// Reminds, then stops, a model that repeats itself.
pub struct LoopGuard {
    config: LoopGuardConfig,
    // The last item before the run: only what follows it counts.
    since: Option<Uuid>,
    // The loop the model was reminded of, while it goes on.
    reminded: Option<String>,
    // Decided before the request, by what was committed.
    stop: Option<Limit>,
}

impl LoopGuard {
    /// A guard with `config`.
    pub fn new(config: LoopGuardConfig) -> Self {
        Self {
            config,
            since: None,
            reminded: None,
            stop: None,
        }
    }

    /// The items of the run so far (all of a compacted history that no
    /// longer holds the run's first item).
    fn window<'a>(&self, history: &'a [Item]) -> &'a [Item] {
        match self.since {
            Some(id) => match history.iter().rposition(|item| item.id == id) {
                Some(at) => &history[at + 1..],
                None => history,
            },
            None => history,
        }
    }

    fn find(&self, history: &[Item]) -> Option<Found> {
        let repeats = self.config.repeats;
        let window = self.window(history);
        // Repeats past the stop decide nothing: only the end of the window
        // is read, so a long run costs each request the same.
        let most = usize::try_from(repeats.saturating_add(LOOP_GRACE + 1)).unwrap_or(usize::MAX);
        let calls = self.calls(window, most.saturating_mul(MAX_CYCLE));
        // On a tie the calls name the loop (they are what costs).
        let found = [repeated_text(window, most), cycle(&calls)]
            .into_iter()
            .flatten()
            .max_by_key(|found| found.times)?;
        (found.times >= repeats).then_some(found)
    }

    /// The last `most` calls of the window, in order: each one's tool and
    /// canonical arguments, or `None` for an exempt tool's.
    fn calls(&self, window: &[Item], most: usize) -> Vec<Option<(String, String)>> {
        let mut calls: Vec<_> = window
            .iter()
            .rev()
            .flat_map(|item| item.tool_calls().iter().rev())
            .take(most)
            .map(|call| {
                if self.config.exempt.contains(&call.name) {
                    return None;
                }
                // Compared as JSON: the same arguments spaced or ordered
                // otherwise are the same call.
                let arguments = serde_json::from_str::<serde_json::Value>(&call.arguments)
                    .map_or_else(|_| call.arguments.clone(), |value| value.to_string());
                Some((call.name.clone(), arguments))
            })
            .collect();
        calls.reverse();
        calls
    }
}

/// The longest repetition at the end of `calls` of one call or a cycle of
/// up to [`MAX_CYCLE`] calls, with how many times it repeats.
fn cycle(calls: &[Option<(String, String)>]) -> Option<Found> {
    let mut best: Option<Found> = None;
    for period in 1..=MAX_CYCLE.min(calls.len()) {
        let block = &calls[calls.len() - period..];
        if block.iter().any(Option::is_none) {
            continue;
        }
        // A cycle of one call repeated is that call's loop, found at 1.
        if period > 1 && block.iter().all(|call| *call == block[0]) {
            continue;
        }
        let mut times = 1;
        while calls.len() >= (times + 1) * period
            && calls[calls.len() - (times + 1) * period..calls.len() - times * period] == *block
        {
            times += 1;
        }
        if times < 2 {
            continue;
        }
        let times = u32::try_from(times).unwrap_or(u32::MAX);
        if best.as_ref().is_none_or(|found| times > found.times) {
            let what = match period {
                1 => described(block.iter().flatten().next()),
                _ => {
                    // Sorted: the cycle read from any of its calls is the
                    // same loop, named the same.
                    let mut names: Vec<&str> = block
                        .iter()
                        .flatten()
                        .map(|(name, _)| name.as_str())
                        .collect();
                    names.sort_unstable();
                    format!("cycle of {}", names.join(", "))
                }
            };
            best = Some(Found { what, times });
        }
    }
    best
}

/// The same non-empty text in the last answers, in a row (counted up to
/// `most`).
fn repeated_text(window: &[Item], most: usize) -> Option<Found> {
    let mut texts = window.iter().rev().filter_map(|item| match &item.kind {
        ItemKind::Assistant { text, .. } => Some(text.trim()),
        _ => None,
    });
    let last = texts.next().filter(|text| !text.is_empty())?;
    let times = 1 + texts
        .take(most.saturating_sub(1))
        .take_while(|text| *text == last)
        .count();
    Some(Found {
        what: format!("text {:?}", short(last)),
        times: u32::try_from(times).unwrap_or(u32::MAX),
    })
}

/// A call as people read it: `bash "echo pending"` (a single string
/// argument quoted), else the tool and its arguments, shortened.
fn described(call: Option<&(String, String)>) -> String {
    let Some((name, arguments)) = call else {
        return String::new();
    };
    let value: Option<serde_json::Value> = serde_json::from_str(arguments).ok();
    let single = value
        .as_ref()
        .and_then(serde_json::Value::as_object)
        .filter(|object| object.len() == 1)
        .and_then(|object| object.values().next())
        .and_then(serde_json::Value::as_str);
    match single {
        Some(text) => format!("{name} {:?}", short(text)),
        None => format!("{name} {}", short(arguments)),
    }
}

/// At most 60 characters of `text`, on one line.
fn short(text: &str) -> String {
    const MAX_CHARS: usize = 60;
    let line: String = text.split_whitespace().collect::<Vec<_>>().join(" ");
    match line.chars().count() > MAX_CHARS {
        true => format!("{}…", line.chars().take(MAX_CHARS).collect::<String>()),
        false => line,
    }
}

fn reminder(found: &Found) -> String {
    format!(
        "<system-reminder>You are repeating yourself: {} {} times in a row. Doing it again \
         will give the same result. Stop and change approach: read the result you already \
         have, try something different, or end your turn and say what blocks you. If you \
         go on repeating it, the run will be stopped.</system-reminder>",
        found.what, found.times
    )
}

#[async_trait]
impl Interceptor for LoopGuard {
    async fn on_run_start(&mut self, run: &RunStart<'_>) {
        self.since = run.history.last().map(|item| item.id);
        self.reminded = None;
        self.stop = None;
    }

    async fn pending_history_appends(&mut self, history: &[Item]) -> Vec<Item> {
        if self.config.repeats == 0 {
            return Vec::new();
        }
        let Some(found) = self.find(history) else {
            self.reminded = None;
            return Vec::new();
        };
        if self.reminded.as_deref() == Some(found.what.as_str()) {
            if found.times >= self.config.repeats.saturating_add(LOOP_GRACE) {
                tracing::warn!(what = %found.what, times = found.times, "loop: stopping the run");
                self.stop = Some(Limit::Loop {
                    what: found.what,
                    times: found.times,
                });
            }
            return Vec::new();
        }
        tracing::info!(what = %found.what, times = found.times, "loop: reminding the model");
        let text = reminder(&found);
        self.reminded = Some(found.what);
        vec![Item::system(SystemKind::Loop, text)]
    }

    async fn pre_llm_request(&mut self, _request: &mut Arc<Vec<Item>>) -> PreRequestAction {
        match self.stop.take() {
            Some(limit) => PreRequestAction::Stop(limit),
            None => PreRequestAction::Continue,
        }
    }
}

#[cfg(test)]
#[path = "loop_guard_tests.rs"]
mod tests;
