//! History -> Chat Completions request body.
//!
//! The mapping is 1:1: the system prompt and runtime system items become
//! `role: "system"` messages in place, assistant tool calls become
//! `tool_calls`, tool results become `role: "tool"` messages. The one
//! reordering: nothing may sit between tool calls and their results.

use crate::body::Body;
use crate::endpoint::Endpoint;
use crate::kept::Kept;
use pod_llm::{Item, ItemKind, ProviderRequest, Reasoning, ToolCall, ToolSpec};
use serde_json::{json, Value};

/// The name under which items keep their encoding as a message of this
/// wire (see [`Item::wire`]). The encoding depends on the item alone, never
/// on the endpoint's settings; one that did would need them in the name.
const WIRE: &str = "openai-chat";

/// The JSON body of a streamed Chat Completions request, written from each
/// item's kept message: a history sent again is copied, not re-encoded.
///
/// Key order and bytes are those of the `Value` the body used to be built
/// as (`serde_json` with `preserve_order`); the tests compare the two.
///
/// A request of the committed history the last one was made of (same
/// `HistoryId`) starts from the last body's messages up to where their
/// order was settled ([`crate::kept::HistoryJson`]), sent as the pieces
/// they were: a long session's request costs its new items, neither a pass
/// over every item nor a copy of the history. The tools array and the
/// system prompt, shared with other requests, are pieces too ([`Body`]).
pub(crate) fn request_bytes(request: &ProviderRequest, endpoint: &Endpoint, kept: &Kept) -> Body {
    let reused = kept.history.get(request.history_id, &request.history);
    let from = reused.as_ref().map_or(0, |(_, items)| *items);
    let mut pieces = reused.map(|(pieces, _)| pieces).unwrap_or_default();
    let (order, settled) = in_api_order_settled(&request.history[from..]);
    let tools = (!request.tools.is_empty()).then(|| {
        kept.tools.get(&request.tools, WIRE, |specs| {
            Value::Array(specs.iter().map(tool).collect()).to_string()
        })
    });
    // Bytes, not a String: every piece is JSON this function or serde
    // wrote, and nothing is checked again for UTF-8.
    let push_json =
        |out: &mut Vec<u8>, value: Value| out.extend_from_slice(value.to_string().as_bytes());
    let mut body = Body::default();
    let mut head = Vec::with_capacity(64);
    head.extend_from_slice(b"{\"model\":");
    push_json(&mut head, json!(endpoint.model));
    head.extend_from_slice(b",\"messages\":[");
    if !request.system_prompt.is_empty() {
        head.extend_from_slice(b"{\"role\":\"system\",\"content\":");
        body.push(head.into());
        body.push(shared(kept.system.get(&request.system_prompt)));
        head = b"}".to_vec();
        if !pieces.is_empty() || !order.is_empty() {
            head.push(b',');
        }
    }
    body.push(head.into());
    // The settled messages of the last request, as they were sent.
    for piece in &pieces {
        body.push(piece.clone());
    }
    // Then the new ones, the settled of them kept for the next request.
    // A settled message is written here once and lives on in the kept
    // pieces (a committed request's history is sent from them), so it is
    // not also kept on its item; one sent again in the next request (an
    // open call, a held-back reminder) keeps its encoding on the item.
    let keeps = request.history_id.is_some();
    let mut new = Vec::new();
    let mut settled_end = 0;
    for (n, item) in order.iter().enumerate() {
        if n > 0 || !pieces.is_empty() {
            new.push(b',');
        }
        if keeps && n < settled {
            // Writing borrowed strings into a `Vec` cannot fail.
            let _ = serde_json::to_writer(&mut new, &message(item));
        } else {
            new.extend_from_slice(
                item.wire(WIRE, |item| {
                    // Serializing borrowed strings into a `String` cannot fail.
                    serde_json::to_string(&message(item)).unwrap_or_default()
                })
                .as_bytes(),
            );
        }
        if n + 1 == settled {
            settled_end = new.len();
        }
    }
    // Kept for the rest of the session: without the room the writes left.
    new.shrink_to_fit();
    let new = bytes::Bytes::from(new);
    body.push(new.clone());
    // Without `include_usage` OpenAI sends no usage when streaming; servers
    // that send usage anyway ignore it.
    let mut tail = b"],\"stream\":true,\"stream_options\":{\"include_usage\":true}".to_vec();
    if let Some(tools) = tools {
        tail.extend_from_slice(b",\"tools\":");
        body.push(tail.into());
        body.push(shared(tools));
        tail = Vec::new();
    }
    if let Some(max) = endpoint.max_output_tokens {
        // `max_tokens` rather than `max_completion_tokens`: every compatible
        // server (DeepSeek, Ollama, llama.cpp, vLLM) understands it.
        tail.extend_from_slice(b",\"max_tokens\":");
        push_json(&mut tail, json!(max));
    }
    if let Some(temperature) = endpoint.temperature {
        tail.extend_from_slice(b",\"temperature\":");
        push_json(&mut tail, json!(temperature));
    }
    // Only when set: servers other than OpenAI's may reject the field.
    if let Some(effort) = endpoint.reasoning_effort {
        tail.extend_from_slice(b",\"reasoning_effort\":");
        push_json(&mut tail, json!(effort.as_str()));
    }
    // Caching is automatic on this wire; the prefix stays byte-stable
    // (system prompt, then history in order, tools in registration order,
    // nothing per-request early). The key routes a session's requests to
    // one cache where the server knows it.
    if let (true, Some(key)) = (endpoint.cache.send_key, &request.cache_key) {
        tail.extend_from_slice(b",\"prompt_cache_key\":");
        push_json(&mut tail, json!(key.as_ref()));
    }
    tail.push(b'}');
    body.push(tail.into());
    if settled_end > 0 {
        pieces.push(new.slice(..settled_end));
    }
    kept.history
        .keep(request.history_id, &request.history, from + settled, pieces);
    body
}

