//! What hooks decided, read the way Claude Code reads them: exit code 0 (its
//! stdout may be JSON that decides), 2 (blocks, stderr is the reason the
//! model reads) or anything else (a failure shown to the user; the agent
//! goes on unless the hook says `"onError": "block"`).

use crate::run::Ran;
use crate::settings::{HookCommand, HookEvent, OnError};
use serde_json::Value;

/// A `PreToolUse` hook's answer about a call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Permission {
    /// Run it without asking (the approval policy's `deny` still holds).
    Allow,
    /// Ask a person, whatever the policy says.
    Ask,
    /// Do not run it; the reason goes to the model.
    Deny,
}

impl Permission {
    /// Its name in a hook's JSON.
    pub fn as_str(self) -> &'static str {
        match self {
            Permission::Allow => "allow",
            Permission::Ask => "ask",
            Permission::Deny => "deny",
        }
    }
}

/// What the hooks of one event decided together.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Verdict {
    /// Blocked (exit 2, `"decision": "block"`, a failure of a hook that
    /// blocks on error), with the reason for the model. For `PreToolUse`
    /// this is [`Permission::Deny`].
    pub block: Option<String>,
    /// `PreToolUse`: the strongest answer given (deny > ask > allow).
    pub permission: Option<Permission>,
    /// `PreToolUse`: why, when a hook said.
    pub permission_reason: Option<String>,
    /// `PreToolUse`: the call's input as a hook rewrote it (the last one's).
    pub updated_input: Option<Value>,
    /// Context for the model (`additionalContext`, or the plain stdout of a
    /// `UserPromptSubmit` or `SessionStart` hook).
    pub context: Vec<String>,
    /// `"continue": false`: the agent stops, with this reason.
    pub stop: Option<String>,
    /// What to show the user (`systemMessage`).
    pub messages: Vec<String>,
    /// Hooks that failed without blocking: shown to the user, once.
    pub errors: Vec<String>,
}

impl Verdict {
    /// Adds what `hook` decided when it ran at `event` and ended as `ran`.
    pub fn add(&mut self, event: HookEvent, hook: &HookCommand, ran: &Ran) {
        match ran {
            Ran::Exited {
                code: 0, stdout, ..
            } => self.read_stdout(event, hook, stdout),
            Ran::Exited {
                code: 2, stderr, ..
            } => {
                let reason = match stderr.trim() {
                    "" => format!("blocked by the hook `{}`", hook.command),
                    text => text.to_string(),
                };
                self.blocked(event, hook, reason);
            }
            Ran::Exited { code, stderr, .. } => {
                let why = match stderr.trim().lines().next() {
                    Some(line) => format!("exited with code {code}: {line}"),
                    None => format!("exited with code {code}"),
                };
                self.failed(event, hook, why);
            }
            Ran::Failed(why) => self.failed(event, hook, why.clone()),
        }
    }

    /// Whether it decides anything (else the hooks only ran).
    pub fn decides(&self) -> bool {
        self.block.is_some()
            || self.permission.is_some()
            || self.updated_input.is_some()
            || self.stop.is_some()
    }

    fn blocked(&mut self, event: HookEvent, hook: &HookCommand, reason: String) {
        match event {
            HookEvent::PreToolUse => self.permit(Permission::Deny, Some(reason)),
            HookEvent::PostToolUse
            | HookEvent::UserPromptSubmit
            | HookEvent::Stop
            | HookEvent::SubagentStop => {
                if self.block.is_none() {
                    self.block = Some(reason);
                }
            }
            // Nothing to block: the user reads it.
            HookEvent::PreCompact
            | HookEvent::SessionStart
            | HookEvent::SessionEnd
            | HookEvent::Notification => self.errors.push(format!(
                "the {event} hook `{}` said: {reason}",
                hook.command
            )),
        }
    }

    fn failed(&mut self, event: HookEvent, hook: &HookCommand, why: String) {
        let said = format!("the {event} hook `{}` failed: {why}", hook.command);
        match hook.on_error {
            OnError::Block => self.blocked(event, hook, said),
            OnError::Continue => self.errors.push(said),
        }
    }

    fn permit(&mut self, permission: Permission, reason: Option<String>) {
        if self.permission.is_none_or(|p| permission > p) {
            self.permission = Some(permission);
            self.permission_reason = reason;
        }
        if permission == Permission::Deny && self.block.is_none() {
            self.block = Some(
                self.permission_reason
                    .clone()
                    .unwrap_or_else(|| "denied by a hook".into()),
            );
        }
    }

