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

    /// Whether the state is what the last call it [`accepts`](Self::accepts)
    /// made it, whatever came before (a plan each accepted call replaces
    /// whole), a call whose result is an error changing nothing. A replay
    /// then applies only that call instead of every one: validating each
    /// `todo_write` of a long log was a sixth of a resume's instructions.
    fn latest_wins(&self) -> bool {
        false
    }

    /// Whether `call` (not an error) would set the state; asked only of a
    /// state that [`latest_wins`](Self::latest_wins), newest call first.
    fn accepts(&self, _call: &CommittedCall<'_>) -> bool {
        true
    }
}

/// A committed call a replay holds back for a state whose latest accepted
/// call wins.
#[derive(Clone)]
struct Deferred {
    state: Arc<dyn ToolState>,
    call_id: String,
    name: String,
    arguments: String,
    content: String,
    meta: Option<serde_json::Value>,
}

impl Deferred {
    fn call(&self) -> CommittedCall<'_> {
        CommittedCall {
            call_id: &self.call_id,
            name: &self.name,
            arguments: &self.arguments,
            content: &self.content,
            is_error: false,
            meta: self.meta.as_ref(),
        }
    }
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
    // During a replay ([`ToolStates::defer_latest`]): the calls of the
    // states whose latest accepted call wins, oldest first.
    deferred: Option<Vec<Deferred>>,
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
                if let Some(state) = self.state_of(&name).cloned() {
                    // Kept as text in the item; a state reads a value.
                    let meta = meta.as_ref().map(pod_llm::Meta::to_value);
                    if let Some(deferred) = self.deferred.as_mut().filter(|_| state.latest_wins()) {
                        if !*is_error {
                            deferred.push(Deferred {
                                state,
                                call_id: call_id.clone(),
                                name,
                                arguments,
                                content: content.clone(),
                                meta,
                            });
                        }
                        return;
                    }
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

    /// From now until [`finish_replay`](Self::finish_replay), holds back the
    /// calls of states whose latest accepted call wins: a replay applies
    /// only that one.
    pub fn defer_latest(&mut self) {
        self.deferred = Some(Vec::new());
    }

    /// Applies, to each state whose latest accepted call wins, the newest
    /// call it accepts among those held back, and goes back to applying
    /// every call as it comes.
    pub fn finish_replay(&mut self) {
        let Some(deferred) = self.deferred.take() else {
            return;
        };
        for state in self.unique.iter().filter(|s| s.latest_wins()) {
            let newest = deferred
                .iter()
                .rev()
                .filter(|d| same(&d.state, state))
                .find(|d| state.accepts(&d.call()));
            if let Some(winner) = newest {
                state.apply(&winner.call());
            }
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

#[cfg(test)]
mod tests {
    use super::*;
    use parking_lot::Mutex;

    /// A plan that each accepted call replaces, counting what it was asked.
    #[derive(Default)]
    struct Plan {
        value: Mutex<String>,
        applied: Mutex<usize>,
        asked: Mutex<usize>,
    }

    impl ToolState for Plan {
        fn apply(&self, call: &CommittedCall<'_>) {
            *self.applied.lock() += 1;
            if !call.is_error && call.arguments != "bad" {
                *self.value.lock() = call.arguments.to_string();
            }
        }
        fn clear(&self) {
            self.value.lock().clear();
        }
        fn latest_wins(&self) -> bool {
            true
        }
        fn accepts(&self, call: &CommittedCall<'_>) -> bool {
            *self.asked.lock() += 1;
            call.arguments != "bad"
        }
    }

    fn call(id: &str, arguments: &str) -> Item {
        Item::new(ItemKind::Assistant {
            text: String::new(),
            reasoning: None,
            tool_calls: vec![pod_llm::ToolCall {
                id: id.into(),
                name: "plan".into(),
                arguments: arguments.into(),
            }],
            usage: None,
        })
    }

    fn feed(states: &mut ToolStates, calls: &[(&str, &str, bool)]) {
        for (id, arguments, is_error) in calls {
            states.observe(&call(id, arguments));
            states.observe(&Item::tool_result(*id, "ok", *is_error));
        }
    }

    #[test]
    fn a_replay_applies_only_the_newest_accepted_call_of_a_latest_wins_state() {
        let calls = [
            ("1", "first", false),
            ("2", "second", false),
            ("3", "bad", false),
            ("4", "errored", true),
        ];
        let live = Arc::new(Plan::default());
        let mut states = ToolStates::new();
        states.insert("plan", live.clone());
        feed(&mut states, &calls);
        assert_eq!(*live.value.lock(), "second");
        assert_eq!(*live.applied.lock(), 4, "live: every call");

        let replayed = Arc::new(Plan::default());
        let mut states = ToolStates::new();
        states.insert("plan", replayed.clone());
        states.defer_latest();
        feed(&mut states, &calls);
        assert_eq!(*replayed.applied.lock(), 0, "held back until the end");
        states.finish_replay();
        assert_eq!(*replayed.value.lock(), "second", "the same as live");
        assert_eq!(*replayed.applied.lock(), 1, "only the winner applied");
        assert_eq!(*replayed.asked.lock(), 2, "newest first, errors not asked");
        // Afterwards every call applies again, as it comes.
        feed(&mut states, &[("5", "third", false)]);
        assert_eq!(*replayed.value.lock(), "third");
    }
}
