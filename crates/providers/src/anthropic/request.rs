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
use crate::kept::Kept;
use pod_llm::{Item, ItemKind, ProviderRequest, Reasoning, ToolCall, ToolSpec};
use serde_json::{json, Value};
use std::borrow::Cow;

/// `max_tokens` is required by the API; this is used when no limit is
/// configured. Every current model accepts it and it leaves room for long
/// tool-call arguments (whole files).
pub(crate) const DEFAULT_MAX_TOKENS: u32 = 8192;

/// The tag runtime system items are wrapped in.
const REMINDER_OPEN: &str = "<system-reminder>";
const REMINDER_CLOSE: &str = "</system-reminder>";

/// The name under which items keep their encoding as content blocks of
/// this wire (see [`Item::wire`]). The blocks depend on the item alone,
/// never on the endpoint's settings (the cache markers are added per
/// request); one that did would need them in the name.
const WIRE: &str = "anthropic-messages";

/// The JSON body of a streamed Messages request, written from each item's
/// kept blocks: a history sent again is copied, not re-encoded. Only the
/// two blocks that carry this request's conversation markers are changed
/// on the way (the marker is appended to the block's object).
///
/// Key order and bytes are those of the `Value` the body used to be built
/// as (`serde_json` with `preserve_order`); the tests compare the two.
pub(crate) fn request_bytes(
    request: &ProviderRequest,
    endpoint: &Endpoint,
    kept: &Kept,
) -> Vec<u8> {
    let tools = &kept.tools;
    let marker = endpoint
        .cache
        .enabled
        .then(|| cache_control(endpoint.cache.ttl));
    let messages = messages(&request.history);
    let size = 512
        + request.system_prompt.len()
        + messages
            .items
            .iter()
            .map(|(_, blocks)| blocks.len() + 1)
            .sum::<usize>();
    let mut out = String::with_capacity(size);
    let push_json = |out: &mut String, value: Value| out.push_str(&value.to_string());
    out.push_str("{\"model\":");
    push_json(&mut out, json!(endpoint.model));
    out.push_str(",\"max_tokens\":");
    push_json(
        &mut out,
        json!(endpoint.max_output_tokens.unwrap_or(DEFAULT_MAX_TOKENS)),
    );
    out.push_str(",\"stream\":true");
    if !request.system_prompt.is_empty() {
        let text = kept.system.get(&request.system_prompt);
        out.push_str(",\"system\":");
        match &marker {
            // A marker needs the block form.
            Some(marker) => {
                out.push_str("[{\"type\":\"text\",\"text\":");
                out.push_str(&text);
                out.push_str(",\"cache_control\":");
                push_json(&mut out, marker.clone());
                out.push_str("}]");
            }
            None => out.push_str(&text),
        }
    }
    out.push_str(",\"messages\":");
    let marker_json = marker.as_ref().map(Value::to_string);
    write_messages(&mut out, &messages, marker_json.as_deref());
    if !request.tools.is_empty() {
        // The array carries the cache marker: its encodings differ by it.
        let encoding = format!("{WIRE} {}", marker_json.as_deref().unwrap_or(""));
        let tools = tools.get(&request.tools, &encoding, |specs| {
            let mut tools: Vec<Value> = specs.iter().map(tool).collect();
            if let (Some(marker), Some(last)) = (&marker, tools.last_mut()) {
                last["cache_control"] = marker.clone();
            }
            Value::Array(tools).to_string()
        });
        out.push_str(",\"tools\":");
        out.push_str(&tools);
    }
    match endpoint.thinking_budget {
        Some(budget) => {
            out.push_str(",\"thinking\":");
            push_json(
                &mut out,
                json!({"type": "enabled", "budget_tokens": budget}),
            );
            // The API rejects a temperature other than 1 with thinking on,
            // so a configured one is not sent.
        }
        None => {
            if let Some(temperature) = endpoint.temperature {
                out.push_str(",\"temperature\":");
                push_json(&mut out, json!(temperature));
            }
        }
    }
    out.push('}');
    out.into_bytes()
}

/// A cache breakpoint: the prefix up to and including the marked block is
/// written to the cache, and a later request that repeats it reads it.
fn cache_control(ttl: CacheTtl) -> Value {
    match ttl {
        CacheTtl::FiveMinutes => json!({"type": "ephemeral"}),
        CacheTtl::OneHour => json!({"type": "ephemeral", "ttl": "1h"}),
    }
}

