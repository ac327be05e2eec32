//! A deterministic model that plays a script.
//!
//! The scripted provider is the embedded default for demos and the workhorse
//! of tests: it answers each request with the next [`ScriptStep`], records
//! every request it receives and can fail on cue.

use crate::item::{ItemKind, Usage};
use crate::provider::{
    EventStream, FinishReason, Provider, ProviderError, ProviderRequest, StreamEvent,
};
use crate::tokens::estimate_request_tokens;
use futures_util::{stream, StreamExt};
use parking_lot::Mutex;
use serde::{Deserialize, Serialize};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

/// A whole script: the responses a scripted model gives, in order.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Script {
    /// Model name reported in session headers.
    #[serde(default = "default_model")]
    pub model: String,
    /// Context window the scripted model claims, in tokens.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context_window: Option<u64>,
    /// One step per request.
    pub steps: Vec<ScriptStep>,
    /// Steps answering compaction (summary) requests, played by the provider
    /// [`ScriptedProvider::compactor`] returns.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub compaction: Vec<ScriptStep>,
    /// Scripts of subagents, chosen by their task (see [`AgentScript`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub agents: Vec<AgentScript>,
}

/// The answers of one subagent. A request whose first user message (the
/// subagent's task) contains `task` is answered from `steps` instead of the
/// main steps; the first such script that matches is used. The step is
/// chosen by the number of answers already in the request's history, not by
/// a counter, so parallel subagents never take each other's steps and a
/// subagent resumed after a crash goes on where its log ends. (A failing
/// step is therefore met again on retry; scripted subagents should not
/// fail on cue.)
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AgentScript {
    /// Text the subagent's task contains.
    pub task: String,
    /// One step per request of that subagent.
    pub steps: Vec<ScriptStep>,
}

impl AgentScript {
    /// Whether `request` is one of this subagent's.
    fn answers(&self, request: &ProviderRequest) -> bool {
        request
            .history
            .iter()
            .find_map(|item| match &item.kind {
                ItemKind::User { text } => Some(text.contains(&self.task)),
                _ => None,
            })
            .unwrap_or(false)
    }

    /// The step for `request`, by the answers before it.
    fn step_for(&self, request: &ProviderRequest) -> (usize, Option<ScriptStep>) {
        let index = request
            .history
            .iter()
            .filter(|item| matches!(item.kind, ItemKind::Assistant { .. }))
            .count();
        (index, self.steps.get(index).cloned())
    }
}

fn default_model() -> String {
    "scripted".into()
}

/// The answer to one request.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScriptStep {
    /// Visible text.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub text: String,
    /// Reasoning text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning: Option<String>,
    /// Tool calls.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tool_calls: Vec<ScriptedCall>,
    /// Fail this request with this error instead of (or, with
    /// `fail_mid_stream`, after) the content above.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fail: Option<ScriptFailure>,
    /// Stream the content before failing, as a dropped connection would.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub fail_mid_stream: bool,
    /// Wait this long before the first event (for cancellation tests).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delay_ms: Option<u64>,
    /// Report this usage instead of the estimate (for cost tests).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<Usage>,
    /// Wait this long before each of the stream's events: a slow model,
    /// for tests that act while an answer or a call is streaming.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub event_delay_ms: Option<u64>,
    /// Report no usage: the answer a replay plays where the recording's was
    /// cut short (a cut answer never got its usage).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub no_usage: bool,
}

/// A scripted failure.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScriptFailure {
    /// HTTP status to report; none means a dropped connection.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<u16>,
    /// The error message.
    pub message: String,
}

/// One scripted tool call.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScriptedCall {
    /// Call id; generated from the step and position when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// Tool name.
    pub name: String,
    /// Arguments as JSON.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arguments: Option<serde_json::Value>,
    /// Arguments as raw text, sent verbatim (for malformed-JSON cases).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub raw_arguments: Option<String>,
}

/// Why a script could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum ScriptError {
    /// The file could not be read.
    #[error("cannot read script {path}: {source}")]
    Io {
        /// The path.
        path: String,
        /// The cause.
        source: std::io::Error,
    },
    /// The file is not a valid script.
    #[error("invalid script {path}: {source}")]
    Parse {
        /// The path.
        path: String,
        /// The cause, with line and column.
        source: serde_json::Error,
    },
}

impl ScriptStep {
    /// A step that answers with text only.
    pub fn text(text: impl Into<String>) -> Self {
        Self {
            text: text.into(),
            ..Self::default()
        }
    }

    /// A step that calls one tool with JSON arguments.
    pub fn tool_call(name: impl Into<String>, arguments: serde_json::Value) -> Self {
        Self::default().and_call(name, arguments)
    }

