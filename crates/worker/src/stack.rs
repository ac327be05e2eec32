//! Several interceptors as one: the composition rules, hook by hook.
//!
//! A stack is an ordered list; "earlier" means closer to the model's side
//! of each decision. Every hook reaches the interceptors in stack order:
//!
//! | hook | when several answer |
//! |---|---|
//! | `on_run_start` | all are told |
//! | `on_prompt_submit` | each may edit the prompt in turn; the first `Cancel` stops there and the prompt is not committed; items of `ContinueWith` are committed after it, in stack order |
//! | `pending_history_appends` | the items of all, concatenated in stack order |
//! | `pre_llm_request` | each edits the request in turn (a later one sees the earlier edits); the first `Cancel`, `Yield` or `Stop` ends it there |
//! | `on_compaction` | all are told |
//! | `pre_tool_call` | each may edit the call in turn; the first `Skip`, `Abort`, `Pause` or `Park` decides and later ones are not asked |
//! | `post_tool_call` | all see the result in turn (each may edit it, and all keep their books); the first `Abort` wins |
//! | `on_turn_end` | all are asked: any `Pause` pauses; else any `Stall` ends it as stalled; else the messages of every `ContinueWithMessages` continue the turn, in stack order; else it finishes |
//! | `on_abort` | all are told |
//!
//! Order matters where a hook stops early or edits. Take a user interceptor
//! that rewrites `bash` commands (say, to add `set -e`) and an approval
//! interceptor that asks the user. With the rewriter first, the user
//! approves exactly the command that runs. Swapped, the user approves the
//! command the model wrote and a different one runs. That is why a Pod puts
//! embedders' interceptors before its own approval and compaction: whatever
//! they change is what the Pod judges and measures.

use crate::interceptor::{
    AbortReason, CompactionOutcome, Interceptor, PostToolAction, PreRequestAction, PreToolAction,
    PromptAction, RunStart, ToolCallInfo, ToolResultInfo, TurnEndAction,
};
use pod_llm::Item;

/// Interceptors that act as one, in order. See the module docs for how
/// their answers combine.
#[derive(Default)]
pub struct InterceptorStack {
    layers: Vec<Box<dyn Interceptor>>,
}

impl InterceptorStack {
    /// An empty stack (it changes nothing).
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds `interceptor` after the ones already there.
    pub fn push(&mut self, interceptor: impl Interceptor + 'static) -> &mut Self {
        self.layers.push(Box::new(interceptor));
        self
    }

    /// Adds a boxed interceptor after the ones already there.
    pub fn push_boxed(&mut self, interceptor: Box<dyn Interceptor>) -> &mut Self {
        self.layers.push(interceptor);
        self
    }

    /// How many interceptors the stack holds.
    pub fn len(&self) -> usize {
        self.layers.len()
    }

    /// Whether it holds none.
    pub fn is_empty(&self) -> bool {
        self.layers.is_empty()
    }
}

#[async_trait::async_trait]
impl Interceptor for InterceptorStack {
    async fn on_run_start(&mut self, run: &RunStart<'_>) {
        for layer in &mut self.layers {
            layer.on_run_start(run).await;
        }
    }

    async fn on_prompt_submit(&mut self, prompt: &mut Item) -> PromptAction {
        let mut extra = Vec::new();
        for layer in &mut self.layers {
            match layer.on_prompt_submit(prompt).await {
                PromptAction::Continue => {}
                PromptAction::ContinueWith(items) => extra.extend(items),
                cancel @ PromptAction::Cancel(_) => return cancel,
            }
        }
        match extra.is_empty() {
            true => PromptAction::Continue,
            false => PromptAction::ContinueWith(extra),
        }
    }

    async fn pending_history_appends(&mut self, history: &[Item]) -> Vec<Item> {
        let mut items = Vec::new();
        for layer in &mut self.layers {
            items.extend(layer.pending_history_appends(history).await);
        }
        items
    }

    async fn pre_llm_request(
        &mut self,
        request: &mut std::sync::Arc<Vec<Item>>,
    ) -> PreRequestAction {
        for layer in &mut self.layers {
            match layer.pre_llm_request(request).await {
                PreRequestAction::Continue => {}
                stop => return stop,
            }
        }
        PreRequestAction::Continue
    }

    async fn on_compaction(&mut self, outcome: &CompactionOutcome) {
        for layer in &mut self.layers {
            layer.on_compaction(outcome).await;
        }
    }

    async fn pre_tool_call(&mut self, call: &mut ToolCallInfo) -> PreToolAction {
        for layer in &mut self.layers {
            match layer.pre_tool_call(call).await {
                PreToolAction::Continue => {}
                decided => return decided,
            }
        }
        PreToolAction::Continue
    }

    async fn post_tool_call(&mut self, result: &mut ToolResultInfo) -> PostToolAction {
        let mut action = PostToolAction::Continue;
        for layer in &mut self.layers {
            let answer = layer.post_tool_call(result).await;
            if action == PostToolAction::Continue {
                action = answer;
            }
        }
        action
    }

    async fn on_turn_end(&mut self, turn: &[Item]) -> TurnEndAction {
        let (mut pause, mut stall) = (false, false);
        let mut give_up: Option<String> = None;
        let mut messages: Option<Vec<Item>> = None;
        for layer in &mut self.layers {
            match layer.on_turn_end(turn).await {
                TurnEndAction::Finish => {}
                TurnEndAction::Pause => pause = true,
                TurnEndAction::Stall => stall = true,
                TurnEndAction::GiveUp(why) => {
                    give_up.get_or_insert(why);
                }
                TurnEndAction::ContinueWithMessages(items) => {
                    messages.get_or_insert_with(Vec::new).extend(items)
                }
            }
        }
        // A pause wins (it keeps everything to go on with); then a layer
        // that gave up on the goal, then a stall, then continuing.
        match (pause, give_up, stall, messages) {
            (true, ..) => TurnEndAction::Pause,
            (false, Some(why), ..) => TurnEndAction::GiveUp(why),
            (false, None, true, _) => TurnEndAction::Stall,
            (false, None, false, Some(items)) => TurnEndAction::ContinueWithMessages(items),
            (false, None, false, None) => TurnEndAction::Finish,
        }
    }

    async fn on_abort(&mut self, reason: &AbortReason) {
        for layer in &mut self.layers {
            layer.on_abort(reason).await;
        }
    }
}
