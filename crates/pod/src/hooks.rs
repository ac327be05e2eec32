//! Operators' hooks ([`pod_hooks`]) compiled into the Pod: one
//! [`HookInterceptor`] in the stack runs `UserPromptSubmit`, `PreToolUse`,
//! `PostToolUse`, `Stop` (a subagent's: `SubagentStop`) and, before its
//! first request, `SessionStart`; the compaction runs `PreCompact`, the
//! actor `SessionEnd`, and a watcher of the Pod's events `Notification`.
//!
//! A `PreToolUse` decision is a [`HookRecord`] in the log before the call
//! runs: a resume acts on it and never runs the hooks of a decided call
//! again. A hook's `allow` or `ask` is handed to the approval interceptor
//! after it ([`HookVerdicts`]): `allow` skips the question (a tool the
//! policy denies stays denied), `ask` asks whatever the policy says.

use crate::events::{EventBus, PodEvent};
use crate::log::{HookDecision, HookRecord, LogRecord};
use crate::store::LogWriter;
use async_trait::async_trait;
use chrono::Utc;
use parking_lot::Mutex;
use pod_hooks::{HookEvent, Hooks, Permission, RunLimits, Verdict};
use pod_llm::{Item, ItemKind, SystemKind};
use pod_worker::{
    Interceptor, PostToolAction, PreToolAction, PromptAction, RunStart, ToolCallInfo,
    ToolResultInfo, TurnEndAction,
};
use serde_json::{json, Map, Value};
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use uuid::Uuid;

/// What a session's hooks run with: shared by everything of one Pod that
/// runs them (one pointer in the Pod's actor, which every idle Pod keeps).
#[derive(Clone)]
pub(crate) struct HookRunner(Arc<Runner>);

pub(crate) struct Runner {
    hooks: Arc<Hooks>,
    session_id: Uuid,
    transcript: Option<PathBuf>,
    cwd: PathBuf,
    events: EventBus,
    // `SessionStart`'s source: a new session or a resumed one.
    source: &'static str,
    // Whether `SessionStart` ran (it runs before the first request).
    started: AtomicBool,
    // A subagent's: its Stop is `SubagentStop`, and it has no session
    // events of its own.
    subagent: bool,
}

impl HookRunner {
    pub(crate) fn new(
        hooks: Arc<Hooks>,
        session_id: Uuid,
        transcript: Option<PathBuf>,
        cwd: PathBuf,
        events: EventBus,
        resumed: bool,
        subagent: bool,
    ) -> Self {
        Self(Arc::new(Runner {
            hooks,
            session_id,
            transcript,
            cwd,
            events,
            source: if resumed { "resume" } else { "startup" },
            started: AtomicBool::new(false),
            subagent,
        }))
    }

    pub(crate) fn has(&self, event: HookEvent) -> bool {
        self.hooks.has(event)
    }

    /// Runs the hooks of `event` for `subject` (a tool, a trigger, a
    /// source) with the common fields and `fields`; reports what they say
    /// to the user. Returns what they decided and the commands that ran.
    pub(crate) async fn fire(
        &self,
        event: HookEvent,
        subject: Option<&str>,
        fields: Value,
    ) -> (Verdict, Vec<String>) {
        let commands = self.hooks.matching(event, subject);
        let mut verdict = Verdict::default();
        if commands.is_empty() {
            return (verdict, Vec::new());
        }
        let mut input = Map::new();
        input.insert("session_id".into(), json!(self.session_id));
        input.insert("transcript_path".into(), json!(self.transcript));
        input.insert("cwd".into(), json!(self.cwd));
        input.insert("hook_event_name".into(), json!(event.name()));
        input.insert("permission_mode".into(), json!("default"));
        if let Value::Object(fields) = fields {
            input.extend(fields);
        }
        let input = Value::Object(input);
        let env = [
            (
                "CLAUDE_PROJECT_DIR".to_string(),
                self.cwd.to_string_lossy().into_owned(),
            ),
            ("POD_SESSION_ID".to_string(), self.session_id.to_string()),
        ];
        let mut ran = Vec::new();
        for command in commands {
            // Boxed: the run holds its output buffers (16 KB), which would
            // otherwise be reserved in every future that may fire a hook
            // (a Pod's every turn), hook or not.
            let outcome = Box::pin(pod_hooks::run(
                command,
                &input,
                &self.cwd,
                &env,
                RunLimits::default(),
            ))
            .await;
            tracing::debug!(hook = %command.command, %event, ?outcome, "hook ran");
            verdict.add(event, command, &outcome);
            ran.push(command.command.clone());
        }
        for error in &verdict.errors {
            tracing::warn!(%event, error = %error, "hook failed");
            self.tell(event, error.clone(), true);
        }
        for message in &verdict.messages {
            self.tell(event, message.clone(), false);
        }
        (verdict, ran)
    }

