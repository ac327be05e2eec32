//! Responses API stream events -> [`StreamEvent`]s.
//!
//! The stream has no `[DONE]`: it ends with `response.completed`,
//! `response.incomplete` or `response.failed`. Function calls are output
//! items, announced by `response.output_item.added` and finished by
//! `response.output_item.done`; their argument deltas name the item by
//! `output_index`. A completed response is recorded as its conversation's
//! chain (see [`super::chain`]).

use super::chain::{Answer, Conversations, Sent};
use crate::drive::WireDecoder;
use crate::openai::stream::stream_error;
use crate::sse::SseEvent;
use pod_llm::{FinishReason, ProviderError, StreamEvent, Usage};
use serde::Deserialize;
use serde_json::Value;
use std::sync::Arc;

/// One event's data. Everything is optional: each event type uses a few
/// of these fields.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct Event {
    #[serde(rename = "type")]
    kind: String,
    delta: Option<String>,
    output_index: Option<usize>,
    item: Option<OutputItem>,
    arguments: Option<String>,
    response: Option<WireResponse>,
    /// Top-level fields of an `error` event.
    code: Option<Value>,
    message: Option<String>,
    /// The error object some servers nest in an `error` event instead.
    error: Option<Value>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct OutputItem {
    #[serde(rename = "type")]
    kind: String,
    id: Option<String>,
    call_id: Option<String>,
    name: Option<String>,
    arguments: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct WireResponse {
    id: Option<String>,
    usage: Option<WireUsage>,
    incomplete_details: Option<Incomplete>,
    error: Option<Value>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct Incomplete {
    reason: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct WireUsage {
    input_tokens: Option<u64>,
    output_tokens: Option<u64>,
    input_tokens_details: Option<InputDetails>,
    output_tokens_details: Option<OutputDetails>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct InputDetails {
    cached_tokens: Option<u64>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct OutputDetails {
    reasoning_tokens: Option<u64>,
}

/// Records a completed response as the chain its conversation continues
/// from.
pub(crate) struct Recorder {
    pub conversations: Arc<Conversations>,
    pub key: Arc<str>,
    /// The history the request was made of.
    pub sent: Sent,
    /// The stored response the request followed, if any: an error then
    /// drops that chain (a server may say in the stream that it lost the
    /// response), so the next attempt is sent whole.
    pub followed: Option<String>,
}

/// A function call of this response.
#[derive(Debug)]
struct Call {
    output_index: Option<usize>,
    has_arguments: bool,
    ended: bool,
}

/// The decoder state of one response.
pub(crate) struct ResponseDecoder {
    calls: Vec<Call>,
    answer: Answer,
    refused: bool,
    /// Reasoning text was emitted, and whether a new part or item of it
    /// began since: parts are paragraphs, their deltas carry no separator.
    reasoning: bool,
    reasoning_break: bool,
    /// Whether any event was emitted (an error before the first one may
    /// still be retried without the caller seeing anything).
    emitted: bool,
    done: bool,
    recorder: Option<Recorder>,
    /// Makes synthesized call ids unique across responses.
    nonce: String,
}

impl ResponseDecoder {
    /// A decoder; `nonce` goes into synthesized call ids; `recorder`, when
    /// given, learns the stored response once it completes.
    pub(crate) fn new(nonce: impl Into<String>, recorder: Option<Recorder>) -> Self {
        Self {
            calls: Vec::new(),
            answer: Answer::default(),
            refused: false,
            reasoning: false,
            reasoning_break: false,
            emitted: false,
            done: false,
            recorder,
            nonce: nonce.into(),
        }
    }

    fn event(&mut self, event: Event) -> Result<Vec<StreamEvent>, ProviderError> {
        let mut out = Vec::new();
        match event.kind.as_str() {
            "response.output_text.delta" => {
                if let Some(text) = event.delta.filter(|t| !t.is_empty()) {
                    self.answer.text.push_str(&text);
                    out.push(StreamEvent::TextDelta { text });
                }
            }
            "response.refusal.delta" => {
                self.refused = true;
                if let Some(text) = event.delta.filter(|t| !t.is_empty()) {
                    self.answer.text.push_str(&text);
                    out.push(StreamEvent::TextDelta { text });
                }
            }
            "response.reasoning_summary_part.added" => self.reasoning_break = true,
            "response.reasoning_summary_text.delta" | "response.reasoning_text.delta" => {
                if let Some(text) = event.delta.filter(|t| !t.is_empty()) {
                    if self.reasoning && self.reasoning_break {
                        out.push(StreamEvent::ReasoningDelta {
                            text: "\n\n".into(),
                        });
                    }
                    self.reasoning = true;
                    self.reasoning_break = false;
                    out.push(StreamEvent::ReasoningDelta { text });
                }
            }
            "response.output_item.added" => match event.item {
                Some(item) if item.kind == "function_call" => {
                    self.start(event.output_index, item, &mut out);
                }
                Some(item) if item.kind == "reasoning" => self.reasoning_break = true,
                _ => {}
            },
            "response.function_call_arguments.delta" => {
                let fragment = event.delta.unwrap_or_default();
                if let Some(index) = self.call_at(event.output_index) {
                    if !fragment.is_empty() {
                        self.calls[index].has_arguments = true;
                        out.push(StreamEvent::ToolCallArgs { index, fragment });
                    }
                }
            }
            "response.function_call_arguments.done" => {
                if let Some(index) = self.call_at(event.output_index) {
                    self.arguments_once(index, event.arguments, &mut out);
                }
            }
            "response.output_item.done" => {
                if let Some(item) = event.item.filter(|i| i.kind == "function_call") {
                    let index = match self.call_at(event.output_index) {
                        Some(index) => {
                            self.arguments_once(index, item.arguments, &mut out);
                            index
                        }
                        // A server that announces calls only when done.
                        None => self.start(event.output_index, item, &mut out),
                    };
                    self.end(index, &mut out);
                }
            }
            "response.completed" => {
                let response = event.response.unwrap_or_default();
                let reason = if !self.calls.is_empty() {
                    FinishReason::ToolCalls
                } else if self.refused {
                    FinishReason::Refusal
                } else {
                    FinishReason::Stop
                };
                self.finish(response.usage, reason, &mut out);
                if let (Some(recorder), Some(id)) = (self.recorder.take(), response.id) {
                    recorder
                        .conversations
                        .record(&recorder.key, id, recorder.sent, &self.answer);
                }
            }
            "response.incomplete" => {
                let response = event.response.unwrap_or_default();
                let reason = match response.incomplete_details.and_then(|d| d.reason) {
                    Some(reason) if reason == "max_output_tokens" => FinishReason::Length,
                    Some(reason) if reason == "content_filter" => FinishReason::Refusal,
                    Some(other) => FinishReason::Other(other),
                    None => FinishReason::Length,
                };
                self.finish(response.usage, reason, &mut out);
            }
            "response.failed" => {
                let error = event
                    .response
                    .and_then(|r| r.error)
                    .unwrap_or_else(|| Value::String("the response failed".into()));
                return Err(self.failed(match error {
                    Value::String(message) => ProviderError::Api {
                        kind: "response.failed".into(),
                        message,
                        retryable: true,
                    },
                    error => stream_error(&error),
                }));
            }
            "error" => {
                let error = match (event.error, event.code, event.message) {
                    (Some(nested @ Value::Object(_)), None, None) => nested,
                    (_, code, message) => {
                        let mut error = serde_json::Map::new();
                        if let Some(code) = code {
                            error.insert("code".into(), code);
                        }
                        error.insert(
                            "message".into(),
                            Value::String(message.unwrap_or_else(|| "stream error".into())),
                        );
                        Value::Object(error)
                    }
                };
                return Err(self.failed(stream_error(&error)));
            }
            // Lifecycle, content parts, text done, annotations, other tools.
            _ => {}
        }
        Ok(out)
    }

    /// The error a failed stream ends with. A request that followed a
    /// stored response drops that chain (the server may have lost it);
    /// failing before any event, it may then be sent again at once, whole:
    /// nothing of it reached the caller.
    fn failed(&mut self, err: ProviderError) -> ProviderError {
        let Some(recorder) = self.recorder.take() else {
            return err;
        };
        let Some(followed) = recorder.followed else {
            return err;
        };
        recorder.conversations.forget_if(&recorder.key, &followed);
        match err {
            ProviderError::Api { kind, message, .. } if !self.emitted => ProviderError::Api {
                kind,
                message,
                retryable: true,
            },
            other => other,
        }
    }

    /// Announces a call; returns its index.
    fn start(
        &mut self,
        output_index: Option<usize>,
        item: OutputItem,
        out: &mut Vec<StreamEvent>,
    ) -> usize {
        let index = self.calls.len();
        let id = item
            .call_id
            .or(item.id)
            .filter(|id| !id.is_empty())
            .unwrap_or_else(|| format!("call_{}_{index}", self.nonce));
        self.answer.call_ids.push(id.clone());
        self.calls.push(Call {
            output_index,
            has_arguments: false,
            ended: false,
        });
        out.push(StreamEvent::ToolCallStart {
            index,
            id,
            name: item.name.unwrap_or_default(),
        });
        // Some servers send the whole arguments with the item.
        self.arguments_once(index, item.arguments, out);
        index
    }

    fn call_at(&self, output_index: Option<usize>) -> Option<usize> {
        match output_index {
            Some(_) => self
                .calls
                .iter()
                .rposition(|c| c.output_index == output_index),
            // Without an index, the call being streamed is the last one.
            None => self.calls.len().checked_sub(1),
        }
    }

    /// Emits `arguments` unless deltas already did.
    fn arguments_once(
        &mut self,
        index: usize,
        arguments: Option<String>,
        out: &mut Vec<StreamEvent>,
    ) {
        let call = &mut self.calls[index];
        if call.has_arguments {
            return;
        }
        if let Some(fragment) = arguments.filter(|a| !a.is_empty()) {
            call.has_arguments = true;
            out.push(StreamEvent::ToolCallArgs { index, fragment });
        }
    }

    fn end(&mut self, index: usize, out: &mut Vec<StreamEvent>) {
        let call = &mut self.calls[index];
        if call.ended {
            return;
        }
        if !call.has_arguments {
            // A parameterless call may send no arguments at all.
            call.has_arguments = true;
            out.push(StreamEvent::ToolCallArgs {
                index,
                fragment: "{}".into(),
            });
        }
        call.ended = true;
        out.push(StreamEvent::ToolCallEnd { index });
    }

    fn finish(
        &mut self,
        usage: Option<WireUsage>,
        reason: FinishReason,
        out: &mut Vec<StreamEvent>,
    ) {
        for index in 0..self.calls.len() {
            self.end(index, out);
        }
        if let Some(usage) = usage {
            out.push(StreamEvent::Usage {
                usage: Usage {
                    // The whole context, the stored part included.
                    prompt_tokens: usage.input_tokens.unwrap_or(0),
                    completion_tokens: usage.output_tokens.unwrap_or(0),
                    cache_read_tokens: usage
                        .input_tokens_details
                        .and_then(|d| d.cached_tokens)
                        .unwrap_or(0),
                    cache_write_tokens: 0,
                    reasoning_tokens: usage
                        .output_tokens_details
                        .and_then(|d| d.reasoning_tokens)
                        .unwrap_or(0),
                },
            });
        }
        out.push(StreamEvent::Finish { reason });
        self.done = true;
    }
}

impl WireDecoder for ResponseDecoder {
    fn on_event(&mut self, event: SseEvent) -> Result<Vec<StreamEvent>, ProviderError> {
        let data = event.data.trim();
        if data.is_empty() || self.done {
            return Ok(Vec::new());
        }
        let parsed: Event = serde_json::from_str(data)
            .map_err(|err| crate::drive::malformed("event", &err, data))?;
        let events = self.event(parsed)?;
        self.emitted |= !events.is_empty();
        Ok(events)
    }

    fn is_done(&self) -> bool {
        self.done
    }

    fn has_finished(&self) -> bool {
        self.done
    }

    fn on_end(&mut self) -> Result<Vec<StreamEvent>, ProviderError> {
        if !self.done {
            return Err(ProviderError::Transport(
                "stream ended before the response finished".into(),
            ));
        }
        Ok(Vec::new())
    }
}

#[cfg(test)]
#[path = "stream_tests.rs"]
mod tests;
