//! Folding a stream of [`StreamEvent`]s into one assistant response.

use crate::item::{Reasoning, ToolCall, Usage};
use crate::provider::{FinishReason, ProviderError, StreamEvent};
use std::collections::BTreeMap;

/// A finished assistant response.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct AssembledResponse {
    /// Visible text.
    pub text: String,
    /// Reasoning, if any was streamed.
    pub reasoning: Option<Reasoning>,
    /// Complete tool calls in index order.
    pub tool_calls: Vec<ToolCall>,
    /// Usage, if reported.
    pub usage: Option<Usage>,
    /// Finish reason, if reported.
    pub finish: Option<FinishReason>,
}

#[derive(Default)]
struct PartialCall {
    id: String,
    name: String,
    arguments: String,
}

/// Accumulates events; pure, so it is tested without a model.
#[derive(Default)]
pub struct ResponseAssembler {
    text: String,
    reasoning: Option<Reasoning>,
    calls: BTreeMap<usize, PartialCall>,
    usage: Option<Usage>,
    finish: Option<FinishReason>,
}

impl ResponseAssembler {
    /// An empty assembler.
    pub fn new() -> Self {
        Self::default()
    }

    /// Folds one event in. Argument fragments for an unannounced index are a
    /// malformed stream.
    pub fn push(&mut self, event: StreamEvent) -> Result<(), ProviderError> {
        match event {
            StreamEvent::TextDelta { text } => self.text.push_str(&text),
            StreamEvent::ReasoningDelta { text } => self
                .reasoning
                .get_or_insert_with(Default::default)
                .text
                .push_str(&text),
            StreamEvent::ReasoningSignature { signature } => {
                self.reasoning
                    .get_or_insert_with(Default::default)
                    .signature = Some(signature)
            }
            StreamEvent::ToolCallStart { index, id, name } => {
                self.calls.insert(
                    index,
                    PartialCall {
                        id,
                        name,
                        arguments: String::new(),
                    },
                );
            }
            StreamEvent::ToolCallArgs { index, fragment } => match self.calls.get_mut(&index) {
                Some(call) => call.arguments.push_str(&fragment),
                None => {
                    return Err(ProviderError::Malformed(format!(
                        "arguments for tool call {index} before it started"
                    )))
                }
            },
            StreamEvent::ToolCallEnd { .. } => {}
            StreamEvent::Usage { usage } => self.usage = Some(usage),
            StreamEvent::Finish { reason } => self.finish = Some(reason),
        }
        Ok(())
    }

    /// The text streamed so far (kept when a turn is cancelled mid-stream).
    pub fn text(&self) -> &str {
        &self.text
    }

    /// The names of the tool calls started so far, in index order (none is
    /// known complete before the stream ends).
    pub fn started_calls(&self) -> Vec<String> {
        self.calls.values().map(|c| c.name.clone()).collect()
    }

    /// The response as it stands.
    pub fn finish(self) -> AssembledResponse {
        AssembledResponse {
            text: self.text,
            reasoning: self.reasoning,
            tool_calls: self
                .calls
                .into_values()
                .map(|c| ToolCall {
                    id: c.id,
                    name: c.name,
                    arguments: c.arguments,
                })
                .collect(),
            usage: self.usage,
            finish: self.finish,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn interleaved_fragments_assemble_by_index() {
        let mut a = ResponseAssembler::new();
        let events = vec![
            StreamEvent::TextDelta { text: "Hi ".into() },
            StreamEvent::ToolCallStart {
                index: 1,
                id: "b".into(),
                name: "y".into(),
            },
            StreamEvent::ToolCallStart {
                index: 0,
                id: "a".into(),
                name: "x".into(),
            },
            StreamEvent::ToolCallArgs {
                index: 0,
                fragment: "{\"k\":".into(),
            },
            StreamEvent::ToolCallArgs {
                index: 1,
                fragment: "{}".into(),
            },
            StreamEvent::ToolCallArgs {
                index: 0,
                fragment: "1}".into(),
            },
            StreamEvent::TextDelta {
                text: "there".into(),
            },
            StreamEvent::Finish {
                reason: FinishReason::ToolCalls,
            },
        ];
        for e in events {
            a.push(e).unwrap();
        }
        let r = a.finish();
        assert_eq!(r.text, "Hi there");
        assert_eq!(r.tool_calls[0].arguments, "{\"k\":1}");
        assert_eq!(r.tool_calls[0].id, "a");
        assert_eq!(r.tool_calls[1].name, "y");
        assert_eq!(r.finish, Some(FinishReason::ToolCalls));
    }

    #[test]
    fn fragment_without_start_is_malformed() {
        let mut a = ResponseAssembler::new();
        let err = a
            .push(StreamEvent::ToolCallArgs {
                index: 3,
                fragment: "{".into(),
            })
            .unwrap_err();
        assert!(matches!(err, ProviderError::Malformed(_)));
    }
}
