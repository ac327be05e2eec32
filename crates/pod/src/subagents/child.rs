//! Running one child: finding what its log says, starting or resuming it,
//! forwarding its events, and turning how it ended into the call's result.

use super::approver::ChildApprover;
use super::parent::Parent;
use crate::approval::{Approver, SubagentLabel};
use crate::config::PodConfig;
use crate::error::PodError;
use crate::events::PodEvent;
use crate::handle::PodHandle;
use crate::interceptors::SessionBudget;
use crate::log::{LogRecord, ParentLink};
use crate::pod::Pod;
use pod_llm::error_chain as chain;
use pod_llm::ItemKind;
use pod_tools::{render_todos, TodoItem};
use pod_worker::{Limit, ToolOutput, TurnEndReason, TurnOutcome};
use std::sync::Arc;
use tokio::sync::broadcast::error::RecvError;
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

/// What a child is told about being one, after its parent's system prompt.
const SUBAGENT_PROMPT: &str = "You are a subagent: another agent gave you one task and waits \
for your answer. Work on it alone (nobody will answer questions), keep a plan with todo_write \
if it has several steps, and end with one final message that is your complete answer to that \
agent: what you found or did, with the paths and facts it needs.";

/// The session id of the child that call `call_id` of session `parent`
/// starts. Derived, not random, so that a resumed parent finds the child
/// its interrupted call had started.
pub fn child_session_id(parent: Uuid, call_id: &str) -> Uuid {
    Uuid::new_v5(&parent, call_id.as_bytes())
}

/// One `task` call's child.
pub(crate) struct Task {
    pub id: Uuid,
    pub call_id: String,
    pub description: String,
    pub prompt: String,
    pub read_only: bool,
    /// In its own git worktree (`POD_HOME/worktrees/ID`).
    pub worktree: bool,
    /// The agent type it runs as (`subagent_type`), if one was named.
    pub agent: Option<super::SubagentType>,
}

/// What a child's log says about it.
enum Found {
    /// No log yet: start it.
    New,
    /// A log without the task (the crash came right after it was
    /// created): resume it and send the task.
    Unprompted,
    /// Work in progress: resume it and let it go on.
    Unfinished,
    /// It had ended: report that, without running it again.
    Ended(Report),
}

/// How a child ended, as its log tells it.
struct Report {
    /// Its last answer's text.
    answer: String,
    /// Its plan at the end.
    todos: Vec<TodoItem>,
    /// The budget limit that stopped it, if one did.
    stopped: Option<Limit>,
    /// Whether it ended: its last item is an answer without calls, or a
    /// budget stopped it. Otherwise it has work to go on with.
    ended: bool,
}

impl Report {
    /// Reads the end of a child's log.
    fn of(records: &[LogRecord]) -> Report {
        let replayed = crate::replay::replay(records);
        let answered = matches!(
            replayed.history.last().map(|item| &item.kind),
            Some(ItemKind::Assistant { tool_calls, .. }) if tool_calls.is_empty()
        );
        let stopped = match records.last() {
            Some(LogRecord::Stopped(stop)) => Some(stop.limit.clone()),
            _ => None,
        };
        Report {
            answer: last_text(&replayed.history),
            todos: replayed.todos,
            ended: answered || stopped.is_some(),
            stopped,
        }
    }

    /// The tool result: the answer and the plan, an error when the child
    /// did not finish.
    fn output(&self, task: &Task, ended: Option<&TurnEndReason>) -> ToolOutput {
        let stop = match (ended, &self.stopped) {
            (Some(TurnEndReason::EndTurn) | None, None) => None,
            (Some(TurnEndReason::Limit(limit)), _) | (None, Some(limit)) => {
                Some(format!("it was {}", limit.stop_line()))
            }
            (Some(reason), _) => Some(describe(reason)),
        };
        let mut text = match &stop {
            None => self.answer.clone(),
            Some(why) => format!(
                "The subagent did not finish: {why}. Its last message:\n{}",
                self.answer
            ),
        };
        if !self.todos.is_empty() {
            text.push_str("\n\nIts plan at the end:\n");
            text.push_str(&render_todos(&self.todos));
        }
        text.push_str(&format!("\n\n(subagent session {})", task.id));
        let output = match stop {
            None => ToolOutput::ok(text),
            Some(_) => ToolOutput::error(text),
        };
        output.with_meta(serde_json::json!({ "session_id": task.id }))
    }
}

/// The text of the last answer that has any.
fn last_text(history: &[pod_llm::Item]) -> String {
    history
        .iter()
        .rev()
        .find_map(|item| match &item.kind {
            ItemKind::Assistant { text, .. } if !text.trim().is_empty() => Some(text.clone()),
            _ => None,
        })
        .unwrap_or_else(|| "(none)".to_string())
}