    /// Adds a tool call with JSON arguments to this step.
    pub fn and_call(mut self, name: impl Into<String>, arguments: serde_json::Value) -> Self {
        self.tool_calls.push(ScriptedCall {
            id: None,
            name: name.into(),
            arguments: Some(arguments),
            raw_arguments: None,
        });
        self
    }

    /// Adds a tool call whose arguments are sent verbatim.
    pub fn and_raw_call(mut self, name: impl Into<String>, raw: impl Into<String>) -> Self {
        self.tool_calls.push(ScriptedCall {
            id: None,
            name: name.into(),
            arguments: None,
            raw_arguments: Some(raw.into()),
        });
        self
    }

    /// A step that fails with an HTTP status.
    pub fn http_error(status: u16, message: impl Into<String>) -> Self {
        Self {
            fail: Some(ScriptFailure {
                status: Some(status),
                message: message.into(),
            }),
            ..Self::default()
        }
    }

    /// Sets a delay before the first event.
    pub fn delayed(mut self, delay: Duration) -> Self {
        self.delay_ms = Some(delay.as_millis() as u64);
        self
    }

    fn events(&self, step_index: usize, usage: Usage) -> Vec<StreamEvent> {
        let mut events = Vec::new();
        if let Some(reasoning) = &self.reasoning {
            events.push(StreamEvent::ReasoningDelta {
                text: reasoning.clone(),
            });
        }
        // Text arrives in a few deltas, as a real stream would send it.
        for chunk in split_in_chunks(&self.text, 3) {
            events.push(StreamEvent::TextDelta { text: chunk });
        }
        for (index, call) in self.tool_calls.iter().enumerate() {
            let arguments = match (&call.raw_arguments, &call.arguments) {
                (Some(raw), _) => raw.clone(),
                (None, Some(value)) => value.to_string(),
                (None, None) => "{}".to_string(),
            };
            events.push(StreamEvent::ToolCallStart {
                index,
                id: call
                    .id
                    .clone()
                    .unwrap_or_else(|| format!("call_{step_index}_{index}")),
                name: call.name.clone(),
            });
            for fragment in split_in_chunks(&arguments, 2) {
                events.push(StreamEvent::ToolCallArgs { index, fragment });
            }
            events.push(StreamEvent::ToolCallEnd { index });
        }
        if !self.no_usage {
            events.push(StreamEvent::Usage { usage });
        }
        events.push(StreamEvent::Finish {
            reason: if self.tool_calls.is_empty() {
                FinishReason::Stop
            } else {
                FinishReason::ToolCalls
            },
        });
        events
    }
}

fn split_in_chunks(text: &str, parts: usize) -> Vec<String> {
    if text.is_empty() {
        return Vec::new();
    }
    let chars: Vec<char> = text.chars().collect();
    let size = chars.len().div_ceil(parts).max(1);
    chars.chunks(size).map(|c| c.iter().collect()).collect()
}

impl Script {
    /// A script of these steps.
    pub fn new(steps: Vec<ScriptStep>) -> Self {
        Self {
            model: default_model(),
            context_window: None,
            steps,
            compaction: Vec::new(),
            agents: Vec::new(),
        }
    }

    /// Loads a script from a JSON file.
    pub fn load(path: &Path) -> Result<Self, ScriptError> {
        let text = std::fs::read_to_string(path).map_err(|source| ScriptError::Io {
            path: path.display().to_string(),
            source,
        })?;
        serde_json::from_str(&text).map_err(|source| ScriptError::Parse {
            path: path.display().to_string(),
            source,
        })
    }
}

struct State {
    next_step: usize,
    requests: Vec<ProviderRequest>,
    // Benchmarks turn recording off: a kept request shares the worker's
    // history, so its next append would copy it whole.
    record: bool,
    // Benchmarks turn the prompt-token estimate off: it reads every item of
    // every request, a cost of the stand-in model, not of the runtime.
    estimate: bool,
}

impl Default for State {
    fn default() -> Self {
        Self {
            next_step: 0,
            requests: Vec::new(),
            record: true,
            estimate: true,
        }
    }
}

/// A provider that plays a [`Script`]. Clones share the script position and
/// the request record.
#[derive(Clone)]
pub struct ScriptedProvider {
    script: Arc<Script>,
    // Shared so a test keeps a clone to inspect while the worker owns another.
    state: Arc<Mutex<State>>,
}

impl ScriptedProvider {
    /// A provider playing `script` from its first step.
    pub fn new(script: Script) -> Self {
        Self {
            script: Arc::new(script),
            state: Arc::default(),
        }
    }