/// The conversation as messages: consecutive items of one side make one
/// message, each item with its kept blocks (comma-separated block objects)
/// and whether it is a tool result. Items sit in one vector and messages
/// are ranges of it, so a long history costs no allocation per message.
struct Messages<'a> {
    items: Vec<(bool, Cow<'a, str>)>,
    messages: Vec<(Role, std::ops::Range<usize>)>,
}

/// Items grouped into alternating messages; tool results open the user
/// message that answers the calls (a reminder that landed between them
/// moves after them; order within each group is kept). Items without
/// blocks (the API rejects empty text) are left out.
fn messages(history: &[Item]) -> Messages<'_> {
    let mut out = Messages {
        items: Vec::with_capacity(history.len()),
        messages: Vec::new(),
    };
    for item in history {
        let blocks = item.wire(WIRE, |item| {
            let blocks: Vec<String> = blocks(item).1.iter().map(Value::to_string).collect();
            blocks.join(",")
        });
        if blocks.is_empty() {
            continue;
        }
        let role = role(item);
        let at = out.items.len();
        out.items
            .push((matches!(item.kind, ItemKind::ToolResult { .. }), blocks));
        match out.messages.last_mut() {
            Some((last, range)) if *last == role => range.end = at + 1,
            _ => out.messages.push((role, at..at + 1)),
        }
    }
    for (_, range) in &out.messages {
        out.items[range.clone()].sort_by_key(|(result, _)| !*result);
    }
    out
}