/// Text many requests share, as a piece of a body: no copy.
fn shared(text: std::sync::Arc<str>) -> bytes::Bytes {
    struct Text(std::sync::Arc<str>);
    impl AsRef<[u8]> for Text {
        fn as_ref(&self) -> &[u8] {
            self.0.as_bytes()
        }
    }
    bytes::Bytes::from_owner(Text(text))
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

/// The items in message order: history order, except that an item landing
/// between an assistant's tool calls and their last result is moved after
/// that result: the API rejects anything between the two (a reminder the
/// runtime injected while tools ran is the usual case).
pub(crate) fn in_api_order(history: &[Item]) -> Vec<&Item> {
    in_api_order_settled(history).0
}

/// [`in_api_order`], and how many items lead the history whose order is
/// settled: after them no call was open and nothing held back, so items
/// added later are placed after them whatever they are (the first that
/// many messages are those items, in history order).
fn in_api_order_settled(history: &[Item]) -> (Vec<&Item>, usize) {
    let mut messages = Vec::with_capacity(history.len());
    let mut open: Vec<&str> = Vec::new();
    let mut deferred = Vec::new();
    let mut settled = 0;
    for (n, item) in history.iter().enumerate() {
        match &item.kind {
            ItemKind::ToolResult { call_id, .. } => {
                messages.push(item);
                open.retain(|id| id != call_id);
                if open.is_empty() {
                    messages.append(&mut deferred);
                }
            }
            ItemKind::Assistant { tool_calls, .. } => {
                messages.append(&mut deferred);
                messages.push(item);
                open = tool_calls.iter().map(|c| c.id.as_str()).collect();
            }
            _ if open.is_empty() => messages.push(item),
            _ => deferred.push(item),
        }
        if open.is_empty() && deferred.is_empty() {
            settled = n + 1;
        }
    }
    messages.append(&mut deferred);
    (messages, settled)
}

/// One message of the body, borrowed from its item and written by serde
/// straight into the body (no `Value` tree built and dropped per message).
/// Field order is the bytes' order.
#[derive(serde::Serialize)]
#[serde(tag = "role", rename_all = "lowercase")]
enum Message<'a> {
    User {
        content: &'a str,
    },
    System {
        content: &'a str,
    },
    Tool {
        tool_call_id: &'a str,
        content: &'a str,
    },
    Assistant {
        /// `None` (`null`) for a tool-calling message with no text, as the
        /// API itself returns it; some servers reject an empty string.
        content: Option<&'a str>,
        #[serde(skip_serializing_if = "Option::is_none")]
        tool_calls: Option<Vec<CallMessage<'a>>>,
        #[serde(skip_serializing_if = "Option::is_none")]
        reasoning_content: Option<&'a str>,
    },
}

