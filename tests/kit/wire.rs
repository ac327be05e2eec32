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
    let named: Vec<NamedCall> = calls.iter().map(|(id, args)| (*id, TOOL, *args)).collect();
    openai_named_parts(text, &named)
}

/// A call to a named tool as (id, tool, arguments text).
pub type NamedCall<'a> = (&'a str, &'a str, &'a str);

/// [`openai_parts`] with calls to any tool: a test of the real tools
/// (`skill`, `task`, the workspace's) through a real provider.
pub fn openai_named_parts(text: &str, calls: &[NamedCall]) -> Vec<String> {
    let mut chunks = Vec::new();
    if !text.is_empty() {
        chunks.push(json!({"choices": [{"index": 0, "delta": {"content": text}}]}));
    }
    for (index, (id, name, _)) in calls.iter().enumerate() {
        chunks.push(json!({"choices": [{"index": 0, "delta": {"tool_calls": [
            {"index": index, "id": id, "type": "function", "function": {"name": name, "arguments": ""}}
        ]}}]}));
    }
    for half in 0..2 {
        for (index, (_, _, args)) in calls.iter().enumerate() {
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

/// The id [`responses_parts`] gives its response: `resp_` and the first
/// call's id, or the text's length when there is no call.
pub fn response_id(text: &str, calls: &[Call]) -> String {
    match calls.first() {
        Some((id, _)) => format!("resp_{id}"),
        None => format!("resp_text{}", text.len()),
    }
}

/// A Responses API answer as SSE writes: `response.created`, the text as
/// a message item, one `function_call` item per call with its arguments in
/// two deltas, `response.completed` with usage. The response's id is
/// [`response_id`].
pub fn responses_parts(text: &str, calls: &[Call]) -> Vec<String> {
    let id = response_id(text, calls);
    let mut events =
        vec![json!({"type": "response.created", "response": {"id": id, "status": "in_progress"}})];
    let mut output = 0;
    if !text.is_empty() {
        events.push(
            json!({"type": "response.output_item.added", "output_index": output,
            "item": {"type": "message", "id": "msg_1", "role": "assistant", "content": []}}),
        );
        events.push(
            json!({"type": "response.output_text.delta", "output_index": output,
            "content_index": 0, "delta": text}),
        );
        events.push(
            json!({"type": "response.output_item.done", "output_index": output,
            "item": {"type": "message", "id": "msg_1", "role": "assistant"}}),
        );
        output += 1;
    }
    for (call_id, args) in calls {
        events.push(
            json!({"type": "response.output_item.added", "output_index": output,
            "item": {"type": "function_call", "id": format!("fc_{call_id}"), "call_id": call_id,
                "name": TOOL, "arguments": ""}}),
        );
        let (first, second) = args.split_at(args.len() / 2);
        for part in [first, second] {
            events.push(json!({"type": "response.function_call_arguments.delta",
                "output_index": output, "delta": part}));
        }
        events.push(
            json!({"type": "response.output_item.done", "output_index": output,
            "item": {"type": "function_call", "id": format!("fc_{call_id}"), "call_id": call_id,
                "name": TOOL, "arguments": args}}),
        );
        output += 1;
    }
    events.push(json!({"type": "response.completed", "response": {"id": id, "status": "completed",
        "usage": {"input_tokens": 50, "output_tokens": 10, "input_tokens_details": {"cached_tokens": 0}}}}));
    // The same `event:` + `data:` framing as the Messages API.
    anthropic_sse(&events)
}

/// [`responses_parts`] as a whole reply.
pub fn responses_step(text: &str, calls: &[Call]) -> Reply {
    Reply::sse(responses_parts(text, calls))
}

/// [`openai_parts`] as a whole reply.
pub fn openai_step(text: &str, calls: &[Call]) -> Reply {
    Reply::sse(openai_parts(text, calls))
}

/// [`openai_named_parts`] as a whole reply.
pub fn openai_named_step(text: &str, calls: &[NamedCall]) -> Reply {
    Reply::sse(openai_named_parts(text, calls))
}

/// [`anthropic_parts`] as a whole reply.
pub fn anthropic_step(text: &str, calls: &[Call]) -> Reply {
    Reply::sse(anthropic_parts(text, calls))
}
