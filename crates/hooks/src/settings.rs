//! The `"hooks"` object of a Claude Code settings file:
//!
//! ```json
//! {"hooks": {"PreToolUse": [
//!   {"matcher": "Bash", "hooks": [{"type": "command", "command": "guard.sh", "timeout": 30}]}
//! ]}}
//! ```
//!
//! Events pod does not have and hook types other than `command` are
//! skipped with a warning, so a settings file written for a newer Claude
//! Code still loads; a file that is not that shape is an error that says
//! where.

use regex::Regex;
use serde_json::Value;
use std::fmt;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// How long a hook may run unless its `timeout` says otherwise (Claude
/// Code's default).
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(60);

/// The points of a session a hook can run at.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum HookEvent {
    /// Before a tool call runs: may allow, deny, ask or rewrite it.
    PreToolUse,
    /// After a tool call ran, before the model reads its result.
    PostToolUse,
    /// A prompt was submitted: may block it or add context.
    UserPromptSubmit,
    /// The agent wants to end its turn: may keep it going.
    Stop,
    /// A subagent wants to end its turn.
    SubagentStop,
    /// Before the context is compacted.
    PreCompact,
    /// A session starts or is resumed: may add context.
    SessionStart,
    /// A session's process lets it go.
    SessionEnd,
    /// The agent needs a person (a question waits for an answer).
    Notification,
}

impl HookEvent {
    /// Every event, in the order the docs list them.
    pub const ALL: [HookEvent; 9] = [
        HookEvent::PreToolUse,
        HookEvent::PostToolUse,
        HookEvent::UserPromptSubmit,
        HookEvent::Stop,
        HookEvent::SubagentStop,
        HookEvent::PreCompact,
        HookEvent::SessionStart,
        HookEvent::SessionEnd,
        HookEvent::Notification,
    ];

    /// Its name in settings files and in a hook's input.
    pub fn name(self) -> &'static str {
        match self {
            HookEvent::PreToolUse => "PreToolUse",
            HookEvent::PostToolUse => "PostToolUse",
            HookEvent::UserPromptSubmit => "UserPromptSubmit",
            HookEvent::Stop => "Stop",
            HookEvent::SubagentStop => "SubagentStop",
            HookEvent::PreCompact => "PreCompact",
            HookEvent::SessionStart => "SessionStart",
            HookEvent::SessionEnd => "SessionEnd",
            HookEvent::Notification => "Notification",
        }
    }

    fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|event| event.name() == name)
    }

    /// Whether its matcher is about tools (else about a trigger or a
    /// source, or nothing).
    fn matches_tools(self) -> bool {
        matches!(self, HookEvent::PreToolUse | HookEvent::PostToolUse)
    }

    /// Whether it has a matcher at all: the others run every hook listed
    /// for them, whatever a matcher says (as Claude Code does).
    fn has_subject(self) -> bool {
        self.matches_tools() || matches!(self, HookEvent::PreCompact | HookEvent::SessionStart)
    }
}

impl fmt::Display for HookEvent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// What a hook that fails (exits with a code other than 0 and 2, times out,
/// cannot start, or prints JSON that cannot be read) decides.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum OnError {
    /// Nothing: the failure is reported and the agent goes on, as in
    /// Claude Code.
    #[default]
    Continue,
    /// The same as exit code 2: the call (or prompt, or stop) is blocked
    /// with the failure as the reason. pod's own setting
    /// (`"onError": "block"`), for guards that must fail closed.
    Block,
}

/// One command to run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HookCommand {
    /// The shell command (`sh -c`).
    pub command: String,
    /// How long it may run.
    pub timeout: Duration,
    /// What its failure decides.
    pub on_error: OnError,
}

#[derive(Debug, Clone)]
struct Group {
    event: HookEvent,
    // None matches everything.
    matcher: Option<Regex>,
    commands: Vec<HookCommand>,
}

/// An error in a settings file.
#[derive(Debug, thiserror::Error)]
pub enum SettingsError {
    /// It could not be read.
    #[error("cannot read the hooks file {}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// It is not JSON.
    #[error("the hooks file {} is not JSON", path.display())]
    Json {
        /// The file.
        path: PathBuf,
        /// Where and why.
        #[source]
        source: serde_json::Error,
    },
    /// It is JSON of another shape.
    #[error("the hooks file {}: {at}: {message}", path.display())]
    Shape {
        /// The file.
        path: PathBuf,
        /// Where in it, as a JSON path (`hooks.PreToolUse[0].hooks[1]`).
        at: String,
        /// What is wrong.
        message: String,
    },
    /// A matcher is not a regular expression.
    #[error("the hooks file {}: {at}: the matcher {matcher:?} is not a regular expression", path.display())]
    Matcher {
        /// The file.
        path: PathBuf,
        /// Where in it.
        at: String,
        /// The matcher.
        matcher: String,
        /// Why.
        #[source]
        source: regex::Error,
    },
}

