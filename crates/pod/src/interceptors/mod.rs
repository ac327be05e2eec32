//! The Pod's behaviours, one interceptor each, and the order of the stack
//! a Pod runs ([`pod_worker::InterceptorStack`] says how answers combine).
//!
//! The stack, first to last:
//!
//! 1. **Embedders' interceptors** ([`PodConfig::interceptors`](crate::PodConfig::interceptors)),
//!    in the order given.
//! 2. [`SessionBudgetGuard`]: ends a run before a request once the session
//!    budget (requests, tokens, wall time) is spent (only when one is set);
//!    [`CostGuard`] once the session, or the run, with its subagents spent
//!    its money limit (only when one is set); [`SharedLimitGuard`] once
//!    the profile's shared limits (`[limits]`) have no room for the
//!    request, which it reserves (only when the profile has some).
//! 3. [`LoopGuard`]: reminds a model that repeats itself, then ends the run
//!    (unless `loop_guard.repeats` is 0).
//! 4. [`Notifications`]: delivers `notify` messages before the next request.
//! 5. [`Reminders`]: reminds the model of its unfinished plan.
//! 6. [`Approval`]: the approval policy, in `pre_tool_call`; then
//!    [`Followups`] parks a `schedule_followup` call until it is due (only
//!    with the tool; after approval, so a refused call never parks).
//! 7. [`AutoCompact`]: yields for a compaction when the request would pass
//!    the threshold; refuses a prompt larger than the context window.
//! 8. [`UntilDone`]: continues a turn that ends with unfinished todos.
//!
//! Embedders go first so that what they change is what the Pod judges and
//! measures: approval sees the arguments that will run (a rewriter placed
//! after it would run a command the user never approved), compaction
//! measures the request that will be sent (an interceptor that adds context
//! after it could push a request past the window). The budget guard comes
//! before compaction, so a spent budget ends the run instead of paying for
//! a summary. The loop guard comes after the budget guards (a spent budget
//! names the budget, not the loop) and before the reminders: swapped with
//! [`Reminders`], a plan reminder appended in the same step would be the
//! newest item and the loop reminder read as an afterthought. Notifications come before reminders, so the model reads what
//! the user sent before the runtime's reminder.

mod approval;
mod budget_guard;
mod compaction;
mod cost_guard;
mod followups;
mod loop_guard;
mod notifications;
mod reminders;
mod shared_limit_guard;
mod until_done;

pub use approval::Approval;
pub use budget_guard::{SessionBudget, SessionBudgetGuard, Spent};
pub use compaction::{context_estimate, AutoCompact, CompactionTrigger, MAX_COMPACTION_FAILURES};
pub use cost_guard::{CostBudget, CostGuard, CostMeter};
pub use followups::Followups;
pub use loop_guard::{LoopGuard, LoopGuardConfig, DEFAULT_LOOP_REPEATS, LOOP_GRACE};
pub use notifications::{NotificationQueue, Notifications};
pub use reminders::{answered_since_plan, last_reminder_unanswered, Reminders};
pub use shared_limit_guard::{PendingReservation, SharedLimitGuard};
pub use until_done::UntilDone;
