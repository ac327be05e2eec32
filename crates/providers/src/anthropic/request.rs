//! History -> Messages request body.
//!
//! Anthropic has no mid-conversation system role and requires user and
//! assistant turns to alternate, so: runtime system items become user-side
//! text wrapped in `<system-reminder>` tags (the model is told apart from
//! the user by the tag, never by guessing), tool results become
//! `tool_result` blocks, and consecutive items of one side merge into one
//! message, tool results first as the API requires.
//!
//! Prompt caching: with caching on (the default), the last tool, the system
//! prompt and two rolling points in the conversation carry `cache_control`
//! (at most the API's four). Everything before a marker is byte-stable from
//! one request to the next: tools in registration order, the system prompt
//! unchanged, history only appended to (reminders and notifications are
//! items appended at the end; `pre_llm_request` edits are the caller's).

use crate::config::CacheTtl;
use crate::endpoint::Endpoint;
use pod_llm::{Item, ItemKind, ProviderRequest, Reasoning, ToolCall, ToolSpec};
use serde_json::{json, Map, Value};

/// `max_tokens` is required by the API; this is used when no limit is
/// configured. Every current model accepts it and it leaves room for long
/// tool-call arguments (whole files).
pub(crate) const DEFAULT_MAX_TOKENS: u32 = 8192;

/// The tag runtime system items are wrapped in.
const REMINDER_OPEN: &str = "<system-reminder>";
const REMINDER_CLOSE: &str = "</system-reminder>";

/// The JSON body of a streamed Messages request.
pub(crate) fn request_body(request: &ProviderRequest, endpoint: &Endpoint) -> Value {
    let mut body = Map::new();
    body.insert("model".into(), json!(endpoint.model));
    let max_tokens = endpoint.max_output_tokens.unwrap_or(DEFAULT_MAX_TOKENS);
    body.insert("max_tokens".into(), json!(max_tokens));
    body.insert("stream".into(), json!(true));
    let marker = endpoint
        .cache
        .enabled
        .then(|| cache_control(endpoint.cache.ttl));
    if !request.system_prompt.is_empty() {
        let system = match &marker {
            // A marker needs the block form.
            Some(marker) => json!([{
                "type": "text",
                "text": request.system_prompt,
                "cache_control": marker,
            }]),
            None => json!(request.system_prompt),
        };
        body.insert("system".into(), system);
    }
    let mut messages = messages(&request.history);
    if let Some(marker) = &marker {
        mark_conversation(&mut messages, marker);
    }
    body.insert("messages".into(), Value::Array(messages));
    if !request.tools.is_empty() {
        let mut tools: Vec<Value> = request.tools.iter().map(tool).collect();
        if let (Some(marker), Some(last)) = (&marker, tools.last_mut()) {
            last["cache_control"] = marker.clone();
        }
        body.insert("tools".into(), Value::Array(tools));
    }
    match endpoint.thinking_budget {
        Some(budget) => {
            body.insert(
                "thinking".into(),
                json!({"type": "enabled", "budget_tokens": budget}),
            );
            // The API rejects a temperature other than 1 with thinking on,
            // so a configured one is not sent.
        }
        None => {
            if let Some(temperature) = endpoint.temperature {
                body.insert("temperature".into(), json!(temperature));
            }
        }
    }
    Value::Object(body)
}

/// A cache breakpoint: the prefix up to and including the marked block is
/// written to the cache, and a later request that repeats it reads it.
fn cache_control(ttl: CacheTtl) -> Value {
    match ttl {
        CacheTtl::FiveMinutes => json!({"type": "ephemeral"}),
        CacheTtl::OneHour => json!({"type": "ephemeral", "ttl": "1h"}),
    }
}