    fn tell(&self, event: HookEvent, message: String, failed: bool) {
        self.events.send(PodEvent::Hook {
            hook_event: event.name().into(),
            message,
            failed,
        });
    }

    /// The fields a tool event's hooks get about a call: Claude Code's
    /// name for the tool and its input as Claude Code's scripts read it,
    /// the call id, and pod's own name.
    fn call_fields(&self, tool: &str, arguments: &str, call_id: &str) -> Value {
        json!({
            "tool_name": pod_hooks::claude_name(tool).unwrap_or_else(|| tool.to_string()),
            "tool_input": pod_hooks::to_claude_input(tool, arguments, &self.cwd),
            "tool_use_id": call_id,
            "pod_tool_name": tool,
        })
    }

    /// `PreCompact`, before a compaction (`trigger`: `auto` or `manual`).
    pub(crate) async fn pre_compact(&self, trigger: &str) {
        if self.has(HookEvent::PreCompact) {
            self.fire(
                HookEvent::PreCompact,
                Some(trigger),
                json!({"trigger": trigger, "custom_instructions": ""}),
            )
            .await;
        }
    }

    /// `SessionEnd`, when the Pod lets the session go.
    pub(crate) async fn session_end(&self) {
        if !self.subagent && self.has(HookEvent::SessionEnd) {
            self.fire(HookEvent::SessionEnd, None, json!({"reason": "other"}))
                .await;
        }
    }

    /// Runs `Notification` hooks for the questions the Pod asks, until its
    /// events end.
    pub(crate) fn watch_notifications(&self) {
        if self.subagent || !self.has(HookEvent::Notification) {
            return;
        }
        let runner = self.clone();
        let mut events = self.events.subscribe();
        tokio::spawn(async move {
            loop {
                match events.recv().await {
                    Ok(PodEvent::QuestionAsked { question }) => {
                        let message = format!(
                            "pod needs your permission to use {}: {}",
                            question.request.tool, question.request.summary
                        );
                        runner
                            .fire(HookEvent::Notification, None, json!({"message": message}))
                            .await;
                    }
                    Ok(_) | Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => {}
                    Err(tokio::sync::broadcast::error::RecvError::Closed) => return,
                }
            }
        });
    }
}

impl std::ops::Deref for HookRunner {
    type Target = Runner;

    fn deref(&self) -> &Runner {
        &self.0
    }
}

/// What `PreToolUse` hooks told the approval interceptor about calls, by
/// call id: taken once, by the call's check.
#[derive(Clone, Default)]
pub(crate) struct HookVerdicts(Arc<Mutex<HashMap<String, HookDecision>>>);

impl HookVerdicts {
    pub(crate) fn take(&self, call_id: &str) -> Option<HookDecision> {
        self.0.lock().remove(call_id)
    }

    fn set(&self, call_id: &str, decision: HookDecision) {
        self.0.lock().insert(call_id.to_string(), decision);
    }
}

/// The hooks of the turn loop, as an interceptor.
pub(crate) struct HookInterceptor {
    runner: HookRunner,
    log: LogWriter,
    verdicts: HookVerdicts,
    // Decided before a restart, for calls that have not run.
    decided: HashMap<String, HookRecord>,
    // Context a PreToolUse hook gave, added to the call's result.
    context: HashMap<String, Vec<String>>,
    // SessionStart's context, for the first request.
    opening: Vec<String>,
    // The run goes on because a Stop hook blocked its end.
    stop_active: bool,
    // Stop hooks' blocks in a row in this run.
    stop_blocks: u32,
}

/// Blocks in a row after which a run ends anyway: a Stop hook that never
/// lets go (it does not check `stop_hook_active`) would keep a run going
/// for as long as its budget lasts, and a run may have none.
const MAX_STOP_BLOCKS: u32 = 8;

