//! Messages stream events -> [`StreamEvent`]s.
//!
//! Content blocks are numbered by the API across text, thinking and tool
//! use; tool calls get their own dense index. Usage is reported at the end
//! (input tokens from `message_start`, output tokens from `message_delta`),
//! so nothing is yielded before the first content: an `error` event right
//! after `message_start` can still be retried transparently.

use crate::drive::WireDecoder;
use crate::sse::SseEvent;
use pod_llm::{FinishReason, ProviderError, StreamEvent, Usage};
use serde::Deserialize;
use std::collections::HashMap;

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct Event {
    #[serde(rename = "type")]
    kind: String,
    index: Option<u64>,
    message: Option<Message>,
    content_block: Option<Block>,
    delta: Option<Delta>,
    usage: Option<WireUsage>,
    error: Option<WireError>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct Message {
    usage: Option<WireUsage>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct Block {
    #[serde(rename = "type")]
    kind: String,
    id: Option<String>,
    name: Option<String>,
    text: Option<String>,
    thinking: Option<String>,
    signature: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct Delta {
    #[serde(rename = "type")]
    kind: Option<String>,
    text: Option<String>,
    partial_json: Option<String>,
    thinking: Option<String>,
    signature: Option<String>,
    stop_reason: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct WireUsage {
    input_tokens: Option<u64>,
    output_tokens: Option<u64>,
    cache_creation_input_tokens: Option<u64>,
    cache_read_input_tokens: Option<u64>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct WireError {
    #[serde(rename = "type")]
    kind: String,
    message: String,
}

#[derive(Debug)]
enum Open {
    Text,
    Thinking,
    Tool { call: usize, has_input: bool },
    Other,
}

/// The decoder state of one response.
#[derive(Debug, Default)]
pub(crate) struct MessageDecoder {
    blocks: HashMap<u64, Open>,
    calls: usize,
    prompt_tokens: Option<u64>,
    output_tokens: Option<u64>,
    cache_read: u64,
    cache_write: u64,
    stop: Option<FinishReason>,
    stopped: bool,
}

impl MessageDecoder {
    fn event(&mut self, event: Event) -> Result<Vec<StreamEvent>, ProviderError> {
        let mut out = Vec::new();
        match event.kind.as_str() {
            "message_start" => {
                if let Some(usage) = event.message.and_then(|m| m.usage) {
                    self.usage(&usage);
                }
            }
            "content_block_start" => {
                let block = event.content_block.unwrap_or_default();
                self.block_start(event.index.unwrap_or(0), block, &mut out);
            }
            "content_block_delta" => {
                let delta = event.delta.unwrap_or_default();
                self.block_delta(event.index.unwrap_or(0), delta, &mut out);
            }
            "content_block_stop" => {
                if let Some(Open::Tool { call, has_input }) =
                    self.blocks.remove(&event.index.unwrap_or(0))
                {
                    if !has_input {
                        out.push(StreamEvent::ToolCallArgs {
                            index: call,
                            fragment: "{}".into(),
                        });
                    }
                    out.push(StreamEvent::ToolCallEnd { index: call });
                }
            }
            "message_delta" => {
                if let Some(reason) = event.delta.and_then(|d| d.stop_reason) {
                    self.stop = Some(stop_reason(&reason));
                }
                if let Some(usage) = event.usage {
                    self.usage(&usage);
                }
            }
            "message_stop" => self.stopped = true,
            "error" => return Err(stream_error(event.error.unwrap_or_default())),
            // `ping` and event types added after this was written.
            _ => {}
        }
        Ok(out)
    }

    fn usage(&mut self, usage: &WireUsage) {
        if let Some(input) = usage.input_tokens {
            // The prompt is all of it, cached or not: compaction needs the
            // size of the whole request.
            self.cache_write = usage.cache_creation_input_tokens.unwrap_or(0);
            self.cache_read = usage.cache_read_input_tokens.unwrap_or(0);
            self.prompt_tokens = Some(input + self.cache_write + self.cache_read);
        }
        if let Some(output) = usage.output_tokens {
            self.output_tokens = Some(output);
        }
    }

    fn block_start(&mut self, index: u64, block: Block, out: &mut Vec<StreamEvent>) {
        let open = match block.kind.as_str() {
            "text" => {
                push_text(out, block.text, |text| StreamEvent::TextDelta { text });
                Open::Text
            }
            "thinking" => {
                push_text(out, block.thinking, |text| StreamEvent::ReasoningDelta {
                    text,
                });
                push_text(out, block.signature, |signature| {
                    StreamEvent::ReasoningSignature { signature }
                });
                Open::Thinking
            }
            "tool_use" => {
                let call = self.calls;
                self.calls += 1;
                out.push(StreamEvent::ToolCallStart {
                    index: call,
                    id: block.id.unwrap_or_else(|| format!("toolu_{call}")),
                    name: block.name.unwrap_or_default(),
                });
                // The start block carries `input: {}`; the real input
                // streams as `input_json_delta`s.
                Open::Tool {
                    call,
                    has_input: false,
                }
            }
            // `redacted_thinking`, server tools: nothing this runtime keeps.
            _ => Open::Other,
        };
        self.blocks.insert(index, open);
    }

    fn block_delta(&mut self, index: u64, delta: Delta, out: &mut Vec<StreamEvent>) {
        let Some(open) = self.blocks.get_mut(&index) else {
            return;
        };
        match (open, delta.kind.as_deref()) {
            (Open::Text, _) => push_text(out, delta.text, |text| StreamEvent::TextDelta { text }),
            (Open::Thinking, Some("signature_delta")) => {
                push_text(out, delta.signature, |signature| {
                    StreamEvent::ReasoningSignature { signature }
                })
            }
            (Open::Thinking, _) => push_text(out, delta.thinking, |text| {
                StreamEvent::ReasoningDelta { text }
            }),
            (Open::Tool { call, has_input }, _) => {
                if let Some(fragment) = delta.partial_json.filter(|f| !f.is_empty()) {
                    *has_input = true;
                    out.push(StreamEvent::ToolCallArgs {
                        index: *call,
                        fragment,
                    });
                }
            }
            (Open::Other, _) => {}
        }
    }
}

fn push_text(out: &mut Vec<StreamEvent>, text: Option<String>, make: fn(String) -> StreamEvent) {
    if let Some(text) = text.filter(|t| !t.is_empty()) {
        out.push(make(text));
    }
}

fn stop_reason(reason: &str) -> FinishReason {
    match reason {
        "end_turn" | "stop_sequence" => FinishReason::Stop,
        "tool_use" => FinishReason::ToolCalls,
        "max_tokens" | "model_context_window_exceeded" => FinishReason::Length,
        "refusal" => FinishReason::Refusal,
        other => FinishReason::Other(other.to_string()),
    }
}

/// An `error` event inside a 200 stream.
fn stream_error(error: WireError) -> ProviderError {
    let retryable = matches!(
        error.kind.as_str(),
        "overloaded_error" | "api_error" | "rate_limit_error" | "timeout_error"
    );
    ProviderError::Api {
        kind: error.kind,
        message: error.message,
        retryable,
    }
}

impl WireDecoder for MessageDecoder {
    fn on_event(&mut self, event: SseEvent) -> Result<Vec<StreamEvent>, ProviderError> {
        let data = event.data.trim();
        if data.is_empty() {
            return Ok(Vec::new());
        }
        let parsed: Event = serde_json::from_str(data)
            .map_err(|err| crate::drive::malformed("event", &err, data))?;
        self.event(parsed)
    }

    fn is_done(&self) -> bool {
        self.stopped
    }

    fn has_finished(&self) -> bool {
        self.stop.is_some()
    }

    fn on_end(&mut self) -> Result<Vec<StreamEvent>, ProviderError> {
        let reason = match (self.stop.take(), self.stopped) {
            (Some(reason), _) => reason,
            (None, true) => FinishReason::Stop,
            (None, false) => {
                return Err(ProviderError::Transport(
                    "stream ended before the message finished".into(),
                ))
            }
        };
        let mut out = Vec::new();
        if self.prompt_tokens.is_some() || self.output_tokens.is_some() {
            out.push(StreamEvent::Usage {
                usage: Usage {
                    prompt_tokens: self.prompt_tokens.unwrap_or(0),
                    completion_tokens: self.output_tokens.unwrap_or(0),
                    cache_read_tokens: self.cache_read,
                    cache_write_tokens: self.cache_write,
                    // Thinking is billed as output; the API does not count it apart.
                    reasoning_tokens: 0,
                },
            });
        }
        out.push(StreamEvent::Finish { reason });
        Ok(out)
    }
}