/// Marks the conversation with two rolling breakpoints (the API allows four
/// in all; tools and system take the other two): the last block of the
/// last message, so the next request reads everything up to here, and the
/// last block of the user message before it, where the previous request's
/// end marker was (a turn can add more than the 20 blocks the API looks
/// back from a marker, and this keeps that prefix reachable).
fn mark_conversation(messages: &mut [Value], marker: &Value) {
    let mut marked = 0;
    for message in messages.iter_mut().rev() {
        if marked == 2 {
            break;
        }
        if marked == 1 && message["role"] != "user" {
            continue;
        }
        if let Some(block) = message["content"]
            .as_array_mut()
            .and_then(|blocks| blocks.last_mut())
        {
            block["cache_control"] = marker.clone();
            marked += 1;
        }
    }
}

fn tool(spec: &ToolSpec) -> Value {
    json!({
        "name": spec.name,
        "description": spec.description,
        "input_schema": spec.parameters,
    })
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Role {
    User,
    Assistant,
}

fn messages(history: &[Item]) -> Vec<Value> {
    let mut turns: Vec<(Role, Vec<Value>)> = Vec::new();
    for item in history {
        let (role, blocks) = blocks(item);
        if blocks.is_empty() {
            continue;
        }
        match turns.last_mut() {
            Some((last, content)) if *last == role => content.extend(blocks),
            _ => turns.push((role, blocks)),
        }
    }
    turns
        .into_iter()
        .map(|(role, mut content)| {
            let role = match role {
                Role::User => "user",
                Role::Assistant => "assistant",
            };
            // Tool results must open the user message that answers the
            // calls; a reminder that landed between them moves after them.
            // The sort is stable, so order within each group is kept.
            content.sort_by_key(|block| block["type"] != "tool_result");
            json!({"role": role, "content": content})
        })
        .collect()
}

fn blocks(item: &Item) -> (Role, Vec<Value>) {
    match &item.kind {
        ItemKind::User { text } => (Role::User, text_block(text)),
        ItemKind::System { text, .. } => (Role::User, text_block(&as_reminder(text))),
        ItemKind::ToolResult {
            call_id,
            content,
            is_error,
            ..
        } => {
            let mut block = json!({
                "type": "tool_result",
                "tool_use_id": call_id,
                "content": content,
            });
            if *is_error {
                block["is_error"] = json!(true);
            }
            (Role::User, vec![block])
        }
        ItemKind::Assistant {
            text,
            reasoning,
            tool_calls,
            ..
        } => (
            Role::Assistant,
            assistant(text, reasoning.as_ref(), tool_calls),
        ),
    }
}

/// The API rejects empty text blocks.
fn text_block(text: &str) -> Vec<Value> {
    if text.is_empty() {
        Vec::new()
    } else {
        vec![json!({"type": "text", "text": text})]
    }
}

/// Wraps runtime text in `<system-reminder>` unless it already is.
fn as_reminder(text: &str) -> String {
    if text.trim_start().starts_with(REMINDER_OPEN) {
        text.to_string()
    } else {
        format!("{REMINDER_OPEN}\n{text}\n{REMINDER_CLOSE}")
    }
}

fn assistant(text: &str, reasoning: Option<&Reasoning>, calls: &[ToolCall]) -> Vec<Value> {
    let mut blocks = Vec::new();
    // Thinking goes back first and with its signature, as the API requires
    // when tools are in play; unsigned reasoning (from another provider)
    // cannot be verified by the API and is left out.
    if let Some(Reasoning {
        text: thinking,
        signature: Some(signature),
    }) = reasoning
    {
        blocks.push(json!({"type": "thinking", "thinking": thinking, "signature": signature}));
    }
    blocks.extend(text_block(text));
    for call in calls {
        blocks.push(json!({
            "type": "tool_use",
            "id": call.id,
            "name": call.name,
            "input": tool_input(&call.arguments),
        }));
    }
    blocks
}

/// `input` must be an object. Arguments the model sent that are not a JSON
/// object were answered with an error result; the call goes back with an
/// empty input next to that result.
fn tool_input(arguments: &str) -> Value {
    match serde_json::from_str::<Value>(arguments) {
        Ok(value @ Value::Object(_)) => value,
        _ => json!({}),
    }
}
