//! Compaction: when the context fills, a compact worker summarises the old
//! part of the history; the summary, a verbatim recent tail and the
//! carry-over items (the unfinished plan, the files to re-read) become the
//! new context.

mod prompt;
mod split;

pub use prompt::{compact_input, COMPACT_SYSTEM_PROMPT};
pub use split::tail_start;

use crate::log::{CompactionRecord, LogRecord};
use crate::store::LogWriter;
use pod_llm::tokens::estimate_item_tokens;
use pod_llm::{Item, ItemKind, Provider, SystemKind};
use pod_tools::{render_todos, FileTracker, TodoItem, TodoStore};
use pod_worker::{
    Budget, NoopInterceptor, NullObserver, ToolRegistry, TurnEndReason, Worker, WorkerConfig,
};
use serde::{Deserialize, Serialize};
use std::sync::Arc;
use tokio_util::sync::CancellationToken;

/// Settings of compaction.
#[derive(Debug, Clone, PartialEq)]
pub struct CompactionConfig {
    /// Compact before a request once the context would exceed this fraction
    /// of the context window.
    pub threshold: f64,
    /// The model's context window in tokens; when `None`, the provider's.
    /// Without either, compaction only runs when asked for.
    pub context_window: Option<u64>,
    /// Token budget of the recent tail kept verbatim (at most half the
    /// history, so there is always something to summarise).
    pub tail_tokens: u64,
    /// Token budget of the compact worker's input; when `None`, 70% of the
    /// compact provider's window, else of `context_window`, else 100k.
    pub input_budget: Option<u64>,
}

impl Default for CompactionConfig {
    fn default() -> Self {
        Self {
            threshold: 0.8,
            context_window: None,
            tail_tokens: 4_000,
            input_budget: None,
        }
    }
}

/// What a compaction did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct CompactionReport {
    /// Estimated tokens of the history before.
    pub tokens_before: u64,
    /// Estimated tokens of the new context.
    pub tokens_after: u64,
    /// Length of the summary in characters.
    pub summary_chars: usize,
}

pub use crate::error::CompactionError;

/// What a compaction works with.
pub(crate) struct Compactor<'a> {
    pub provider: Arc<dyn Provider>,
    pub config: &'a CompactionConfig,
    pub todos: &'a TodoStore,
    /// The workspace tools' tracker, when they are registered.
    pub files: Option<&'a FileTracker>,
    pub log: &'a LogWriter,
    /// Told when a summary is being written (not when there is nothing to
    /// compact, so no "compacting" line is left without an ending).
    pub events: &'a crate::events::EventBus,
    /// The session's money meters, charged with the summary's cost.
    pub cost: Option<&'a crate::interceptors::CostBudget>,
}

