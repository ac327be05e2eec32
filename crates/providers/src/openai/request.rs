//! History -> Chat Completions request body.
//!
//! The mapping is 1:1: the system prompt and runtime system items become
//! `role: "system"` messages in place, assistant tool calls become
//! `tool_calls`, tool results become `role: "tool"` messages. The one
//! reordering: nothing may sit between tool calls and their results.

use crate::endpoint::Endpoint;
use pod_llm::{Item, ItemKind, ProviderRequest, Reasoning, ToolCall, ToolSpec};
use serde_json::{json, Map, Value};

/// The JSON body of a streamed Chat Completions request.
pub(crate) fn request_body(request: &ProviderRequest, endpoint: &Endpoint) -> Value {
    let mut messages = Vec::with_capacity(request.history.len() + 1);
    if !request.system_prompt.is_empty() {
        messages.push(json!({"role": "system", "content": request.system_prompt}));
    }
    messages.extend(messages_in_api_order(&request.history));
    let mut body = Map::new();
    body.insert("model".into(), json!(endpoint.model));
    body.insert("messages".into(), Value::Array(messages));
    body.insert("stream".into(), json!(true));
    // Without this OpenAI sends no usage when streaming; servers that send
    // usage anyway ignore it.
    body.insert("stream_options".into(), json!({"include_usage": true}));
    if !request.tools.is_empty() {
        body.insert("tools".into(), request.tools.iter().map(tool).collect());
    }
    if let Some(max) = endpoint.max_output_tokens {
        // `max_tokens` rather than `max_completion_tokens`: every compatible
        // server (DeepSeek, Ollama, llama.cpp, vLLM) understands it.
        body.insert("max_tokens".into(), json!(max));
    }
    if let Some(temperature) = endpoint.temperature {
        body.insert("temperature".into(), json!(temperature));
    }
    // Caching is automatic on this wire; the prefix stays byte-stable
    // (system prompt, then history in order, tools in registration order,
    // nothing per-request early). The key routes a session's requests to
    // one cache where the server knows it.
    if let (true, Some(key)) = (endpoint.cache.send_key, &request.cache_key) {
        body.insert("prompt_cache_key".into(), json!(key.as_ref()));
    }
    Value::Object(body)
}

fn tool(spec: &ToolSpec) -> Value {
    json!({
        "type": "function",
        "function": {
            "name": spec.name,
            "description": spec.description,
            "parameters": spec.parameters,
        }
    })
}

/// One message per item, in history order, except that a message landing
/// between an assistant's tool calls and their last result is moved after
/// that result: the API rejects anything between the two (a reminder the
/// runtime injected while tools ran is the usual case).
fn messages_in_api_order(history: &[Item]) -> Vec<Value> {
    let mut messages = Vec::with_capacity(history.len());
    let mut open: Vec<&str> = Vec::new();
    let mut deferred = Vec::new();
    for item in history {
        match &item.kind {
            ItemKind::ToolResult { call_id, .. } => {
                messages.push(message(item));
                open.retain(|id| id != call_id);
                if open.is_empty() {
                    messages.append(&mut deferred);
                }
            }
            ItemKind::Assistant { tool_calls, .. } => {
                messages.append(&mut deferred);
                messages.push(message(item));
                open = tool_calls.iter().map(|c| c.id.as_str()).collect();
            }
            _ if open.is_empty() => messages.push(message(item)),
            _ => deferred.push(message(item)),
        }
    }
    messages.append(&mut deferred);
    messages
}

fn message(item: &Item) -> Value {
    match &item.kind {
        ItemKind::User { text } => json!({"role": "user", "content": text}),
        ItemKind::System { text, .. } => json!({"role": "system", "content": text}),
        ItemKind::ToolResult {
            call_id, content, ..
        } => json!({"role": "tool", "tool_call_id": call_id, "content": content}),
        ItemKind::Assistant {
            text,
            reasoning,
            tool_calls,
            ..
        } => assistant(text, reasoning.as_ref(), tool_calls),
    }
}

fn assistant(text: &str, reasoning: Option<&Reasoning>, calls: &[ToolCall]) -> Value {
    let mut message = Map::new();
    message.insert("role".into(), json!("assistant"));
    // A tool-calling message with no text carries `content: null`, as the
    // API itself returns it; some servers reject an empty string there.
    let content = if text.is_empty() && !calls.is_empty() {
        Value::Null
    } else {
        json!(text)
    };
    message.insert("content".into(), content);
    if !calls.is_empty() {
        let calls: Vec<Value> = calls
            .iter()
            .map(|call| {
                json!({
                    "id": call.id,
                    "type": "function",
                    // Sent back verbatim, even when it is not valid JSON:
                    // the model should see what it actually produced.
                    "function": {"name": call.name, "arguments": call.arguments},
                })
            })
            .collect();
        message.insert("tool_calls".into(), Value::Array(calls));
        // DeepSeek's rule: reasoning of a response that called tools must be
        // sent back on every later request (it answers 400 otherwise);
        // reasoning of a plain answer is not sent back. Signed reasoning is
        // Anthropic's and means nothing to an OpenAI-compatible server.
        if let Some(reasoning) = reasoning.filter(|r| r.signature.is_none() && !r.text.is_empty()) {
            message.insert("reasoning_content".into(), json!(reasoning.text));
        }
    }
    Value::Object(message)
}
