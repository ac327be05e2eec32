//! A scripted Pod in a temporary `POD_HOME`, and what tests drive it with.

use crate::tools::{Echo, WaitForCancel};
use parking_lot::Mutex;
use pod::{
    ApprovalDecision, ApprovalRequest, Approver, CancellationToken, Durability, Pod, PodConfig,
    PodEvent, PodHandle, PodHome,
};
use pod_llm::{ScriptStep, ScriptedProvider};
use pod_worker::ToolRegistry;
use serde_json::{json, Value};
use std::collections::VecDeque;
use std::sync::Arc;
use tempfile::TempDir;
use tokio::sync::broadcast;
use uuid::Uuid;

/// A Pod home in a temp dir plus the scripted model it runs on, with the
/// `echo` and `wait_for_cancel` tools.
pub struct TestPod {
    /// Holds `home/` (the `POD_HOME`) and serves as the workspace.
    pub dir: TempDir,
    /// The model.
    pub model: ScriptedProvider,
    /// The log's durability.
    pub durability: Durability,
    /// Reminder cadence.
    pub remind_every: u32,
    /// Event channel capacity.
    pub event_capacity: usize,
    /// Off by default: most suites test the Pod itself, and the workspace
    /// tools' specs would change their request sizes.
    pub workspace_tools: bool,
    /// The session store; the file store under `home()` when `None`.
    pub store: Option<pod::Store>,
    /// The loop guard's settings. Off by default: suites that test the
    /// Pod's other behaviours script the same `echo` call many times in a
    /// row, which is exactly what the guard stops.
    pub loop_guard: pod::LoopGuardConfig,
}

impl TestPod {
    /// A Pod that will answer with `steps`.
    pub fn new(steps: Vec<ScriptStep>) -> Self {
        Self {
            dir: tempfile::tempdir().expect("temp dir"),
            model: ScriptedProvider::from_steps(steps),
            durability: Durability::Turn,
            remind_every: 5,
            event_capacity: 256,
            workspace_tools: false,
            store: None,
            loop_guard: pod::LoopGuardConfig {
                repeats: 0,
                exempt: Vec::new(),
            },
        }
    }

    /// The Pod home.
    pub fn home(&self) -> PodHome {
        PodHome::new(self.dir.path().join("home"))
    }

    /// The configuration `spawn` and `resume` use.
    pub fn config(&self) -> PodConfig {
        let mut config = PodConfig::new(self.home(), self.dir.path(), Arc::new(self.model.clone()));
        let mut tools = ToolRegistry::new();
        tools.register(Echo::default()).register(WaitForCancel);
        config.tools = tools;
        config.durability = self.durability;
        config.remind_every = self.remind_every;
        config.event_capacity = self.event_capacity;
        config.workspace_tools = self.workspace_tools;
        config.store = self.store.clone();
        config.loop_guard = self.loop_guard.clone();
        config
    }

    /// Starts a new session.
    pub async fn spawn(&self) -> PodHandle {
        Pod::spawn(self.config()).await.expect("spawn pod")
    }

    /// Resumes session `id`.
    pub async fn resume(&self, id: Uuid) -> PodHandle {
        Pod::resume(id, self.config()).await.expect("resume pod")
    }
}

/// A `todo_write` call step for `(id, content, status)` triples.
pub fn todo_step(items: &[(&str, &str, &str)]) -> ScriptStep {
    ScriptStep::tool_call("todo_write", todo_args(items))
}

/// `{"todos": [...]}` for `(id, content, status)` triples.
pub fn todo_args(items: &[(&str, &str, &str)]) -> Value {
    json!({"todos": items.iter().map(|(id, content, status)| json!({
        "id": id, "content": content, "status": status
    })).collect::<Vec<_>>()})
}

/// Waits for the first event matching `pred`.
pub async fn wait_for_event(
    events: &mut broadcast::Receiver<PodEvent>,
    pred: impl Fn(&PodEvent) -> bool,
) -> PodEvent {
    loop {
        match events.recv().await {
            Ok(event) if pred(&event) => return event,
            Ok(_) | Err(broadcast::error::RecvError::Lagged(_)) => {}
            Err(broadcast::error::RecvError::Closed) => panic!("pod closed before the event"),
        }
    }
}

/// An approver answering from a queue of decisions (then `Cancelled`), and
/// recording every request it saw.
#[derive(Default)]
pub struct ScriptedApprover {
    decisions: Mutex<VecDeque<ApprovalDecision>>,
    /// Every request seen, in order.
    pub requests: Mutex<Vec<ApprovalRequest>>,
}

impl ScriptedApprover {
    /// An approver giving these decisions in turn.
    pub fn new(decisions: impl IntoIterator<Item = ApprovalDecision>) -> Arc<Self> {
        Arc::new(Self {
            decisions: Mutex::new(decisions.into_iter().collect()),
            requests: Mutex::new(Vec::new()),
        })
    }

    /// The summaries of the requests seen so far.
    pub fn summaries(&self) -> Vec<String> {
        self.requests
            .lock()
            .iter()
            .map(|r| r.summary.clone())
            .collect()
    }
}

#[async_trait::async_trait]
impl Approver for ScriptedApprover {
    async fn decide(
        &self,
        request: ApprovalRequest,
        _cancel: CancellationToken,
    ) -> ApprovalDecision {
        self.requests.lock().push(request);
        self.decisions
            .lock()
            .pop_front()
            .unwrap_or(ApprovalDecision::Cancelled)
    }
}
