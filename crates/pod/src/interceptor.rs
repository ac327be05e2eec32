//! The Pod's interceptor: todo reminders and notifications (both committed
//! through `pending_history_appends`), the approval policy (in
//! `pre_tool_call`), the automatic compaction trigger, and the until-done
//! continuation.

use crate::approval::{ApprovalGate, ApprovalPolicy};
use crate::reminder::{continue_text, reminder_text, ReminderCadence};
use pod_llm::tokens::estimate_item_tokens;
use pod_llm::{Item, ItemKind, SystemKind};
use pod_tools::{TodoStore, TODO_WRITE};
use pod_worker::{
    Interceptor, PostToolAction, PreRequestAction, PreToolAction, PromptAction, ToolCallInfo,
    ToolResultInfo, TurnEndAction,
};
use tokio::sync::mpsc;

/// Automatic compaction stops after this many failures in a row, until the
/// next prompt, so a broken compact model cannot cause a retry storm.
pub const MAX_COMPACTION_FAILURES: u32 = 3;

/// When to ask for a compaction.
#[derive(Debug, Clone, Copy)]
pub struct CompactionTrigger {
    /// The model's context window in tokens: a prompt larger than it (with
    /// the overhead) is refused, since no compaction can make it fit.
    pub window: u64,
    /// Compact when the estimated context exceeds this many tokens.
    pub limit: u64,
    /// Tokens of the system prompt and tool specs, sent with every request.
    pub overhead: u64,
}

/// Steers the Pod's turns.
pub struct PodInterceptor {
    todos: TodoStore,
    cadence: ReminderCadence,
    // Notifications sent while a turn runs or while the Pod is idle wait here
    // until the next request; unbounded because `notify` must not block and
    // each message is small and user-initiated.
    notifications: mpsc::UnboundedReceiver<String>,
    trigger: Option<CompactionTrigger>,
    compaction_requested: bool,
    skip_next_check: bool,
    compaction_failures: u32,
    until_done: bool,
    continuations: u32,
    tools_ran_since_continue: bool,
    approval: ApprovalGate,
}

impl PodInterceptor {
    /// An interceptor reminding every `remind_every` requests.
    pub fn new(
        todos: TodoStore,
        remind_every: u32,
        notifications: mpsc::UnboundedReceiver<String>,
    ) -> Self {
        Self {
            todos,
            cadence: ReminderCadence::new(remind_every),
            notifications,
            trigger: None,
            compaction_requested: false,
            skip_next_check: false,
            compaction_failures: 0,
            until_done: false,
            continuations: 0,
            tools_ran_since_continue: false,
            // Every tool allowed until the Pod installs its policy.
            approval: ApprovalGate::new(
                ApprovalPolicy::all(crate::approval::ToolPolicy::Allow),
                None,
            ),
        }
    }

    /// Applies an approval policy to every tool call.
    pub fn with_approval(mut self, approval: ApprovalGate) -> Self {
        self.approval = approval;
        self
    }

    /// Enables automatic compaction.
    pub fn with_compaction(mut self, trigger: Option<CompactionTrigger>) -> Self {
        self.trigger = trigger;
        self
    }

    /// Enables until-done mode: a turn that ends with unfinished todos is
    /// continued (the worker's budget bounds how often).
    pub fn with_until_done(mut self, until_done: bool) -> Self {
        self.until_done = until_done;
        self
    }

    /// Gives up the notification queue (when the Pod rebuilds its parts), so
    /// notifications not yet delivered are kept.
    pub fn into_notifications(self) -> mpsc::UnboundedReceiver<String> {
        self.notifications
    }

    /// A turn begins. `reminder_unanswered`: the history's last reminder has
    /// no model response after it. `user_prompt`: the turn has a new prompt,
    /// which re-enables automatic compaction after repeated failures.
    pub fn begin_turn(&mut self, reminder_unanswered: bool, user_prompt: bool) {
        self.cadence.begin_turn(reminder_unanswered);
        self.continuations = 0;
        self.tools_ran_since_continue = false;
        if user_prompt {
            self.compaction_failures = 0;
        }
    }

    /// Whether the last turn yielded to ask for a compaction (and clears it).
    pub fn take_compaction_request(&mut self) -> bool {
        std::mem::take(&mut self.compaction_requested)
    }