    fn read_stdout(&mut self, event: HookEvent, hook: &HookCommand, stdout: &str) {
        let text = stdout.trim();
        if !text.starts_with('{') {
            // Plain text is context where Claude Code reads it so.
            if !text.is_empty()
                && matches!(event, HookEvent::UserPromptSubmit | HookEvent::SessionStart)
            {
                self.context.push(text.to_string());
            }
            return;
        }
        let json: Value = match serde_json::from_str(text) {
            Ok(json) => json,
            Err(err) => {
                return self.failed(event, hook, format!("its output is not JSON ({err})"));
            }
        };
        let string =
            |value: &Value, key: &str| value.get(key).and_then(Value::as_str).map(str::to_string);
        if json.get("continue").and_then(Value::as_bool) == Some(false) {
            self.stop = Some(
                string(&json, "stopReason")
                    .unwrap_or_else(|| format!("stopped by the hook `{}`", hook.command)),
            );
        }
        if let Some(message) = string(&json, "systemMessage") {
            self.messages.push(message);
        }
        let reason = string(&json, "reason");
        match json.get("decision").and_then(Value::as_str) {
            // The older PreToolUse words.
            Some("approve") if event == HookEvent::PreToolUse => {
                self.permit(Permission::Allow, reason.clone())
            }
            Some("block") => self.blocked(
                event,
                hook,
                reason
                    .clone()
                    .unwrap_or_else(|| format!("blocked by the hook `{}`", hook.command)),
            ),
            _ => {}
        }
        let Some(specific) = json.get("hookSpecificOutput") else {
            return;
        };
        if event == HookEvent::PreToolUse {
            let why = string(specific, "permissionDecisionReason").or(reason);
            match specific.get("permissionDecision").and_then(Value::as_str) {
                Some("allow") => self.permit(Permission::Allow, why),
                Some("ask") => self.permit(Permission::Ask, why),
                Some("deny") => self.permit(Permission::Deny, why),
                _ => {}
            }
            if let Some(input) = specific.get("updatedInput").filter(|v| v.is_object()) {
                self.updated_input = Some(input.clone());
            }
        }
        if let Some(context) =
            string(specific, "additionalContext").filter(|c| !c.trim().is_empty())
        {
            self.context.push(context);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn hook(on_error: OnError) -> HookCommand {
        HookCommand {
            command: "h".into(),
            timeout: Duration::from_secs(1),
            on_error,
        }
    }

    fn exited(code: i32, stdout: &str, stderr: &str) -> Ran {
        Ran::Exited {
            code,
            stdout: stdout.into(),
            stderr: stderr.into(),
        }
    }

    #[test]
    fn exit_two_blocks_with_stderr_and_deny_wins_over_allow() {
        let mut verdict = Verdict::default();
        let allow = r#"{"hookSpecificOutput":{"hookEventName":"PreToolUse","permissionDecision":"allow","updatedInput":{"command":"ls -la"}}}"#;
        verdict.add(
            HookEvent::PreToolUse,
            &hook(OnError::Continue),
            &exited(0, allow, ""),
        );
        assert_eq!(verdict.permission, Some(Permission::Allow));
        assert_eq!(
            verdict.updated_input,
            Some(serde_json::json!({"command": "ls -la"}))
        );
        verdict.add(
            HookEvent::PreToolUse,
            &hook(OnError::Continue),
            &exited(2, "", "no rm -rf here\n"),
        );
        assert_eq!(verdict.permission, Some(Permission::Deny));
        assert_eq!(verdict.block.as_deref(), Some("no rm -rf here"));
    }

    #[test]
    fn failures_are_reported_or_block_as_the_hook_says() {
        let mut open = Verdict::default();
        open.add(
            HookEvent::PreToolUse,
            &hook(OnError::Continue),
            &Ran::Failed("it hung".into()),
        );
        assert!(!open.decides());
        assert_eq!(open.errors, ["the PreToolUse hook `h` failed: it hung"]);
        let mut closed = Verdict::default();
        closed.add(
            HookEvent::PreToolUse,
            &hook(OnError::Block),
            &exited(0, "{not json", ""),
        );
        assert_eq!(closed.permission, Some(Permission::Deny));
        assert!(
            closed.block.as_deref().unwrap().contains("not JSON"),
            "{closed:?}"
        );
    }

    #[test]
    fn stop_context_and_plain_output() {
        let mut verdict = Verdict::default();
        verdict.add(
            HookEvent::Stop,
            &hook(OnError::Continue),
            &exited(
                0,
                r#"{"decision":"block","reason":"run the tests first"}"#,
                "",
            ),
        );
        assert_eq!(verdict.block.as_deref(), Some("run the tests first"));
        let mut prompt = Verdict::default();
        prompt.add(
            HookEvent::UserPromptSubmit,
            &hook(OnError::Continue),
            &exited(0, "branch: main\n", ""),
        );
        prompt.add(
            HookEvent::UserPromptSubmit,
            &hook(OnError::Continue),
            &exited(0, r#"{"continue":false,"stopReason":"frozen","hookSpecificOutput":{"additionalContext":"more"}}"#, ""),
        );
        assert_eq!(prompt.context, ["branch: main", "more"]);
        assert_eq!(prompt.stop.as_deref(), Some("frozen"));
    }
}
