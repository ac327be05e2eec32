//! The Pod's interceptor stack, assembled in its order (see
//! [`crate::interceptors`]).

use crate::checkpoints::Checkpoints;
use crate::config::PodConfig;
use crate::gate::ParkedOn;
use crate::hooks::HookInterceptor;
use crate::interceptors::{
    Approval, AutoCompact, CompactionTrigger, CostGuard, Followups, LoopGuard, NotificationQueue,
    Notifications, PendingReservation, Reminders, SessionBudgetGuard, SharedLimitGuard, Spent,
    UntilDone,
};
use pod_tools::TodoStore;
use pod_worker::InterceptorStack;
use std::sync::Arc;

/// What decides whether a tool call runs: the operator's hooks, then the
/// approval policy.
pub(crate) struct Gatekeepers {
    pub hooks: Option<HookInterceptor>,
    pub approval: Approval,
    // After approval: a follow-up the policy refuses never parks.
    pub followups: Option<Followups>,
    // After them: a call that does not run gets no checkpoint.
    pub checkpoints: Option<Checkpoints>,
}

/// The guard of the profile's shared limits and the slot its observer
/// settles through, when the profile has limits; in the store's windows,
/// or this process's for a store that keeps none.
pub(crate) fn shared_limits(
    config: &PodConfig,
    parked: &ParkedOn,
    root: bool,
) -> Option<(SharedLimitGuard, PendingReservation)> {
    let limits = config
        .shared_limits
        .as_ref()
        .filter(|l| !l.caps.is_empty())?;
    let backend = limits
        .backend
        .clone()
        .or_else(|| config.store().shared_limits())
        .unwrap_or_else(crate::shared_limits::in_process);
    let pending = PendingReservation::new(Arc::clone(&backend), limits.prices);
    let guard = SharedLimitGuard::new(
        limits.clone(),
        backend,
        pending.clone(),
        root.then(|| parked.clone()),
    );
    Some((guard, pending))
}

/// The Pod's interceptors in their order (see [`crate::interceptors`]).
pub(crate) fn stack(
    config: &PodConfig,
    store: &TodoStore,
    notifications: &NotificationQueue,
    trigger: Option<CompactionTrigger>,
    (spent, created_at): (Spent, chrono::DateTime<chrono::Utc>),
    (gatekeepers, limits): (Gatekeepers, Option<SharedLimitGuard>),
    root: bool,
) -> InterceptorStack {
    let mut stack = InterceptorStack::new();
    for make in &config.interceptors {
        stack.push_boxed(make());
    }
    if config.session_budget.is_set() {
        stack.push(SessionBudgetGuard::new(config.session_budget, spent).created_at(created_at));
    }
    if let Some(budget) = &config.cost_budget {
        stack.push(CostGuard::new(budget.clone(), root));
    }
    if let Some(guard) = limits {
        stack.push(guard);
    }
    if config.loop_guard.repeats > 0 {
        stack.push(LoopGuard::new(config.loop_guard.clone()));
    }
    stack
        .push(Notifications::new(notifications.clone()))
        .push(Reminders::new(store.clone(), config.remind_every));
    if let Some(hooks) = gatekeepers.hooks {
        stack.push(hooks);
    }
    stack.push(gatekeepers.approval);
    if let Some(followups) = gatekeepers.followups {
        stack.push(followups);
    }
    if let Some(checkpoints) = gatekeepers.checkpoints {
        stack.push(checkpoints);
    }
    if let Some(trigger) = trigger {
        stack.push(AutoCompact::new(trigger));
    }
    if config.until_done {
        stack.push(UntilDone::new(store.clone()));
    }
    stack
}

/// The model's context window, if known.
pub(crate) fn context_window(config: &PodConfig) -> Option<u64> {
    config
        .compaction
        .context_window
        .or_else(|| config.provider.context_window())
}