impl HookInterceptor {
    pub(crate) fn new(
        runner: HookRunner,
        log: LogWriter,
        verdicts: HookVerdicts,
        decided: HashMap<String, HookRecord>,
    ) -> Self {
        Self {
            runner,
            log,
            verdicts,
            decided,
            context: HashMap::new(),
            opening: Vec::new(),
            stop_active: false,
            stop_blocks: 0,
        }
    }

    /// Decides about `call` (running its hooks, or from the record of an
    /// earlier process) and records a new decision before returning it.
    async fn decide(&mut self, call: &ToolCallInfo) -> Result<Option<HookRecord>, String> {
        if let Some(record) = self.decided.remove(&call.call_id) {
            return Ok(Some(record));
        }
        if self
            .runner
            .hooks
            .matching(HookEvent::PreToolUse, Some(&call.name))
            .is_empty()
        {
            return Ok(None);
        }
        let workspace = self.runner.cwd.clone();
        let fields = self
            .runner
            .call_fields(&call.name, &call.arguments, &call.call_id);
        let (verdict, ran) = self
            .runner
            .fire(HookEvent::PreToolUse, Some(&call.name), fields)
            .await;
        let decision = match verdict.permission {
            Some(Permission::Deny) => HookDecision::Deny,
            Some(Permission::Ask) => HookDecision::Ask,
            Some(Permission::Allow) => HookDecision::Allow,
            None if verdict.block.is_some() => HookDecision::Deny,
            None => HookDecision::None,
        };
        let record = HookRecord {
            call_id: call.call_id.clone(),
            tool: call.name.clone(),
            decision,
            reason: match decision {
                HookDecision::Deny => verdict.block.clone(),
                _ => verdict.permission_reason.clone(),
            },
            arguments: verdict.updated_input.as_ref().map(|input| {
                pod_hooks::to_pod_input(&call.name, input, &call.arguments, &workspace)
            }),
            context: verdict.context.clone(),
            stop: verdict.stop.clone(),
            hooks: ran,
            at: Utc::now(),
        };
        // Recorded even when they decided nothing: a hook may do more than
        // decide (log, notify), and a call continued later (parked on the
        // policy's question) must not run it twice.
        {
            self.log
                .append(&LogRecord::Hook(record.clone()), true)
                .await
                .map_err(|err| {
                    format!(
                        "the hooks' decision could not be recorded in the session log ({})",
                        pod_llm::error_chain(&err)
                    )
                })?;
        }
        Ok(Some(record))
    }
}

fn reminder(text: String) -> Item {
    Item::system(
        SystemKind::Reminder,
        format!("<system-reminder>\n{text}\n</system-reminder>"),
    )
}

#[async_trait]
impl Interceptor for HookInterceptor {
    async fn on_run_start(&mut self, _run: &RunStart<'_>) {
        self.stop_active = false;
        self.stop_blocks = 0;
        if self.runner.subagent || self.runner.started.swap(true, Ordering::AcqRel) {
            return;
        }
        if self.runner.has(HookEvent::SessionStart) {
            let source = self.runner.source;
            let (verdict, _) = self
                .runner
                .fire(
                    HookEvent::SessionStart,
                    Some(source),
                    json!({"source": source}),
                )
                .await;
            self.opening = verdict.context;
        }
    }

    async fn on_prompt_submit(&mut self, prompt: &mut Item) -> PromptAction {
        let ItemKind::User { text } = &prompt.kind else {
            return PromptAction::Continue;
        };
        if !self.runner.has(HookEvent::UserPromptSubmit) {
            return PromptAction::Continue;
        }
        let (verdict, _) = self
            .runner
            .fire(HookEvent::UserPromptSubmit, None, json!({"prompt": text}))
            .await;
        if let Some(reason) = verdict.block.or(verdict.stop) {
            return PromptAction::Cancel(format!(
                "a UserPromptSubmit hook blocked the prompt: {reason}"
            ));
        }
        match verdict.context.is_empty() {
            true => PromptAction::Continue,
            false => PromptAction::ContinueWith(vec![reminder(format!(
                "UserPromptSubmit hook additional context:\n{}",
                verdict.context.join("\n")
            ))]),
        }
    }

