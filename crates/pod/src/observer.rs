//! The Pod's turn observer: every committed item goes to the log before the
//! turn moves on, then out to front ends as events.

use crate::config::Durability;
use crate::events::{EventBus, PodEvent};
use crate::interceptors::{CostBudget, PendingReservation};
use crate::log::LogRecord;
use crate::store::LogWriter;
use pod_llm::{Item, ItemKind, SystemKind};
use pod_tools::{TodoStore, TODO_WRITE};
use pod_worker::{PersistError, PersistKind, TurnObserver, WorkerEvent};
use uuid::Uuid;

/// Persists and announces a turn's items.
pub struct PodObserver {
    log: LogWriter,
    events: EventBus,
    // Read when a `todo_write` call finishes: its committed result has
    // already changed the list.
    todos: TodoStore,
    durability: Durability,
    // The session and epoch of the lease the store fenced this Pod off
    // from, when an append found it taken over.
    fenced: Option<(Uuid, i64)>,
    // The run's money limit: each answer is charged as it commits.
    cost: Option<CostBudget>,
    // The shared limits' reservation of the request in flight, settled
    // when its answer commits.
    pending: Option<PendingReservation>,
    // What a cancel cut while the model's answer streamed, for the Pod to
    // record with the run's end.
    cut: Option<Cut>,
}

/// What a cancel cut short: the partial answer committed, and the calls
/// that were streaming (not made).
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Cut {
    pub partial_answer: Option<Uuid>,
    pub calls_not_made: Vec<String>,
}

impl PodObserver {
    /// An observer writing to `log` and announcing on `events`.
    pub fn new(log: LogWriter, events: EventBus, todos: TodoStore, durability: Durability) -> Self {
        Self {
            log,
            events,
            todos,
            durability,
            fenced: None,
            cost: None,
            pending: None,
            cut: None,
        }
    }

    /// What the last run's cancel cut, if it cut anything (taken).
    pub(crate) fn take_cut(&mut self) -> Option<Cut> {
        self.cut.take()
    }

    /// The same observer, charging every committed answer to `budget`'s
    /// meter (at its prices) the moment it commits, so that a subagent
    /// started by that answer already sees it spent.
    pub fn charging(mut self, budget: Option<CostBudget>) -> Self {
        self.cost = budget;
        self
    }

    /// The same observer, settling the shared limits' reservation of each
    /// request with its answer's usage the moment the answer commits.
    pub fn settling(mut self, pending: Option<PendingReservation>) -> Self {
        self.pending = pending;
        self
    }

    /// The lease this Pod lost, if an append found the session taken over.
    pub fn fenced(&self) -> Option<(Uuid, i64)> {
        self.fenced
    }

    fn emit(&self, event: PodEvent) {
        // No subscriber is fine: events are for display only.
        self.events.send(event);
    }
}

#[async_trait::async_trait]
impl TurnObserver for PodObserver {
    async fn on_history_append(&mut self, item: &Item) -> Result<(), PersistError> {
        let sync = match self.durability {
            Durability::Always => true,
            Durability::Turn => matches!(item.kind, ItemKind::ToolResult { .. }),
            Durability::Never => false,
        };
        if let Err(err) = self.log.append(&LogRecord::Item(item.clone()), sync).await {
            let kind = match err {
                crate::PodError::LeaseLost { id, epoch } => {
                    self.fenced = Some((id, epoch));
                    PersistKind::Fenced
                }
                _ => PersistKind::Failed,
            };
            return Err(PersistError::new(kind, err));
        }
        if let (
            Some(budget),
            ItemKind::Assistant {
                usage: Some(usage), ..
            },
        ) = (&self.cost, &item.kind)
        {
            budget.charge(budget.prices.charge(usage));
        }
        if let (Some(pending), ItemKind::Assistant { usage, .. }) = (&self.pending, &item.kind) {
            pending.settle(usage.as_ref()).await;
        }
        if let ItemKind::System { kind, text } = &item.kind {
            match kind {
                SystemKind::Reminder | SystemKind::Verification | SystemKind::Loop => {
                    self.emit(PodEvent::ReminderInjected { text: text.clone() })
                }
                SystemKind::Notification => {
                    self.emit(PodEvent::NotificationDelivered { text: text.clone() })
                }
                _ => {}
            }
        }
        Ok(())
    }

    fn on_event(&mut self, event: WorkerEvent) {
        let event = match event {
            WorkerEvent::TextDelta(text) => PodEvent::TextDelta { text },
            WorkerEvent::ReasoningDelta(text) => PodEvent::ReasoningDelta { text },
            WorkerEvent::ToolCallStarted(call) => PodEvent::ToolCallStarted {
                call_id: call.id,
                name: call.name,
                arguments: call.arguments,
            },
            WorkerEvent::ToolCallFinished {
                call,
                content,
                is_error,
            } => PodEvent::ToolCallFinished {
                call_id: call.id,
                name: call.name,
                content,
                is_error,
            },
            WorkerEvent::RequestRetried { attempt, error } => {
                PodEvent::RequestRetried { attempt, error }
            }
            WorkerEvent::AnswerCut {
                partial_answer,
                calls_not_made,
            } => {
                self.cut = Some(Cut {
                    partial_answer,
                    calls_not_made,
                });
                return;
            }
            WorkerEvent::Usage(usage) => PodEvent::Usage { usage },
            WorkerEvent::CallStreaming { name } => PodEvent::ToolCallStreaming { name },
            WorkerEvent::RequestStarted { .. } => return,
        };
        // A plan change is announced right after its call's end, so front
        // ends see the call finish first.
        let plan_changed = matches!(
            &event,
            PodEvent::ToolCallFinished { name, is_error: false, .. } if name == TODO_WRITE
        );
        self.emit(event);
        if plan_changed {
            self.emit(PodEvent::TodosChanged {
                todos: self.todos.snapshot(),
            });
        }
    }
}