fn describe(reason: &TurnEndReason) -> String {
    match reason {
        TurnEndReason::EndTurn => "it ended".into(),
        TurnEndReason::MaxTokens => "its answer was cut by the output token limit".into(),
        TurnEndReason::Refusal => "the model refused".into(),
        TurnEndReason::Limit(limit) => format!("it was {}", limit.stop_line()),
        TurnEndReason::Cancelled => "it was cancelled".into(),
        TurnEndReason::Stalled => "it made no progress on its unfinished plan".into(),
        TurnEndReason::GoalUnmet(why) => format!("its work was not verified ({why})"),
        TurnEndReason::Aborted(why) => format!("it was aborted ({why})"),
        TurnEndReason::Paused(why) => format!("it was paused ({why})"),
        TurnEndReason::Parked(why) => format!("it is {why}"),
        TurnEndReason::Yielded(why) => format!("it yielded ({why:?})"),
        TurnEndReason::Rejected(why) => format!("its task was refused ({why})"),
    }
}

/// Whether child `id` has a log (a resumed `task` call).
pub(crate) async fn exists(config: &PodConfig, id: Uuid) -> bool {
    config.store().read(id).await.is_ok()
}

/// Runs `task`'s child to its end (or finds it ended) and returns the
/// call's result. Cancelling `cancel` cancels the child's turn.
pub(crate) async fn run(parent: &Parent, task: Task, cancel: &CancellationToken) -> ToolOutput {
    let mut config = child_config(parent, &task);
    let store = config.store();
    let mut recorded_workspace = None;
    let found = match store.read(task.id).await {
        Ok(contents) => {
            recorded_workspace = contents.header.as_ref().map(|h| h.workspace.clone());
            match Report::of(&contents.records) {
                report if report.ended => Found::Ended(report),
                _ if has_prompt(&contents.records) => Found::Unfinished,
                _ => Found::Unprompted,
            }
        }
        Err(PodError::NoSuchSession { .. }) => Found::New,
        Err(err) => return failed(&task, "its session cannot be read", &err),
    };
    let branch = format!("pod/{}", &task.id.simple().to_string()[..8]);
    if task.worktree {
        match (&found, recorded_workspace) {
            // A child started before works where it started.
            (Found::Unprompted | Found::Unfinished | Found::Ended(_), Some(workspace)) => {
                config.workspace = workspace
            }
            _ => {
                let path = config
                    .home
                    .path()
                    .join("worktrees")
                    .join(task.id.simple().to_string());
                match crate::checkpoints::make_worktree(
                    &config.home,
                    &parent.config.workspace,
                    &path,
                    &branch,
                )
                .await
                {
                    Ok(made) => config.workspace = made.workspace,
                    Err(err) => {
                        return ToolOutput::error(format!(
                            "Not run: the subagent's worktree could not be made ({err}). Call \
                             `task` without `worktree`, or work in the workspace yourself."
                        ))
                    }
                }
            }
        }
    }
    let worktree_note = task.worktree.then(|| {
        format!(
            "\n\nThe subagent worked in its own git worktree {} on branch {branch}: its changes \
             are there, not in your workspace (merge the branch to take them).",
            config.workspace.display()
        )
    });
    let link = ParentLink {
        session_id: parent.session_id,
        call_id: task.call_id.clone(),
        depth: parent.lineage.depth + 1,
        description: task.description.clone(),
        // A read-only session's children are read-only too.
        read_only: task.read_only || parent.lineage.read_only,
    };
    let (handle, prompt) = match found {
        Found::Ended(report) => {
            tracing::info!(child = %task.id, "the subagent had ended; its recorded answer is the result");
            return with_note(report.output(&task, None), worktree_note);
        }
        Found::New => (Pod::create(config, task.id, Some(link)).await, true),
        Found::Unprompted => (reopen(config, task.id, link, cancel).await, true),
        Found::Unfinished => (reopen(config, task.id, link, cancel).await, false),
    };
    let handle = match handle {
        Ok(handle) => handle,
        Err(err) => return failed(&task, "it could not be started", &err),
    };
    tracing::info!(child = %task.id, resumed = !prompt, "subagent running");
    let outcome = drive(parent, &task, &handle, prompt, cancel).await;
    if let Err(err) = handle.shutdown().await {
        tracing::warn!(child = %task.id, err = %chain(&err), "subagent shutdown");
    }
    let outcome = match outcome {
        Ok(outcome) => outcome,
        Err(err) => return failed(&task, "it failed", &err),
    };
    match store.read(task.id).await {
        Ok(contents) => with_note(
            Report::of(&contents.records).output(&task, Some(&outcome.reason)),
            worktree_note,
        ),
        Err(err) => failed(&task, "its session cannot be read", &err),
    }
}

/// Whether the child was given its task.
fn has_prompt(records: &[LogRecord]) -> bool {
    records.iter().any(|record| {
        matches!(record, LogRecord::Item(item) if matches!(item.kind, ItemKind::User { .. }))
            || matches!(record, LogRecord::Compaction(_))
    })
}