#[derive(serde::Serialize)]
struct CallMessage<'a> {
    id: &'a str,
    #[serde(rename = "type")]
    kind: &'static str,
    function: FunctionMessage<'a>,
}

#[derive(serde::Serialize)]
struct FunctionMessage<'a> {
    name: &'a str,
    /// Sent back verbatim, even when it is not valid JSON: the model
    /// should see what it actually produced.
    arguments: &'a str,
}

fn message(item: &Item) -> Message<'_> {
    match &item.kind {
        ItemKind::User { text } => Message::User { content: text },
        ItemKind::System { text, .. } => Message::System { content: text },
        ItemKind::ToolResult {
            call_id, content, ..
        } => Message::Tool {
            tool_call_id: call_id,
            content,
        },
        ItemKind::Assistant {
            text,
            reasoning,
            tool_calls,
            ..
        } => assistant(text, reasoning.as_ref(), tool_calls),
    }
}

fn assistant<'a>(
    text: &'a str,
    reasoning: Option<&'a Reasoning>,
    calls: &'a [ToolCall],
) -> Message<'a> {
    if calls.is_empty() {
        return Message::Assistant {
            content: Some(text),
            tool_calls: None,
            reasoning_content: None,
        };
    }
    let tool_calls = calls
        .iter()
        .map(|call| CallMessage {
            id: &call.id,
            kind: "function",
            function: FunctionMessage {
                name: &call.name,
                arguments: &call.arguments,
            },
        })
        .collect();
    Message::Assistant {
        content: (!text.is_empty()).then_some(text),
        tool_calls: Some(tool_calls),
        // DeepSeek's rule: reasoning of a response that called tools must
        // be sent back on every later request (it answers 400 otherwise);
        // reasoning of a plain answer is not sent back. Signed reasoning is
        // Anthropic's and means nothing to an OpenAI-compatible server.
        reasoning_content: reasoning
            .filter(|r| r.signature.is_none() && !r.text.is_empty())
            .map(|r| r.text.as_str()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kept::MAX_PIECES;
    use pod_llm::SystemKind;
    use serde_json::Map;
    use std::sync::Arc;

    /// Each message as the `Value` it used to be built as.
    fn value_message(item: &Item) -> Value {
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
            } => value_assistant(text, reasoning.as_ref(), tool_calls),
        }
    }

    fn value_assistant(text: &str, reasoning: Option<&Reasoning>, calls: &[ToolCall]) -> Value {
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
            if let Some(reasoning) =
                reasoning.filter(|r| r.signature.is_none() && !r.text.is_empty())
            {
                message.insert("reasoning_content".into(), json!(reasoning.text));
            }
        }
        Value::Object(message)
    }

    /// The body as it was built before items kept their encoding: one
    /// `Value` for the whole request. The bytes sent must not change.
    fn value_body(request: &ProviderRequest, endpoint: &Endpoint) -> Vec<u8> {
        let mut messages = Vec::new();
        if !request.system_prompt.is_empty() {
            messages.push(json!({"role": "system", "content": request.system_prompt}));
        }
        messages.extend(
            in_api_order(&request.history)
                .into_iter()
                .map(value_message),
        );
        let mut body = Map::new();
        body.insert("model".into(), json!(endpoint.model));
        body.insert("messages".into(), Value::Array(messages));
        body.insert("stream".into(), json!(true));
        body.insert("stream_options".into(), json!({"include_usage": true}));
        if !request.tools.is_empty() {
            body.insert("tools".into(), request.tools.iter().map(tool).collect());
        }
        if let Some(max) = endpoint.max_output_tokens {
            body.insert("max_tokens".into(), json!(max));
        }
        if let Some(temperature) = endpoint.temperature {
            body.insert("temperature".into(), json!(temperature));
        }
        if let Some(effort) = endpoint.reasoning_effort {
            body.insert("reasoning_effort".into(), json!(effort.as_str()));
        }
        if let (true, Some(key)) = (endpoint.cache.send_key, &request.cache_key) {
            body.insert("prompt_cache_key".into(), json!(key.as_ref()));
        }
        serde_json::to_vec(&Value::Object(body)).unwrap()
    }

    fn call(id: &str, arguments: &str) -> ToolCall {
        ToolCall {
            id: id.into(),
            name: "read_file".into(),
            arguments: arguments.into(),
        }
    }

    fn history() -> Vec<Item> {
        vec![
            Item::user("fix the \"bug\" in\nsrc/lib.rs — ünïcode"),
            Item::new(ItemKind::Assistant {
                text: String::new(),
                reasoning: Some(Reasoning {
                    text: "look first".into(),
                    signature: None,
                }),
                tool_calls: vec![
                    call("c1", r#"{"path":"src/lib.rs"}"#),
                    call("c2", "{not json"),
                ],
                usage: None,
            }),
            Item::tool_result("c1", "fn main() {}\n\t\u{1}", false),
            // Lands between the calls and their last result: sent after it.
            Item::system(
                SystemKind::Reminder,
                "<system-reminder>plan</system-reminder>",
            ),
            Item::tool_result("c2", "invalid arguments", true),
            // Text beside a call; signed reasoning is not sent back.
            Item::new(ItemKind::Assistant {
                text: "Reading it again.".into(),
                reasoning: Some(Reasoning {
                    text: "signed".into(),
                    signature: Some("sig".into()),
                }),
                tool_calls: vec![call("c3", "{}")],
                usage: None,
            }),
            Item::tool_result("c3", "", false),
            // No text and no call: an empty content, not `null`.
            Item::new(ItemKind::Assistant {
                text: String::new(),
                reasoning: None,
                tool_calls: Vec::new(),
                usage: None,
            }),
            Item::new(ItemKind::Assistant {
                text: "done".into(),
                reasoning: Some(Reasoning {
                    text: "not sent back".into(),
                    signature: None,
                }),
                tool_calls: Vec::new(),
                usage: None,
            }),
        ]
    }

    fn request(history: Vec<Item>, system_prompt: &str, tools: Vec<ToolSpec>) -> ProviderRequest {
        ProviderRequest {
            system_prompt: system_prompt.into(),
            history: Arc::new(history),
            tools: tools.into(),
            cache_key: Some("session-1".into()),
            history_id: None,
        }
    }

    /// The body's bytes, put together.
    fn request_bytes(request: &ProviderRequest, endpoint: &Endpoint, kept: &Kept) -> Vec<u8> {
        super::request_bytes(request, endpoint, kept).to_vec()
    }

    fn spec() -> ToolSpec {
        ToolSpec {
            name: "read_file".into(),
            description: "Reads a file.".into(),
            parameters: json!({"type": "object", "properties": {"path": {"type": "string"}}})
                .into(),
        }
    }

    #[test]
    fn bytes_are_those_of_the_whole_value_encoding() {
        let mut endpoint = Endpoint::new("http://127.0.0.1:1/v1", "model \"x\"");
        let tools = Kept::default();
        for (system, specs) in [("", vec![]), ("You are\nhelpful.", vec![spec(), spec()])] {
            let request = request(history(), system, specs);
            assert_eq!(
                String::from_utf8(request_bytes(&request, &endpoint, &tools)).unwrap(),
                String::from_utf8(value_body(&request, &endpoint)).unwrap()
            );
        }
        endpoint.max_output_tokens = Some(4096);
        endpoint.temperature = Some(0.7);
        endpoint.reasoning_effort = Some(crate::ReasoningEffort::Low);
        endpoint.cache.send_key = true;
        let request = request(history(), "sys", vec![spec()]);
        let first = request_bytes(&request, &endpoint, &tools);
        assert_eq!(first, value_body(&request, &endpoint));
        // The second time the items' kept encodings are used: same bytes.
        assert_eq!(request_bytes(&request, &endpoint, &tools), first);
    }

    #[test]
    fn a_growing_committed_history_starts_from_the_last_bodys_settled_messages() {
        let endpoint = Endpoint::new("http://127.0.0.1:1/v1", "m");
        let kept = Kept::default();
        let id = pod_llm::HistoryId::fresh();
        let all = history();
        // Every length of the committed history, in order, as a session's
        // requests see it: the bytes are the whole encoding's each time,
        // open calls and a held-back reminder included.
        for len in 1..=all.len() {
            let mut request = request(all[..len].to_vec(), "sys", vec![spec()]);
            request.history_id = Some(id);
            let body = request_bytes(&request, &endpoint, &kept);
            assert_eq!(
                String::from_utf8(body).unwrap(),
                String::from_utf8(value_body(&request, &endpoint)).unwrap(),
                "{len} items"
            );
        }
        // The whole history is settled: the next request reuses all of it.
        let (pieces, items) = kept.history.get(Some(id), &all).unwrap();
        assert_eq!(items, all.len());
        let json: Vec<u8> = pieces.iter().flat_map(|p| p.iter().copied()).collect();
        assert!(std::str::from_utf8(&json)
            .unwrap()
            .ends_with("\"content\":\"done\"}"));
        // Another history (a compaction, an edit) is not taken for it.
        assert!(kept
            .history
            .get(Some(pod_llm::HistoryId::fresh()), &all)
            .is_none());
        assert!(kept.history.get(None, &all).is_none());
        let mut other = history();
        other.truncate(3);
        assert!(kept.history.get(Some(id), &other).is_none(), "shorter");
        let mut grown = all.clone();
        grown.push(Item::user("more"));
        let mut request = request(grown, "", vec![]);
        request.history_id = Some(id);
        assert_eq!(
            request_bytes(&request, &endpoint, &kept),
            value_body(&request, &endpoint),
            "without a system prompt or tools"
        );
    }

    #[test]
    fn a_long_session_sends_its_kept_messages_as_they_were_and_few_pieces() {
        let endpoint = Endpoint::new("http://127.0.0.1:1/v1", "m");
        let kept = Kept::default();
        let id = pod_llm::HistoryId::fresh();
        let mut all = Vec::new();
        for turn in 0..100 {
            all.push(Item::user(format!("question {turn}")));
            all.push(Item::new(ItemKind::Assistant {
                text: format!("answer {turn}"),
                reasoning: None,
                tool_calls: Vec::new(),
                usage: None,
            }));
            let mut request = request(all.clone(), "sys", vec![spec()]);
            request.history_id = Some(id);
            let before = kept.history.get(Some(id), &all).map(|(pieces, _)| pieces);
            let body = super::request_bytes(&request, &endpoint, &kept);
            assert_eq!(
                body.to_vec(),
                value_body(&request, &endpoint),
                "turn {turn}"
            );
            // The messages kept from the last request went out as the very
            // bytes kept, not a copy of them.
            let (pieces, _) = kept.history.get(Some(id), &all).unwrap();
            assert!(pieces.len() <= MAX_PIECES, "{} pieces", pieces.len());
            if let Some(before) = before.filter(|b| b.len() < MAX_PIECES) {
                for (old, now) in before.iter().zip(&pieces) {
                    assert_eq!(old.as_ptr(), now.as_ptr(), "turn {turn}");
                }
            }
        }
    }

    #[test]
    fn an_edited_copy_is_encoded_afresh() {
        let endpoint = Endpoint::new("http://127.0.0.1:1/v1", "m");
        let tools = Kept::default();
        let original = request(history(), "", vec![]);
        let before = request_bytes(&original, &endpoint, &tools);
        // What an interceptor's edit does: copy-on-write, then change.
        let mut edited = original.clone();
        if let ItemKind::User { text } = &mut Arc::make_mut(&mut edited.history)[0].kind {
            *text = "a different prompt".into();
        }
        let after = String::from_utf8(request_bytes(&edited, &endpoint, &tools)).unwrap();
        assert!(after.contains("a different prompt"), "{after}");
        assert_eq!(after.into_bytes(), value_body(&edited, &endpoint));
        assert_eq!(request_bytes(&original, &endpoint, &tools), before);
    }

    #[test]
    fn new_tool_specs_replace_the_kept_array() {
        let endpoint = Endpoint::new("http://127.0.0.1:1/v1", "m");
        let tools = Kept::default();
        let one = request(vec![Item::user("hi")], "", vec![spec()]);
        let mut renamed = spec();
        renamed.name = "cat".into();
        let other = request(vec![Item::user("hi")], "", vec![renamed]);
        request_bytes(&one, &endpoint, &tools);
        let body: Value =
            serde_json::from_slice(&request_bytes(&other, &endpoint, &tools)).unwrap();
        assert_eq!(body["tools"][0]["function"]["name"], "cat");
    }
}
