//! Chat Completions chunks -> [`StreamEvent`]s.
//!
//! Tool-call deltas are assembled into calls by `index`, with the quirks of
//! servers in the wild: a whole call in one delta (Ollama), `index` reused
//! for a different call with a different `id` (some Ollama versions), no
//! `index` at all (older Ollama), no `id` (ids are synthesized), a name
//! without `arguments` (vLLM), a call that never sends arguments (`{}`).
//! Finish and usage are held back until the stream ends, so they come last
//! whatever order the server sent them in.

use crate::drive::WireDecoder;
use crate::sse::SseEvent;
use pod_llm::{FinishReason, ProviderError, StreamEvent, Usage};
use serde::Deserialize;
use serde_json::Value;

/// One `chat.completion.chunk`. Everything is optional: servers omit or
/// null fields freely (DeepSeek sends `usage: null` on every chunk).
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct Chunk {
    choices: Option<Vec<Choice>>,
    usage: Option<WireUsage>,
    error: Option<Value>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct Choice {
    index: Option<u64>,
    delta: Option<Delta>,
    finish_reason: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct Delta {
    content: Option<String>,
    /// DeepSeek, vLLM.
    reasoning_content: Option<String>,
    /// OpenRouter, newer Ollama.
    reasoning: Option<String>,
    tool_calls: Option<Vec<CallDelta>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct CallDelta {
    index: Option<usize>,
    id: Option<String>,
    function: Option<FunctionDelta>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct FunctionDelta {
    name: Option<String>,
    /// A string fragment normally; some servers send the arguments object.
    arguments: Option<Value>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct WireUsage {
    prompt_tokens: Option<u64>,
    completion_tokens: Option<u64>,
    /// OpenAI (and servers copying it): `cached_tokens`.
    prompt_tokens_details: Option<PromptDetails>,
    /// OpenAI reasoning models: `reasoning_tokens`.
    completion_tokens_details: Option<CompletionDetails>,
    /// DeepSeek reports its cache this way instead.
    prompt_cache_hit_tokens: Option<u64>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct PromptDetails {
    cached_tokens: Option<u64>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct CompletionDetails {
    reasoning_tokens: Option<u64>,
}

/// A call being assembled.
#[derive(Debug, Default)]
struct Call {
    wire_index: Option<usize>,
    id: Option<String>,
    name: Option<String>,
    /// Arguments received before the call could be announced.
    pending: String,
    has_arguments: bool,
    started: bool,
}

/// The decoder state of one response.
#[derive(Debug)]
pub(crate) struct ChunkDecoder {
    calls: Vec<Call>,
    finish: Option<FinishReason>,
    usage: Option<Usage>,
    saw_done: bool,
    /// Makes synthesized call ids unique across responses.
    nonce: String,
}

impl ChunkDecoder {
    /// A decoder; `nonce` goes into synthesized call ids.
    pub(crate) fn new(nonce: impl Into<String>) -> Self {
        Self {
            calls: Vec::new(),
            finish: None,
            usage: None,
            saw_done: false,
            nonce: nonce.into(),
        }
    }

    fn chunk(&mut self, chunk: Chunk) -> Result<Vec<StreamEvent>, ProviderError> {
        if let Some(error) = chunk.error {
            return Err(stream_error(&error));
        }
        if let Some(usage) = chunk.usage {
            let cached = usage
                .prompt_tokens_details
                .and_then(|d| d.cached_tokens)
                .or(usage.prompt_cache_hit_tokens);
            self.usage = Some(Usage {
                prompt_tokens: usage.prompt_tokens.unwrap_or(0),
                completion_tokens: usage.completion_tokens.unwrap_or(0),
                // Caching is automatic here: nothing is billed as a write.
                cache_read_tokens: cached.unwrap_or(0),
                cache_write_tokens: 0,
                reasoning_tokens: usage
                    .completion_tokens_details
                    .and_then(|d| d.reasoning_tokens)
                    .unwrap_or(0),
            });
        }
        let mut events = Vec::new();
        // We ask for one completion; other choices would be another answer.
        let choices = chunk.choices.unwrap_or_default();
        for choice in choices.into_iter().filter(|c| c.index.unwrap_or(0) == 0) {
            if let Some(delta) = choice.delta {
                self.delta(delta, &mut events);
            }
            // After the delta: vLLM sends the last fragment and the finish
            // reason in one chunk.
            if let Some(reason) = choice.finish_reason {
                self.finish = Some(finish_reason(&reason));
            }
        }
        Ok(events)
    }

    fn delta(&mut self, delta: Delta, events: &mut Vec<StreamEvent>) {
        if let Some(text) = delta.reasoning_content.or(delta.reasoning) {
            if !text.is_empty() {
                events.push(StreamEvent::ReasoningDelta { text });
            }
        }
        if let Some(text) = delta.content.filter(|t| !t.is_empty()) {
            events.push(StreamEvent::TextDelta { text });
        }
        for call in delta.tool_calls.unwrap_or_default() {
            self.call_delta(call, events);
        }
    }

    fn call_delta(&mut self, delta: CallDelta, events: &mut Vec<StreamEvent>) {
        let id = delta.id.filter(|id| !id.is_empty());
        let (name, arguments) = match delta.function {
            Some(f) => (f.name.filter(|n| !n.is_empty()), f.arguments),
            None => (None, None),
        };
        let slot = match self.target(delta.index, id.as_deref(), name.is_some()) {
            Some(slot) => slot,
            None => {
                self.calls.push(Call {
                    wire_index: delta.index,
                    ..Call::default()
                });
                self.calls.len() - 1
            }
        };
        let index = slot;
        let nonce = &self.nonce;
        let call = &mut self.calls[slot];
        if call.id.is_none() && !call.started {
            call.id = id;
        }
        if call.name.is_none() {
            call.name = name;
        }
        let fragment = match arguments {
            Some(Value::String(text)) => text,
            Some(Value::Null) | None => String::new(),
            Some(other) => other.to_string(),
        };
        if !fragment.is_empty() {
            call.has_arguments = true;
        }
        if call.started {
            if !fragment.is_empty() {
                events.push(StreamEvent::ToolCallArgs { index, fragment });
            }
            return;
        }
        call.pending.push_str(&fragment);
        if call.name.is_some() {
            start(call, index, nonce, events);
        }
    }

    /// The call a delta continues, or `None` when it starts a new one.
    fn target(&self, index: Option<usize>, id: Option<&str>, named: bool) -> Option<usize> {
        match index {
            Some(index) => {
                let slot = self
                    .calls
                    .iter()
                    .rposition(|c| c.wire_index == Some(index))?;
                // Ollama reuses index 0 for different calls: a new id there
                // is a new call.
                match (id, self.calls[slot].id.as_deref()) {
                    (Some(new), Some(old)) if new != old => None,
                    _ => Some(slot),
                }
            }
            None => match id {
                Some(id) => self.calls.iter().rposition(|c| c.id.as_deref() == Some(id)),
                None => {
                    let last = self.calls.len().checked_sub(1)?;
                    // Without index or id, a second name can only be a
                    // second call; anything else continues the last one.
                    (!(named && self.calls[last].name.is_some())).then_some(last)
                }
            },
        }
    }

    fn flush(&mut self) -> Vec<StreamEvent> {
        let mut events = Vec::new();
        let nonce = self.nonce.clone();
        for (index, call) in self.calls.iter_mut().enumerate() {
            if !call.started {
                if call.name.is_none() && !call.has_arguments {
                    continue;
                }
                // A call that never got a name still reaches the tool
                // registry, which answers the model with an error.
                start(call, index, &nonce, &mut events);
            }
            if !call.has_arguments {
                // A parameterless call may never send arguments.
                events.push(StreamEvent::ToolCallArgs {
                    index,
                    fragment: "{}".into(),
                });
            }
            events.push(StreamEvent::ToolCallEnd { index });
        }
        if let Some(usage) = self.usage.take() {
            events.push(StreamEvent::Usage { usage });
        }
        let reason = self.finish.take().unwrap_or(if self.calls.is_empty() {
            FinishReason::Stop
        } else {
            FinishReason::ToolCalls
        });
        events.push(StreamEvent::Finish { reason });
        events
    }
}

fn start(call: &mut Call, index: usize, nonce: &str, events: &mut Vec<StreamEvent>) {
    call.started = true;
    let id = call
        .id
        .get_or_insert_with(|| format!("call_{nonce}_{index}"))
        .clone();
    events.push(StreamEvent::ToolCallStart {
        index,
        id,
        name: call.name.clone().unwrap_or_default(),
    });
    let pending = std::mem::take(&mut call.pending);
    if !pending.is_empty() {
        events.push(StreamEvent::ToolCallArgs {
            index,
            fragment: pending,
        });
    }
}

/// Maps a wire finish reason; unknown ones are kept verbatim.
fn finish_reason(reason: &str) -> FinishReason {
    match reason {
        "stop" | "eos" => FinishReason::Stop,
        "tool_calls" | "function_call" => FinishReason::ToolCalls,
        "length" => FinishReason::Length,
        "content_filter" => FinishReason::Refusal,
        other => FinishReason::Other(other.to_string()),
    }
}

/// An error object sent inside a 200 stream (OpenRouter, vLLM do this).
pub(crate) fn stream_error(error: &Value) -> ProviderError {
    let text = |key: &str| match error.get(key) {
        Some(Value::String(s)) => Some(s.clone()),
        Some(Value::Number(n)) => Some(n.to_string()),
        _ => None,
    };
    let message = text("message").unwrap_or_else(|| error.to_string());
    let kind = text("type")
        .or_else(|| text("code"))
        .unwrap_or_else(|| "error".into());
    let code = error.get("code").and_then(Value::as_u64);
    let retryable = matches!(code, Some(408 | 409 | 429 | 500..=599))
        || [
            "overloaded",
            "rate_limit",
            "server_error",
            "timeout",
            "unavailable",
        ]
        .iter()
        .any(|k| kind.contains(k));
    ProviderError::Api {
        kind,
        message,
        retryable,
    }
}

impl WireDecoder for ChunkDecoder {
    fn on_event(&mut self, event: SseEvent) -> Result<Vec<StreamEvent>, ProviderError> {
        let data = event.data.trim();
        if data == "[DONE]" {
            self.saw_done = true;
            return Ok(Vec::new());
        }
        if data.is_empty() {
            return Ok(Vec::new());
        }
        let chunk: Chunk = serde_json::from_str(data)
            .map_err(|err| crate::drive::malformed("chunk", &err, data))?;
        self.chunk(chunk)
    }

    fn is_done(&self) -> bool {
        self.saw_done
    }

    fn has_finished(&self) -> bool {
        self.finish.is_some()
    }

    fn on_end(&mut self) -> Result<Vec<StreamEvent>, ProviderError> {
        if self.finish.is_none() && !self.saw_done {
            return Err(ProviderError::Transport(
                "stream ended before the response finished".into(),
            ));
        }
        Ok(self.flush())
    }
}

#[cfg(test)]
#[path = "stream_tests.rs"]
mod tests;