impl Compactor<'_> {
    /// Compacts `worker`'s history. The boundary is durable in the log before
    /// the worker's history is replaced; on any error nothing changes.
    pub async fn run(
        &self,
        worker: &mut Worker,
        cancel: &CancellationToken,
    ) -> Result<CompactionReport, CompactionError> {
        let history = worker.history();
        let tokens_before: u64 = history.iter().map(estimate_item_tokens).sum();
        let start = tail_start(history, self.config.tail_tokens.min(tokens_before / 2));
        if start == 0 {
            return Err(CompactionError::NothingToCompact);
        }
        // No subscriber is fine: events are for display only.
        self.events.send(crate::events::PodEvent::CompactionStarted);
        let snapshot = self.todos.snapshot();
        let input = compact_input(&history[..start], &snapshot, self.input_budget());
        let (summary, usage) = self.summarise(input, cancel).await?;

        let summary_item = Item::system(
            SystemKind::Summary,
            format!(
                "<summary>\nThe earlier part of this session was compacted into this summary.\n\n{summary}\n</summary>"
            ),
        );
        let tail: Vec<Item> = history[start..].iter().map(without_usage).collect();
        // Every file the model knew is out of view once the summary replaces
        // the reads: it must read them again before editing.
        let reread = self.files.map(FileTracker::known).unwrap_or_default();
        let carry_over = carry_over_items(&snapshot, &reread);
        let tokens_after: u64 = std::iter::once(&summary_item)
            .chain(&tail)
            .chain(&carry_over)
            .map(estimate_item_tokens)
            .sum();

        let record = CompactionRecord {
            summary: summary_item,
            tail,
            carry_over,
            todos: snapshot,
            tokens_before,
            tokens_after,
            // A provider that reports nothing leaves nothing to count.
            usage: (usage != pod_llm::Usage::default()).then_some(usage),
        };
        let record = LogRecord::Compaction(record);
        self.log
            .append(&record, true)
            .await
            .map_err(|err| CompactionError::Log(Box::new(err)))?;
        // Charged once it is recorded, as an answer is once it commits.
        if let Some(cost) = self.cost {
            cost.charge(cost.prices.charge(&usage));
        }
        // The tools' state learns of it (the file tracker marks every file
        // "read required"), as replay does at this boundary.
        worker.tool_states().compacted();
        // The boundary is durable: the worker now runs on its context.
        if let LogRecord::Compaction(record) = record {
            worker.set_history(record.into_context());
        }
        Ok(CompactionReport {
            tokens_before,
            tokens_after,
            summary_chars: summary.chars().count(),
        })
    }

    async fn summarise(
        &self,
        input: String,
        cancel: &CancellationToken,
    ) -> Result<(String, pod_llm::Usage), CompactionError> {
        // A separate worker with no tools: it cannot touch the plan.
        let config = WorkerConfig {
            system_prompt: COMPACT_SYSTEM_PROMPT.into(),
            budget: Budget {
                requests_per_turn: 1,
                ..Budget::default()
            },
            ..WorkerConfig::default()
        };
        let mut worker = Worker::new(self.provider.clone(), ToolRegistry::new(), config);
        let outcome = worker
            .run_turn(
                Some(Item::user(input)),
                &mut NoopInterceptor,
                &mut NullObserver,
                cancel,
            )
            .await?;
        if outcome.reason != TurnEndReason::EndTurn && outcome.reason != TurnEndReason::MaxTokens {
            return Err(CompactionError::Interrupted(outcome.reason));
        }
        let summary = worker
            .history()
            .iter()
            .rev()
            .find_map(|item| match &item.kind {
                ItemKind::Assistant { text, .. } => Some(text.trim().to_string()),
                _ => None,
            })
            .unwrap_or_default();
        if summary.is_empty() {
            return Err(CompactionError::EmptySummary);
        }
        Ok((summary, outcome.usage))
    }

    fn input_budget(&self) -> u64 {
        self.config.input_budget.unwrap_or_else(|| {
            let window = self
                .provider
                .context_window()
                .or(self.config.context_window)
                .unwrap_or(100_000);
            window * 7 / 10
        })
    }
}

/// The carry-over lane: items placed after the kept tail so the new context
/// ends on the current state: the unfinished plan, and the files that must
/// be read again before they are edited.
pub fn carry_over_items(todos: &[TodoItem], reread: &[String]) -> Vec<Item> {
    let mut items = Vec::new();
    if pod_tools::has_unfinished(todos) {
        items.push(Item::system(
            SystemKind::CarryOver,
            format!(
                "<system-reminder>\nYour todo list, carried over from before the compaction. \
                 It is still current: continue with the unfinished items and keep it updated \
                 with todo_write.\n\n{}\n</system-reminder>",
                render_todos(todos)
            ),
        ));
    }
    if !reread.is_empty() {
        items.push(Item::system(SystemKind::CarryOver, reread_text(reread)));
    }
    items
}

/// The carry-over text listing files to read again.
pub fn reread_text(files: &[String]) -> String {
    // A session can touch thousands of files; the list only needs to name
    // enough for the model to see the rule applies.
    const MAX_LISTED: usize = 50;
    let mut text = String::from(
        "<system-reminder>\nThe context was compacted, so the content of files you read before \
         is no longer in view. Read these files again with read_file before you edit or \
         overwrite them (edit_file and write_file will refuse until you do):\n",
    );
    for file in files.iter().take(MAX_LISTED) {
        text.push_str("- ");
        text.push_str(file);
        text.push('\n');
    }
    if files.len() > MAX_LISTED {
        text.push_str(&format!("- … and {} more\n", files.len() - MAX_LISTED));
    }
    text.push_str("</system-reminder>");
    text
}

/// A copy of a tail item without its token usage: that usage measured the
/// old, larger context and must not drive the next compaction decision.
fn without_usage(item: &Item) -> Item {
    let mut item = item.clone();
    if let ItemKind::Assistant { usage, .. } = &mut item.kind {
        *usage = None;
    }
    item
}
