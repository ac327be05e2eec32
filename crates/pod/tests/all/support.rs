//! Shared helpers: a scripted Pod in a temporary POD_HOME, and small tools.

use pod::{Durability, Pod, PodConfig, PodEvent, PodHandle, PodHome};
use pod_llm::{ScriptStep, ScriptedProvider};
use pod_worker::{Tool, ToolContext, ToolOutput, ToolRegistry};
use serde_json::{json, Value};
use std::sync::Arc;
use tempfile::TempDir;
use tokio::sync::broadcast;
use uuid::Uuid;

/// A Pod home in a temp dir plus the scripted model it runs on.
pub struct TestPod {
    pub dir: TempDir,
    pub model: ScriptedProvider,
    pub durability: Durability,
    pub remind_every: u32,
    pub event_capacity: usize,
    /// Off by default: most suites test the Pod itself, and the workspace
    /// tools' specs would change their request sizes.
    pub workspace_tools: bool,
}

impl TestPod {
    pub fn new(steps: Vec<ScriptStep>) -> Self {
        Self {
            dir: tempfile::tempdir().expect("temp dir"),
            model: ScriptedProvider::from_steps(steps),
            durability: Durability::Turn,
            remind_every: 5,
            event_capacity: 256,
            workspace_tools: false,
        }
    }

    pub fn home(&self) -> PodHome {
        PodHome::new(self.dir.path().join("home"))
    }

    pub fn config(&self) -> PodConfig {
        let mut config = PodConfig::new(self.home(), self.dir.path(), Arc::new(self.model.clone()));
        let mut tools = ToolRegistry::new();
        tools.register(Echo).register(WaitForCancel);
        config.tools = tools;
        config.durability = self.durability;
        config.remind_every = self.remind_every;
        config.event_capacity = self.event_capacity;
        config.workspace_tools = self.workspace_tools;
        config
    }

    pub async fn spawn(&self) -> PodHandle {
        Pod::spawn(self.config()).await.expect("spawn pod")
    }

    pub async fn resume(&self, id: Uuid) -> PodHandle {
        Pod::resume(id, self.config()).await.expect("resume pod")
    }
}

/// A `todo_write` call step for `(id, content, status)` triples.
pub fn todo_step(items: &[(&str, &str, &str)]) -> ScriptStep {
    ScriptStep::tool_call("todo_write", todo_args(items))
}

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

/// Returns its `text` argument.
pub struct Echo;

#[async_trait::async_trait]
impl Tool for Echo {
    type Args = Value;
    fn name(&self) -> &str {
        "echo"
    }
    fn description(&self) -> String {
        "Returns its text argument.".into()
    }
    fn parameters(&self) -> Value {
        json!({"type": "object", "properties": {"text": {"type": "string"}}})
    }
    async fn call(&self, args: Value, _ctx: ToolContext) -> ToolOutput {
        ToolOutput::ok(args["text"].as_str().unwrap_or_default().to_string())
    }
}

/// Runs until the turn is cancelled.
pub struct WaitForCancel;

#[async_trait::async_trait]
impl Tool for WaitForCancel {
    type Args = Value;
    fn name(&self) -> &str {
        "wait_for_cancel"
    }
    fn description(&self) -> String {
        "Waits until the turn is cancelled.".into()
    }
    fn parameters(&self) -> Value {
        json!({"type": "object"})
    }
    async fn call(&self, _args: Value, ctx: ToolContext) -> ToolOutput {
        ctx.cancel.cancelled().await;
        ToolOutput::error("stopped: the turn was cancelled")
    }
}

/// An approver answering from a queue of decisions (then `Cancelled`), and
/// recording every request it saw.
#[derive(Default)]
pub struct ScriptedApprover {
    decisions: parking_lot::Mutex<std::collections::VecDeque<pod::ApprovalDecision>>,
    pub requests: parking_lot::Mutex<Vec<pod::ApprovalRequest>>,
}

impl ScriptedApprover {
    pub fn new(decisions: impl IntoIterator<Item = pod::ApprovalDecision>) -> Arc<Self> {
        Arc::new(Self {
            decisions: parking_lot::Mutex::new(decisions.into_iter().collect()),
            requests: parking_lot::Mutex::new(Vec::new()),
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
impl pod::Approver for ScriptedApprover {
    async fn decide(
        &self,
        request: pod::ApprovalRequest,
        _cancel: pod::CancellationToken,
    ) -> pod::ApprovalDecision {
        self.requests.lock().push(request);
        self.decisions
            .lock()
            .pop_front()
            .unwrap_or(pod::ApprovalDecision::Cancelled)
    }
}

/// The result text of call `call_id` in `history`, with its error flag.
pub fn result_of(history: &[pod_llm::Item], call_id: &str) -> (String, bool) {
    history
        .iter()
        .find_map(|item| match &item.kind {
            pod_llm::ItemKind::ToolResult {
                call_id: id,
                content,
                is_error,
                ..
            } if id == call_id => Some((content.clone(), *is_error)),
            _ => None,
        })
        .unwrap_or_else(|| panic!("no result for {call_id}"))
}

/// Ids of the tool calls in `history`, in order, with their tool names.
pub fn calls_of(history: &[pod_llm::Item]) -> Vec<(String, String)> {
    history
        .iter()
        .flat_map(|item| {
            item.tool_calls()
                .iter()
                .map(|c| (c.id.clone(), c.name.clone()))
        })
        .collect()
}