/// Resumes a child, waiting out a lease its previous worker still holds
/// (after a failover the child's lease expires about when the parent's
/// did).
async fn reopen(
    config: PodConfig,
    id: Uuid,
    link: ParentLink,
    cancel: &CancellationToken,
) -> Result<PodHandle, PodError> {
    match Pod::reopen(id, config.clone(), Some(link.clone())).await {
        Err(PodError::SessionLeased { until, .. }) => {
            let wait = (until - chrono::Utc::now()).to_std().unwrap_or_default();
            tokio::select! {
                _ = tokio::time::sleep(wait) => {}
                _ = cancel.cancelled() => return Err(PodError::Closed),
            }
            Pod::reopen(id, config, Some(link)).await
        }
        other => other,
    }
}

/// Runs the child's turn, forwarding its events to the parent's
/// subscribers, and cancels it when the parent's turn is cancelled.
async fn drive(
    parent: &Parent,
    task: &Task,
    handle: &PodHandle,
    prompt: bool,
    cancel: &CancellationToken,
) -> Result<TurnOutcome, PodError> {
    let mut events = handle.subscribe();
    let forward = |event: PodEvent| {
        // No subscriber is fine: events are for display only.
        parent.events.send(PodEvent::Subagent {
            session_id: task.id,
            call_id: task.call_id.clone(),
            description: task.description.clone(),
            inner: Box::new(event),
        });
    };
    let turn = async {
        match prompt {
            true => handle.prompt(task.prompt.clone()).await,
            false => handle.continue_turn().await,
        }
    };
    tokio::pin!(turn);
    let mut cancelled = false;
    let outcome = loop {
        tokio::select! {
            biased;
            event = events.recv() => match event {
                Ok(event) => forward(event),
                Err(RecvError::Lagged(missed)) => {
                    tracing::debug!(missed, child = %task.id, "subagent events lagged");
                }
                Err(RecvError::Closed) => {}
            },
            outcome = &mut turn => break outcome,
            _ = cancel.cancelled(), if !cancelled => {
                cancelled = true;
                handle.cancel().await?;
            }
        }
    };
    // The turn's last events were sent before its answer.
    while let Ok(event) = events.try_recv() {
        forward(event);
    }
    outcome
}

/// The settings a child runs with: its parent's, with the subagents' model,
/// a note in the system prompt, questions labelled, and no session budget.
fn child_config(parent: &Parent, task: &Task) -> PodConfig {
    let mut config = PodConfig::clone(&parent.config);
    if let Some(provider) = &parent.config.subagents.provider {
        config.provider = provider.clone();
    }
    // A grandchild's parent already has the note.
    if parent.lineage.depth == 0 {
        config.system_prompt = format!("{}\n\n{SUBAGENT_PROMPT}", parent.config.system_prompt);
    }
    if let Some(agent) = &task.agent {
        apply_agent(&mut config, agent);
    }
    config.approver = parent.config.approver.clone().map(|approver| {
        Arc::new(ChildApprover {
            parent: approver,
            label: SubagentLabel {
                session_id: task.id,
                description: task.description.clone(),
            },
        }) as Arc<dyn Approver>
    });
    // The parent's session budget counts the parent's requests; a child's
    // are bounded by its run budget.
    config.session_budget = SessionBudget::default();
    // The parent's front end watches the parent (a child's events reach
    // it wrapped), not each child.
    config.on_start.clear();
    config
}

/// A child running as `agent`: its model, its instructions after the
/// prompt, and only the tools both its parent and the agent may use.
fn apply_agent(config: &mut PodConfig, agent: &super::SubagentType) {
    if let Some(provider) = &agent.provider {
        config.provider = provider.clone();
    }
    if !agent.prompt.trim().is_empty() {
        config.system_prompt = format!(
            "{}\n\n# You are the `{}` agent\n\n{}",
            config.system_prompt,
            agent.name,
            agent.prompt.trim()
        );
    }
    if let Some(tools) = &agent.tools {
        config.tool_allow = Some(match &config.tool_allow {
            // Never more than the parent may use.
            Some(parent) => tools
                .iter()
                .filter(|tool| parent.contains(tool))
                .cloned()
                .collect(),
            None => tools.clone(),
        });
    }
}

/// `output` with `note` (where the child's changes are) after it.
fn with_note(mut output: ToolOutput, note: Option<String>) -> ToolOutput {
    if let Some(note) = note {
        output.content.push_str(&note);
    }
    output
}

/// An error result for a child that could not run.
fn failed(task: &Task, what: &str, err: &PodError) -> ToolOutput {
    tracing::warn!(child = %task.id, err = %chain(err), "subagent failed");
    ToolOutput::error(format!(
        "The subagent for \"{}\" failed: {what}: {}. Its session is {}; do the task yourself \
         or try again with a clearer prompt.",
        task.description,
        chain(err),
        task.id
    ))
}
