//! Session state a tool keeps, changed only by its committed calls.
//!
//! A stateful tool (a plan, a read-before-edit tracker, an embedder's
//! counter) never writes its state while it runs. It puts what changed into
//! its result (the text, or [`ToolOutput::meta`](crate::ToolOutput)) and
//! declares a [`ToolState`] through [`Tool::state`](crate::Tool::state);
//! the state applies the call once its result is committed. The worker does
//! that right after the [`TurnObserver`](crate::TurnObserver) saved the
//! result, and whoever owns the log does the same over every logged call to
//! rebuild the state on resume. One code path, one writer: the state never
//! runs ahead of what was saved, and replay gives back exactly what the live
//! session had.

use pod_llm::{Item, ItemKind};
use std::collections::HashMap;
use std::sync::Arc;

/// One committed call of a stateful tool: its arguments and its result.
#[derive(Debug, Clone, Copy)]
pub struct CommittedCall<'a> {
    /// The call id.
    pub call_id: &'a str,
    /// The tool's name.
    pub name: &'a str,
    /// The arguments the model sent, as JSON text.
    pub arguments: &'a str,
    /// The result text the model read.
    pub content: &'a str,
    /// Whether the result is an error (a refused, skipped, interrupted or
    /// failed call: usually nothing changed).
    pub is_error: bool,
    /// The replay data the tool attached to its result.
    pub meta: Option<&'a serde_json::Value>,
}

/// State rebuilt from a tool's own committed calls.
///
/// Implementations use interior mutability (the state is shared with the
/// tool, which reads it while it runs). `apply` must be deterministic in its
/// input: replay calls it with the very calls the live session committed.
pub trait ToolState: Send + Sync {
    /// Applies one committed call, in commit order.
    fn apply(&self, call: &CommittedCall<'_>);

    /// The model's context was replaced by a summary (a compaction): results
    /// before this point are out of its view. Most state does not care.
    fn compacted(&self) {}

    /// Forgets everything; a replay from the first record follows.
    fn clear(&self);
}

/// The stateful tools of a registry, fed with committed items.
///
/// It pairs each call with its result (calls of other tools are ignored) and
/// hands the pair to the tool's [`ToolState`]. The worker owns one for the
/// live turn; replay builds one over the same tools.
#[derive(Clone, Default)]
pub struct ToolStates {
    // A few entries (the todo list, the file tools): a scan is cheaper than
    // hashing the name of every call a resume replays.
    by_tool: Vec<(String, Arc<dyn ToolState>)>,
    // Each state once, even when several tools share it.
    unique: Vec<Arc<dyn ToolState>>,
    // Calls of stateful tools whose result has not been committed yet:
    // id → (tool name, arguments).
    open: HashMap<String, (String, String)>,
}

impl std::fmt::Debug for ToolStates {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ToolStates")
            .field(
                "tools",
                &self
                    .by_tool
                    .iter()
                    .map(|(name, _)| name)
                    .collect::<Vec<_>>(),
            )
            .field("open", &self.open.len())
            .finish()
    }
}

impl ToolStates {
    /// No stateful tool.
    pub fn new() -> Self {
        Self::default()
    }

    /// Feeds `name`'s committed calls to `state`.
    pub fn insert(&mut self, name: &str, state: Arc<dyn ToolState>) -> &mut Self {
        if !self.unique.iter().any(|s| same(s, &state)) {
            self.unique.push(state.clone());
        }
        match self.by_tool.iter_mut().find(|(tool, _)| tool == name) {
            Some((_, kept)) => *kept = state,
            None => self.by_tool.push((name.to_string(), state)),
        }
        self
    }

    /// Whether no tool keeps state.
    pub fn is_empty(&self) -> bool {
        self.by_tool.is_empty()
    }

    /// Observes one committed item: remembers the stateful tools' calls of
    /// an assistant item and applies each one when its result comes.
    pub fn observe(&mut self, item: &Item) {
        if self.by_tool.is_empty() {
            return;
        }
        match &item.kind {
            ItemKind::Assistant { tool_calls, .. } => {
                for call in tool_calls {
                    if self.state_of(&call.name).is_some() {
                        self.open
                            .insert(call.id.clone(), (call.name.clone(), call.arguments.clone()));
                    }
                }
            }
            ItemKind::ToolResult {
                call_id,
                content,
                is_error,
                meta,
            } => {
                // Most results are of stateless tools: nothing to look up.
                if self.open.is_empty() {
                    return;
                }
                let Some((name, arguments)) = self.open.remove(call_id) else {
                    return;
                };
                if let Some(state) = self.state_of(&name) {
                    // Kept as text in the item; a state reads a value.
                    let meta = meta.as_ref().map(pod_llm::Meta::to_value);
                    state.apply(&CommittedCall {
                        call_id,
                        name: &name,
                        arguments: &arguments,
                        content,
                        is_error: *is_error,
                        meta: meta.as_ref(),
                    });
                }
            }
            _ => {}
        }
    }

    /// The state of tool `name`, if it keeps one.
    fn state_of(&self, name: &str) -> Option<&Arc<dyn ToolState>> {
        self.by_tool
            .iter()
            .find(|(tool, _)| tool == name)
            .map(|(_, state)| state)
    }

    /// Tells every state the context was compacted. No call spans a
    /// compaction, so open calls are dropped.
    pub fn compacted(&mut self) {
        self.open.clear();
        for state in &self.unique {
            state.compacted();
        }
    }

    /// Clears every state before a replay.
    pub fn clear(&mut self) {
        self.open.clear();
        for state in &self.unique {
            state.clear();
        }
    }
}

fn same(a: &Arc<dyn ToolState>, b: &Arc<dyn ToolState>) -> bool {
    std::ptr::addr_eq(Arc::as_ptr(a), Arc::as_ptr(b))
}