    /// A provider playing these steps.
    pub fn from_steps(steps: Vec<ScriptStep>) -> Self {
        Self::new(Script::new(steps))
    }

    /// Stops recording requests (for benchmarks); `requests()` stays empty.
    pub fn without_recording(self) -> Self {
        self.state.lock().record = false;
        self
    }

    /// Reports 0 prompt tokens instead of estimating them from each
    /// request (for benchmarks: the model then costs the same at any
    /// history length).
    pub fn without_usage_estimate(self) -> Self {
        self.state.lock().estimate = false;
        self
    }

    /// Moves the script to step `index` (e.g. to continue after a resume).
    pub fn skip_to(&self, index: usize) {
        self.state.lock().next_step = index;
    }

    /// The index of the step the next request will get.
    pub fn position(&self) -> usize {
        self.state.lock().next_step
    }

    /// The number of steps in the script.
    pub fn len(&self) -> usize {
        self.script.steps.len()
    }

    /// Whether the script has no steps.
    pub fn is_empty(&self) -> bool {
        self.script.steps.is_empty()
    }

    /// A provider playing this script's `compaction` steps, for the compact
    /// worker; it keeps its own position and request record.
    pub fn compactor(&self) -> ScriptedProvider {
        ScriptedProvider::new(Script {
            model: self.script.model.clone(),
            context_window: self.script.context_window,
            steps: self.script.compaction.clone(),
            compaction: Vec::new(),
            agents: Vec::new(),
        })
    }

    /// Every request received so far, in order.
    pub fn requests(&self) -> Vec<ProviderRequest> {
        self.state.lock().requests.clone()
    }
}

#[async_trait::async_trait]
impl Provider for ScriptedProvider {
    async fn stream(&self, request: &ProviderRequest) -> Result<EventStream, ProviderError> {
        let (index, step, usage, agent) = {
            let mut state = self.state.lock();
            let usage = Usage {
                prompt_tokens: match state.estimate {
                    true => estimate_request_tokens(request),
                    false => 0,
                },
                completion_tokens: 0,
                ..Default::default()
            };
            if state.record {
                state.requests.push(request.clone());
            }
            match self.script.agents.iter().find(|a| a.answers(request)) {
                Some(agent) => {
                    let (index, step) = agent.step_for(request);
                    (index, step, usage, Some(agent))
                }
                None => {
                    let index = state.next_step;
                    state.next_step += 1;
                    (index, self.script.steps.get(index).cloned(), usage, None)
                }
            }
        };
        let Some(step) = step else {
            return Err(ProviderError::Scripted(match agent {
                Some(agent) => format!(
                    "the script of the subagent whose task contains {:?} is exhausted: \
                     request {} but only {} steps",
                    agent.task,
                    index + 1,
                    agent.steps.len()
                ),
                None => format!(
                    "script exhausted: request {} but only {} steps",
                    index + 1,
                    self.script.steps.len()
                ),
            }));
        };
        if let Some(delay) = step.delay_ms {
            tokio::time::sleep(Duration::from_millis(delay)).await;
        }
        let failure = step.fail.as_ref().map(|f| match f.status {
            Some(status) => ProviderError::Http {
                status,
                message: f.message.clone(),
                retry_after: None,
            },
            None => ProviderError::Transport(f.message.clone()),
        });
        let mut usage = usage;
        usage.completion_tokens = crate::tokens::estimate_text_tokens(&step.text)
            + step
                .tool_calls
                .iter()
                .map(|c| crate::tokens::estimate_text_tokens(&c.name) + 8)
                .sum::<u64>();
        let usage = step.usage.unwrap_or(usage);
        let events: Vec<Result<StreamEvent, ProviderError>> = match failure {
            Some(err) if step.fail_mid_stream => {
                let mut events: Vec<_> = step.events(index, usage).into_iter().map(Ok).collect();
                // Drop the finish information: the connection died before it.
                events.truncate(events.len().saturating_sub(2));
                events.push(Err(err));
                events
            }
            Some(err) => return Err(err),
            None => step.events(index, usage).into_iter().map(Ok).collect(),
        };
        match step.event_delay_ms {
            Some(delay) => {
                let delay = Duration::from_millis(delay);
                Ok(Box::pin(stream::iter(events).then(
                    move |event| async move {
                        tokio::time::sleep(delay).await;
                        event
                    },
                )))
            }
            None => Ok(Box::pin(stream::iter(events))),
        }
    }

    fn context_window(&self) -> Option<u64> {
        self.script.context_window
    }

    fn model_name(&self) -> String {
        self.script.model.clone()
    }
}