/// Writes the messages array. With caching on, two rolling breakpoints
/// mark the conversation (the API allows four in all; tools and system
/// take the other two): the last block of the last message, so the next
/// request reads everything up to here, and the last block of the user
/// message before it, where the previous request's end marker was (a turn
/// can add more than the 20 blocks the API looks back from a marker, and
/// this keeps that prefix reachable).
fn write_messages(out: &mut String, conversation: &Messages<'_>, marker: Option<&str>) {
    let messages = &conversation.messages;
    // At most two marked messages, found from the end.
    let mut marked = [usize::MAX; 2];
    if marker.is_some() {
        let mut count = 0;
        for (at, (role, _)) in messages.iter().enumerate().rev() {
            if count == 2 {
                break;
            }
            if count == 1 && *role != Role::User {
                continue;
            }
            marked[count] = at;
            count += 1;
        }
    }
    out.push('[');
    for (at, (role, range)) in messages.iter().enumerate() {
        if at > 0 {
            out.push(',');
        }
        out.push_str(match role {
            Role::User => "{\"role\":\"user\",\"content\":[",
            Role::Assistant => "{\"role\":\"assistant\",\"content\":[",
        });
        let items = &conversation.items[range.clone()];
        let last = items.len().saturating_sub(1);
        for (n, (_, blocks)) in items.iter().enumerate() {
            if n > 0 {
                out.push(',');
            }
            match (marker, marked.contains(&at) && n == last) {
                // The last block object gets the marker as its last key.
                (Some(marker), true) if blocks.ends_with('}') => {
                    out.push_str(&blocks[..blocks.len() - 1]);
                    out.push_str(",\"cache_control\":");
                    out.push_str(marker);
                    out.push('}');
                }
                _ => out.push_str(blocks),
            }
        }
        out.push_str("]}");
    }
    out.push(']');
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

fn role(item: &Item) -> Role {
    match item.kind {
        ItemKind::Assistant { .. } => Role::Assistant,
        _ => Role::User,
    }
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

#[cfg(test)]
mod tests {
    use super::*;
    use pod_llm::SystemKind;
    use serde_json::Map;
    use std::sync::Arc;

    // The body as it was built before items kept their encoding: one
    // `Value` for the whole request. The bytes sent must not change.
    fn value_body(request: &ProviderRequest, endpoint: &Endpoint) -> Vec<u8> {
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
        let mut messages = old_messages(&request.history);
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
        serde_json::to_vec(&Value::Object(body)).unwrap()
    }

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

    fn old_messages(history: &[Item]) -> Vec<Value> {
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

    fn call(id: &str, arguments: &str) -> ToolCall {
        ToolCall {
            id: id.into(),
            name: "read_file".into(),
            arguments: arguments.into(),
        }
    }

    fn assistant_item(text: &str, signed: bool, calls: Vec<ToolCall>) -> Item {
        Item::new(ItemKind::Assistant {
            text: text.into(),
            reasoning: Some(Reasoning {
                text: "look first".into(),
                signature: signed.then(|| "sig".into()),
            }),
            tool_calls: calls,
            usage: None,
        })
    }

    fn history() -> Vec<Item> {
        vec![
            Item::user("fix the \"bug\" in\nsrc/lib.rs — ünïcode"),
            Item::user(""),
            assistant_item(
                "",
                true,
                vec![
                    call("c1", r#"{"path":"src/lib.rs"}"#),
                    call("c2", "{not json"),
                ],
            ),
            Item::tool_result("c1", "fn main() {}\n\t\u{1}", false),
            // Lands between the calls and their last result: sent after them.
            Item::system(
                SystemKind::Reminder,
                "<system-reminder>plan</system-reminder>",
            ),
            Item::system(SystemKind::Notification, "a note"),
            Item::tool_result("c2", "invalid arguments", true),
            assistant_item("", false, Vec::new()),
            assistant_item("done", false, Vec::new()),
            Item::user("and now?"),
        ]
    }

    fn request(history: Vec<Item>, system_prompt: &str, tools: Vec<ToolSpec>) -> ProviderRequest {
        ProviderRequest {
            system_prompt: system_prompt.into(),
            history: Arc::new(history),
            tools: tools.into(),
            cache_key: None,
            history_id: None,
        }
    }

    fn spec(name: &str) -> ToolSpec {
        ToolSpec {
            name: name.into(),
            description: "Reads a file.".into(),
            parameters: json!({"type": "object", "properties": {"path": {"type": "string"}}})
                .into(),
        }
    }

    fn same_bytes(request: &ProviderRequest, endpoint: &Endpoint) {
        // A fresh kept-tools cache per endpoint: the array depends on its
        // cache setting, as it does per provider.
        let tools = Kept::default();
        for _ in 0..2 {
            assert_eq!(
                String::from_utf8(request_bytes(request, endpoint, &tools)).unwrap(),
                String::from_utf8(value_body(request, endpoint)).unwrap()
            );
        }
    }

    #[test]
    fn bytes_are_those_of_the_whole_value_encoding() {
        let mut endpoint = Endpoint::new("http://127.0.0.1:1", "claude \"x\"");
        for (system, specs) in [
            ("", vec![]),
            ("You are\nhelpful.", vec![spec("a"), spec("b")]),
        ] {
            // The same items each time: the second round uses kept blocks.
            let request = request(history(), system, specs);
            endpoint.cache.enabled = true;
            same_bytes(&request, &endpoint);
            endpoint.cache.ttl = CacheTtl::OneHour;
            endpoint.thinking_budget = Some(2048);
            same_bytes(&request, &endpoint);
            endpoint.cache.enabled = false;
            endpoint.thinking_budget = None;
            endpoint.temperature = Some(0.3);
            endpoint.max_output_tokens = Some(1000);
            same_bytes(&request, &endpoint);
        }
        // Every prefix of the history: the markers move with the end.
        let endpoint = Endpoint::new("http://127.0.0.1:1", "m");
        let items = history();
        for end in 0..=items.len() {
            same_bytes(
                &request(items[..end].to_vec(), "sys", vec![spec("a")]),
                &endpoint,
            );
        }
    }

    #[test]
    fn an_edited_copy_is_encoded_afresh() {
        let endpoint = Endpoint::new("http://127.0.0.1:1", "m");
        let tools = Kept::default();
        let original = request(history(), "", vec![]);
        let before = request_bytes(&original, &endpoint, &tools);
        let mut edited = original.clone();
        if let ItemKind::User { text } = &mut Arc::make_mut(&mut edited.history)[0].kind {
            *text = "a different prompt".into();
        }
        let after = String::from_utf8(request_bytes(&edited, &endpoint, &tools)).unwrap();
        assert!(after.contains("a different prompt"), "{after}");
        assert_eq!(after.into_bytes(), value_body(&edited, &endpoint));
        assert_eq!(request_bytes(&original, &endpoint, &tools), before);
    }
}
