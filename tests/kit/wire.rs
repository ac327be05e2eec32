//! Scripted model answers in both wire formats: a text and calls to the
//! `lookup` tool, with arguments split into fragments the way real servers
//! stream them. Each answer is a list of SSE writes, so a suite can cut it
//! anywhere (see `server::Part`).

use crate::server::{anthropic_sse, Reply};
use serde_json::json;

/// The tool every scripted call goes to.
pub const TOOL: &str = "lookup";

/// A call as (id, arguments text).
pub type Call<'a> = (&'a str, &'a str);

/// A Chat Completions answer as SSE writes: the text, each call's header,
/// then the argument fragments of all calls interleaved (two per call),
/// the finish chunk, a usage chunk and `[DONE]`.
pub fn openai_parts(text: &str, calls: &[Call]) -> Vec<String> {
    let mut chunks = Vec::new();
    if !text.is_empty() {
        chunks.push(json!({"choices": [{"index": 0, "delta": {"content": text}}]}));
    }
    for (index, (id, _)) in calls.iter().enumerate() {
        chunks.push(json!({"choices": [{"index": 0, "delta": {"tool_calls": [
            {"index": index, "id": id, "type": "function", "function": {"name": TOOL, "arguments": ""}}
        ]}}]}));
    }
    for half in 0..2 {
        for (index, (_, args)) in calls.iter().enumerate() {
            let (first, second) = args.split_at(args.len() / 2);
            let part = if half == 0 { first } else { second };
            chunks.push(json!({"choices": [{"index": 0, "delta": {"tool_calls": [
                {"index": index, "function": {"arguments": part}}
            ]}}]}));
        }
    }
    let reason = if calls.is_empty() {
        "stop"
    } else {
        "tool_calls"
    };
    chunks.push(json!({"choices": [{"index": 0, "delta": {}, "finish_reason": reason}]}));
    chunks.push(json!({"choices": [], "usage": {"prompt_tokens": 50, "completion_tokens": 10}}));
    let mut parts: Vec<String> = chunks.iter().map(|c| format!("data: {c}\n\n")).collect();
    parts.push("data: [DONE]\n\n".into());
    parts
}

/// A Messages answer as SSE writes: `message_start`, a signed thinking
/// block, the text block, one `tool_use` block per call with its input in
/// two `input_json_delta` fragments, `message_delta`, `message_stop`.
pub fn anthropic_parts(text: &str, calls: &[Call]) -> Vec<String> {
    let mut events = vec![
        json!({"type": "message_start", "message": {"id": "msg", "usage": {"input_tokens": 50, "output_tokens": 1}}}),
        json!({"type": "content_block_start", "index": 0, "content_block": {"type": "thinking", "thinking": ""}}),
        json!({"type": "content_block_delta", "index": 0, "delta": {"type": "thinking_delta", "thinking": "Think."}}),
        json!({"type": "content_block_delta", "index": 0, "delta": {"type": "signature_delta", "signature": "sig"}}),
        json!({"type": "content_block_stop", "index": 0}),
    ];
    let mut block = 1;
    if !text.is_empty() {
        events.push(json!({"type": "content_block_start", "index": block, "content_block": {"type": "text", "text": ""}}));
        events.push(json!({"type": "content_block_delta", "index": block, "delta": {"type": "text_delta", "text": text}}));
        events.push(json!({"type": "content_block_stop", "index": block}));
        block += 1;
    }
    for (id, args) in calls {
        events.push(json!({"type": "content_block_start", "index": block, "content_block": {"type": "tool_use", "id": id, "name": TOOL, "input": {}}}));
        let (first, second) = args.split_at(args.len() / 2);
        for part in [first, second] {
            events.push(json!({"type": "content_block_delta", "index": block, "delta": {"type": "input_json_delta", "partial_json": part}}));
        }
        events.push(json!({"type": "content_block_stop", "index": block}));
        block += 1;
    }
    let reason = if calls.is_empty() {
        "end_turn"
    } else {
        "tool_use"
    };
    events.push(json!({"type": "message_delta", "delta": {"stop_reason": reason}, "usage": {"output_tokens": 10}}));
    events.push(json!({"type": "message_stop"}));
    anthropic_sse(&events)
}

/// [`openai_parts`] as a whole reply.
pub fn openai_step(text: &str, calls: &[Call]) -> Reply {
    Reply::sse(openai_parts(text, calls))
}

/// [`anthropic_parts`] as a whole reply.
pub fn anthropic_step(text: &str, calls: &[Call]) -> Reply {
    Reply::sse(anthropic_parts(text, calls))
}