/// The hooks of a session: every settings file's, in the order loaded.
#[derive(Debug, Clone, Default)]
pub struct Hooks {
    groups: Vec<Group>,
}

impl Hooks {
    /// No hooks.
    pub fn new() -> Self {
        Self::default()
    }

    /// Reads the hooks of the settings file at `path` (a file without a
    /// `"hooks"` key has none).
    pub fn from_file(path: &Path) -> Result<Self, SettingsError> {
        let text = std::fs::read_to_string(path).map_err(|source| SettingsError::Io {
            path: path.to_path_buf(),
            source,
        })?;
        let value: Value = serde_json::from_str(&text).map_err(|source| SettingsError::Json {
            path: path.to_path_buf(),
            source,
        })?;
        Self::from_settings(&value, path)
    }

    /// The hooks of a settings document; `path` names it in errors.
    pub fn from_settings(settings: &Value, path: &Path) -> Result<Self, SettingsError> {
        let shape = |at: &str, message: &str| SettingsError::Shape {
            path: path.to_path_buf(),
            at: at.to_string(),
            message: message.to_string(),
        };
        let Some(settings) = settings.as_object() else {
            return Err(shape("(top)", "a settings file is a JSON object"));
        };
        let Some(hooks) = settings.get("hooks") else {
            return Ok(Self::new());
        };
        let Some(hooks) = hooks.as_object() else {
            return Err(shape(
                "hooks",
                "an object of events, e.g. {\"PreToolUse\": [...]}",
            ));
        };
        let mut groups = Vec::new();
        for (name, list) in hooks {
            let Some(event) = HookEvent::from_name(name) else {
                tracing::warn!(path = %path.display(), event = %name, "hook event pod does not have; skipped");
                continue;
            };
            let Some(list) = list.as_array() else {
                return Err(shape(
                    &format!("hooks.{name}"),
                    "a list of {\"matcher\", \"hooks\"} objects",
                ));
            };
            for (n, group) in list.iter().enumerate() {
                let at = format!("hooks.{name}[{n}]");
                let Some(group) = group.as_object() else {
                    return Err(shape(&at, "an object with \"hooks\" (and \"matcher\")"));
                };
                let matcher = match group.get("matcher") {
                    None | Some(Value::Null) => None,
                    Some(Value::String(text)) if text.is_empty() || text == "*" => None,
                    Some(Value::String(text)) => Some(compile(text, path, &at)?),
                    Some(_) => return Err(shape(&format!("{at}.matcher"), "a string")),
                };
                let Some(list) = group.get("hooks").and_then(Value::as_array) else {
                    return Err(shape(
                        &format!("{at}.hooks"),
                        "a list of {\"type\": \"command\", \"command\"} objects",
                    ));
                };
                let mut commands = Vec::new();
                for (k, hook) in list.iter().enumerate() {
                    let at = format!("{at}.hooks[{k}]");
                    if let Some(command) = command(hook, path, &at)? {
                        commands.push(command);
                    }
                }
                groups.push(Group {
                    event,
                    matcher,
                    commands,
                });
            }
        }
        Ok(Self { groups })
    }

    /// These hooks, then `other`'s.
    pub fn extend(&mut self, other: Hooks) {
        self.groups.extend(other.groups);
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.groups.iter().all(|g| g.commands.is_empty())
    }

    /// Whether any hook runs at `event`.
    pub fn has(&self, event: HookEvent) -> bool {
        self.groups
            .iter()
            .any(|g| g.event == event && !g.commands.is_empty())
    }

    /// The commands to run at `event` for `subject`: pod's tool name for
    /// the tool events (matched as pod names it and as Claude Code does),
    /// the trigger or source for `PreCompact` and `SessionStart`, nothing
    /// for the others. A command listed twice runs once.
    pub fn matching(&self, event: HookEvent, subject: Option<&str>) -> Vec<&HookCommand> {
        let names: Vec<String> = match subject {
            Some(name) if event.matches_tools() => {
                let mut names = vec![name.to_string()];
                names.extend(crate::claude_name(name));
                names
            }
            Some(subject) => vec![subject.to_string()],
            None => Vec::new(),
        };
        let mut found: Vec<&HookCommand> = Vec::new();
        for group in self.groups.iter().filter(|g| g.event == event) {
            let matched = match &group.matcher {
                Some(regex) if event.has_subject() => names.iter().any(|n| regex.is_match(n)),
                _ => true,
            };
            if !matched {
                continue;
            }
            for command in &group.commands {
                if !found.iter().any(|c| c.command == command.command) {
                    found.push(command);
                }
            }
        }
        found
    }
}

/// A matcher as Claude Code reads it: a regular expression that must match
/// the whole name (`Write` is only `Write`, `Write|Edit` either).
fn compile(text: &str, path: &Path, at: &str) -> Result<Regex, SettingsError> {
    Regex::new(&format!("^(?:{text})$")).map_err(|source| SettingsError::Matcher {
        path: path.to_path_buf(),
        at: format!("{at}.matcher"),
        matcher: text.to_string(),
        source,
    })
}