    async fn pending_history_appends(&mut self, _history: &[Item]) -> Vec<Item> {
        match self.opening.is_empty() {
            true => Vec::new(),
            false => vec![reminder(format!(
                "SessionStart hook additional context:\n{}",
                std::mem::take(&mut self.opening).join("\n")
            ))],
        }
    }

    async fn pre_tool_call(&mut self, call: &mut ToolCallInfo) -> PreToolAction {
        let record = match self.decide(call).await {
            Ok(Some(record)) => record,
            Ok(None) => return PreToolAction::Continue,
            Err(reason) => return PreToolAction::Abort(reason),
        };
        if let Some(reason) = record.stop {
            return PreToolAction::Abort(format!("a PreToolUse hook stopped the agent: {reason}"));
        }
        if record.decision == HookDecision::Deny {
            let reason = record.reason.unwrap_or_else(|| "denied by a hook".into());
            self.runner.0.events.send(PodEvent::CallNotRun {
                call_id: call.call_id.clone(),
                name: call.name.clone(),
                arguments: call.arguments.clone(),
                by: crate::events::NotRunBy::Hook,
                reason: reason.clone(),
            });
            return PreToolAction::Skip(format!(
                "Not run: a PreToolUse hook blocked this `{}` call: {reason}",
                call.name
            ));
        }
        if let Some(arguments) = record.arguments {
            call.arguments = arguments;
        }
        if !record.context.is_empty() {
            self.context.insert(call.call_id.clone(), record.context);
        }
        if matches!(record.decision, HookDecision::Allow | HookDecision::Ask) {
            self.verdicts.set(&call.call_id, record.decision);
        }
        PreToolAction::Continue
    }

    async fn post_tool_call(&mut self, result: &mut ToolResultInfo) -> PostToolAction {
        let mut notes = self.context.remove(&result.call_id).unwrap_or_default();
        let mut action = PostToolAction::Continue;
        if !self
            .runner
            .hooks
            .matching(HookEvent::PostToolUse, Some(&result.name))
            .is_empty()
        {
            let mut fields =
                self.runner
                    .call_fields(&result.name, &result.arguments, &result.call_id);
            fields["tool_response"] = json!({
                "content": result.content,
                "is_error": result.is_error,
                "success": !result.is_error,
            });
            let (verdict, _) = self
                .runner
                .fire(HookEvent::PostToolUse, Some(&result.name), fields)
                .await;
            if let Some(reason) = verdict.block {
                notes.push(format!("PostToolUse hook: {reason}"));
            }
            notes.extend(verdict.context);
            if let Some(reason) = verdict.stop {
                action = PostToolAction::Abort(format!(
                    "a PostToolUse hook stopped the agent: {reason}"
                ));
            }
        }
        if !notes.is_empty() {
            result.content.push_str(&format!(
                "\n\n<system-reminder>\n{}\n</system-reminder>",
                notes.join("\n")
            ));
        }
        action
    }

    async fn on_turn_end(&mut self, _turn: &[Item]) -> TurnEndAction {
        let event = match self.runner.subagent {
            true => HookEvent::SubagentStop,
            false => HookEvent::Stop,
        };
        if !self.runner.has(event) {
            return TurnEndAction::Finish;
        }
        let (verdict, _) = self
            .runner
            .fire(event, None, json!({"stop_hook_active": self.stop_active}))
            .await;
        if verdict.stop.is_some() {
            // Ends the run, whatever else would continue it (until-done).
            self.stop_active = false;
            return TurnEndAction::Pause;
        }
        match verdict.block {
            Some(_) if self.stop_blocks >= MAX_STOP_BLOCKS => {
                self.runner.tell(
                    event,
                    format!(
                        "the {event} hooks blocked the end {MAX_STOP_BLOCKS} times in a row; \
                         the run ends anyway (a Stop hook should let go when stop_hook_active is true)"
                    ),
                    true,
                );
                // Ends the run, whatever else would continue it.
                self.stop_active = false;
                self.stop_blocks = 0;
                TurnEndAction::Pause
            }
            Some(reason) => {
                self.stop_active = true;
                self.stop_blocks += 1;
                TurnEndAction::ContinueWithMessages(vec![reminder(format!(
                    "A {event} hook did not let you stop yet: {reason}"
                ))])
            }
            None => {
                self.stop_active = false;
                self.stop_blocks = 0;
                TurnEndAction::Finish
            }
        }
    }
}