    /// A compaction succeeded; its carry-over item stands in for a reminder.
    pub fn compaction_succeeded(&mut self) {
        self.compaction_failures = 0;
        self.cadence.reminded_now();
    }

    /// A compaction failed: the next request goes out uncompacted and a later
    /// one tries again. Returns whether automatic compaction is now paused.
    pub fn compaction_failed(&mut self) -> bool {
        self.compaction_failures += 1;
        self.skip_next_check = true;
        self.compaction_failures >= MAX_COMPACTION_FAILURES
    }

    /// There was nothing to compact: the next request goes out as it is,
    /// and it is not counted as a failure.
    pub fn compaction_skipped(&mut self) {
        self.skip_next_check = true;
    }

    fn wants_compaction(&mut self, request: &[Item]) -> bool {
        let Some(trigger) = self.trigger else {
            return false;
        };
        if std::mem::take(&mut self.skip_next_check)
            || self.compaction_failures >= MAX_COMPACTION_FAILURES
        {
            return false;
        }
        context_estimate(request, trigger.overhead) > trigger.limit
    }
}

/// Estimated prompt tokens of a request: the provider's count for the last
/// response that reported one, plus an estimate of everything after it.
pub fn context_estimate(request: &[Item], overhead: u64) -> u64 {
    for (index, item) in request.iter().enumerate().rev() {
        if let ItemKind::Assistant {
            usage: Some(usage), ..
        } = &item.kind
        {
            return usage.prompt_tokens
                + usage.completion_tokens
                + request[index + 1..]
                    .iter()
                    .map(estimate_item_tokens)
                    .sum::<u64>();
        }
    }
    overhead + request.iter().map(estimate_item_tokens).sum::<u64>()
}

#[async_trait::async_trait]
impl Interceptor for PodInterceptor {
    async fn on_prompt_submit(&mut self, prompt: &mut Item) -> PromptAction {
        let Some(trigger) = self.trigger else {
            return PromptAction::Continue;
        };
        let tokens = trigger.overhead + estimate_item_tokens(prompt);
        if tokens > trigger.window {
            return PromptAction::Cancel(format!(
                "the prompt is about {tokens} tokens with the system prompt and tool \
                 descriptions, more than the model's context window of {} tokens",
                trigger.window
            ));
        }
        PromptAction::Continue
    }

    async fn pending_history_appends(&mut self) -> Vec<Item> {
        let mut items = Vec::new();
        while let Ok(text) = self.notifications.try_recv() {
            items.push(Item::system(SystemKind::Notification, text));
        }
        let todos = self.todos.snapshot();
        let unfinished = todos.iter().any(|t| t.status.is_unfinished());
        if self.cadence.before_request(unfinished) {
            items.push(Item::system(SystemKind::Reminder, reminder_text(&todos)));
        }
        items
    }

    async fn pre_llm_request(&mut self, request: &mut Vec<Item>) -> PreRequestAction {
        if self.wants_compaction(request) {
            self.compaction_requested = true;
            return PreRequestAction::Yield;
        }
        PreRequestAction::Continue
    }

    async fn pre_tool_call(&mut self, call: &mut ToolCallInfo) -> PreToolAction {
        self.approval
            .check(&call.call_id, &call.name, &call.arguments)
            .await
    }

    async fn post_tool_call(&mut self, result: &mut ToolResultInfo) -> PostToolAction {
        self.tools_ran_since_continue = true;
        if result.name == TODO_WRITE {
            self.cadence.saw_todo_write();
        }
        PostToolAction::Continue
    }

    async fn on_turn_end(&mut self, _turn: &[Item]) -> TurnEndAction {
        if !self.until_done {
            return TurnEndAction::Finish;
        }
        let todos = self.todos.snapshot();
        // A continuation answered without any tool call made no progress: the
        // model is done or blocked, and asking again would loop.
        let stalled = self.continuations > 0 && !self.tools_ran_since_continue;
        if !todos.iter().any(|t| t.status.is_unfinished()) || stalled {
            return TurnEndAction::Finish;
        }
        self.continuations += 1;
        self.tools_ran_since_continue = false;
        self.cadence.reminded_now();
        TurnEndAction::ContinueWithMessages(vec![Item::system(
            SystemKind::Reminder,
            continue_text(&todos),
        )])
    }
}