fn command(hook: &Value, path: &Path, at: &str) -> Result<Option<HookCommand>, SettingsError> {
    let shape = |at: String, message: &str| SettingsError::Shape {
        path: path.to_path_buf(),
        at,
        message: message.to_string(),
    };
    let Some(hook) = hook.as_object() else {
        return Err(shape(
            at.to_string(),
            "an object with \"type\" and \"command\"",
        ));
    };
    match hook.get("type").and_then(Value::as_str) {
        Some("command") => {}
        Some(other) => {
            tracing::warn!(path = %path.display(), at, kind = other, "hook type pod does not run; skipped");
            return Ok(None);
        }
        None => return Err(shape(format!("{at}.type"), "\"command\"")),
    }
    let Some(command) = hook.get("command").and_then(Value::as_str) else {
        return Err(shape(
            format!("{at}.command"),
            "the shell command to run, a string",
        ));
    };
    let timeout = match hook.get("timeout") {
        None | Some(Value::Null) => DEFAULT_TIMEOUT,
        Some(value) => match value.as_f64() {
            Some(secs) if secs > 0.0 && secs.is_finite() => {
                Duration::from_secs_f64(secs.min(86_400.0))
            }
            _ => return Err(shape(format!("{at}.timeout"), "seconds, a positive number")),
        },
    };
    let on_error = match hook.get("onError").and_then(Value::as_str) {
        None | Some("continue") => OnError::Continue,
        Some("block") => OnError::Block,
        Some(_) => return Err(shape(format!("{at}.onError"), "\"continue\" or \"block\"")),
    };
    Ok(Some(HookCommand {
        command: command.to_string(),
        timeout,
        on_error,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn hooks(value: Value) -> Hooks {
        Hooks::from_settings(&value, Path::new("settings.json")).unwrap()
    }

    #[test]
    fn matchers_are_whole_names_in_either_naming() {
        let hooks = hooks(json!({"hooks": {
            "PreToolUse": [
                {"matcher": "Bash", "hooks": [{"type": "command", "command": "a"}]},
                {"matcher": "Write|Edit", "hooks": [{"type": "command", "command": "b", "timeout": 5}]},
                {"matcher": "read_file", "hooks": [{"type": "command", "command": "c"}]},
                {"matcher": "mcp__github__.*", "hooks": [{"type": "command", "command": "d"}]},
                {"hooks": [{"type": "command", "command": "a"}]}
            ],
            "Stop": [{"hooks": [{"type": "command", "command": "s"}]}]
        }}));
        let commands = |tool: &str| -> Vec<String> {
            hooks
                .matching(HookEvent::PreToolUse, Some(tool))
                .iter()
                .map(|c| c.command.clone())
                .collect()
        };
        assert_eq!(commands("bash"), ["a"]);
        assert_eq!(commands("bash_extra"), ["a"], "only the catch-all");
        assert_eq!(commands("edit_file"), ["b", "a"]);
        assert_eq!(commands("read_file"), ["c", "a"]);
        assert_eq!(commands("github__create_issue"), ["d", "a"]);
        assert_eq!(
            hooks.matching(HookEvent::PreToolUse, Some("write_file"))[0].timeout,
            Duration::from_secs(5)
        );
        assert!(hooks.has(HookEvent::Stop));
        assert!(!hooks.has(HookEvent::PostToolUse));
        // An event without a subject ignores its matcher.
        let stop = Hooks::from_settings(
            &json!({"hooks": {"Stop": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "s"}]}]}}),
            Path::new("s.json"),
        )
        .unwrap();
        assert_eq!(stop.matching(HookEvent::Stop, None).len(), 1);
    }

    #[test]
    fn unknown_events_and_types_are_skipped_and_bad_shapes_say_where() {
        let loaded = hooks(json!({"model": "x", "hooks": {
            "PermissionRequest": [{"hooks": [{"type": "command", "command": "x"}]}],
            "Stop": [{"hooks": [{"type": "prompt", "prompt": "p"}]}]
        }}));
        assert!(loaded.is_empty());
        let err = Hooks::from_settings(
            &json!({"hooks": {"Stop": [{"hooks": [{"type": "command"}]}]}}),
            Path::new("s.json"),
        )
        .unwrap_err();
        assert_eq!(err.to_string(), "the hooks file s.json: hooks.Stop[0].hooks[0].command: the shell command to run, a string");
        let err = Hooks::from_settings(
            &json!({"hooks": {"PreToolUse": [{"matcher": "(", "hooks": []}]}}),
            Path::new("s.json"),
        )
        .unwrap_err();
        assert!(
            err.to_string().contains("hooks.PreToolUse[0].matcher"),
            "{err}"
        );
        assert!(Hooks::from_settings(&json!({}), Path::new("s"))
            .unwrap()
            .is_empty());
    }
}
