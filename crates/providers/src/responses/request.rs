//! History -> Responses API request body.
//!
//! Items map to input items: user and runtime system items to messages,
//! an assistant item to its text message followed by one `function_call`
//! per call, a tool result to a `function_call_output`. The order is the
//! Chat Completions one (nothing between calls and their results), so a
//! prefix of one request's input is the input of an earlier request.

use crate::endpoint::Endpoint;
use crate::kept::Kept;
use pod_llm::{Item, ItemKind, ProviderRequest, ToolSpec};
use serde_json::{json, Value};

/// The name under which items keep their encoding as input items of this
/// wire (see [`Item::wire`]), when requests are sent whole.
const WIRE: &str = "openai-responses";

/// How the input of one request is written.
pub(crate) struct Input<'a> {
    /// The items to send, in API order.
    pub items: &'a [&'a Item],
    /// The stored response they follow, if any.
    pub previous_response_id: Option<&'a str>,
    /// Keep each item's encoding with the item: a request sent whole is
    /// sent whole again next time, so the encoding is reused.
    pub keep_encodings: bool,
}

/// Settings of the body that are not the input.
pub(crate) struct Envelope<'a> {
    pub endpoint: &'a Endpoint,
    pub kept: &'a Kept,
    /// Ask the server to store the response, so a later request can follow
    /// it.
    pub store: bool,
}

/// The JSON body of a streamed `POST /responses`.
pub(crate) fn request_bytes(
    request: &ProviderRequest,
    input: Input<'_>,
    envelope: &Envelope<'_>,
) -> Vec<u8> {
    let encoded: Vec<std::borrow::Cow<'_, str>> = input
        .items
        .iter()
        .map(|item| match input.keep_encodings {
            true => item.wire(WIRE, input_items),
            false => input_items(item).into(),
        })
        .filter(|entries| !entries.is_empty())
        .collect();
    let tools = (!request.tools.is_empty()).then(|| {
        envelope.kept.tools.get(&request.tools, WIRE, |specs| {
            Value::Array(specs.iter().map(tool).collect()).to_string()
        })
    });
    let size = 256
        + request.system_prompt.len()
        + encoded.iter().map(|e| e.len() + 1).sum::<usize>()
        + tools.as_ref().map_or(0, |t| t.len());
    let mut out = String::with_capacity(size);
    let push_json = |out: &mut String, value: Value| out.push_str(&value.to_string());
    let endpoint = envelope.endpoint;
    out.push_str("{\"model\":");
    push_json(&mut out, json!(endpoint.model));
    // Instructions are not carried over from a previous response: they go
    // with every request.
    if !request.system_prompt.is_empty() {
        out.push_str(",\"instructions\":");
        out.push_str(&envelope.kept.system.get(&request.system_prompt));
    }
    if let Some(id) = input.previous_response_id {
        out.push_str(",\"previous_response_id\":");
        push_json(&mut out, json!(id));
    }
    out.push_str(",\"input\":[");
    for (n, entries) in encoded.iter().enumerate() {
        if n > 0 {
            out.push(',');
        }
        out.push_str(entries);
    }
    out.push_str("],\"stream\":true,\"store\":");
    out.push_str(if envelope.store { "true" } else { "false" });
    if let Some(tools) = tools {
        out.push_str(",\"tools\":");
        out.push_str(&tools);
    }
    if let Some(max) = endpoint.max_output_tokens {
        out.push_str(",\"max_output_tokens\":");
        push_json(&mut out, json!(max));
    }
    if let Some(temperature) = endpoint.temperature {
        out.push_str(",\"temperature\":");
        push_json(&mut out, json!(temperature));
    }
    // Summaries of the reasoning are not asked for: OpenAI gives them only
    // to verified organisations and answers 400 otherwise.
    if let Some(effort) = endpoint.reasoning_effort {
        out.push_str(",\"reasoning\":");
        push_json(&mut out, json!({"effort": effort.as_str()}));
    }
    if let (true, Some(key)) = (endpoint.cache.send_key, &request.cache_key) {
        out.push_str(",\"prompt_cache_key\":");
        push_json(&mut out, json!(key.as_ref()));
    }
    out.push('}');
    out.into_bytes()
}

/// A function tool. `strict: false`: the API's default is strict schemas,
/// which need every property required and no additional properties; the
/// tools' own schemas are plain JSON Schema.
fn tool(spec: &ToolSpec) -> Value {
    json!({
        "type": "function",
        "name": spec.name,
        "description": spec.description,
        "parameters": spec.parameters,
        "strict": false,
    })
}

/// The input items one history item becomes, comma-separated (none for an
/// assistant item with neither text nor calls).
fn input_items(item: &Item) -> String {
    match &item.kind {
        ItemKind::User { text } => json!({"role": "user", "content": text}).to_string(),
        ItemKind::System { text, .. } => json!({"role": "system", "content": text}).to_string(),
        ItemKind::ToolResult {
            call_id, content, ..
        } => json!({"type": "function_call_output", "call_id": call_id, "output": content})
            .to_string(),
        ItemKind::Assistant {
            text, tool_calls, ..
        } => {
            // Reasoning is not sent back: this wire's reasoning items are
            // the server's (kept with a stored response), not text.
            let mut entries = Vec::with_capacity(tool_calls.len() + 1);
            if !text.is_empty() {
                entries.push(json!({"role": "assistant", "content": text}).to_string());
            }
            for call in tool_calls {
                // Sent back verbatim, even when not valid JSON.
                entries.push(
                    json!({"type": "function_call", "call_id": call.id,
                        "name": call.name, "arguments": call.arguments})
                    .to_string(),
                );
            }
            entries.join(",")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pod_llm::{SystemKind, ToolCall};
    use std::sync::Arc;

    fn body(request: &ProviderRequest, items: &[&Item], previous: Option<&str>) -> Value {
        body_for(
            &Endpoint::new("http://127.0.0.1:1/v1", "m"),
            request,
            items,
            previous,
        )
    }

    fn body_for(
        endpoint: &Endpoint,
        request: &ProviderRequest,
        items: &[&Item],
        previous: Option<&str>,
    ) -> Value {
        let kept = Kept::default();
        let bytes = request_bytes(
            request,
            Input {
                items,
                previous_response_id: previous,
                keep_encodings: true,
            },
            &Envelope {
                endpoint,
                kept: &kept,
                store: true,
            },
        );
        serde_json::from_slice(&bytes).unwrap()
    }

    #[test]
    fn items_become_input_items() {
        let history = vec![
            Item::user("hi"),
            Item::new(ItemKind::Assistant {
                text: "Looking.".into(),
                reasoning: None,
                tool_calls: vec![ToolCall {
                    id: "c1".into(),
                    name: "lookup".into(),
                    arguments: "{\"key\":".into(),
                }],
                usage: None,
            }),
            Item::tool_result("c1", "bad arguments", true),
            Item::system(SystemKind::Reminder, "Plan: 0 of 1 done."),
            Item::new(ItemKind::Assistant {
                text: String::new(),
                reasoning: None,
                tool_calls: vec![],
                usage: None,
            }),
        ];
        let request = ProviderRequest {
            system_prompt: "Be brief.".into(),
            history: Arc::new(history.clone()),
            tools: vec![ToolSpec {
                name: "lookup".into(),
                description: "Looks up.".into(),
                parameters: json!({"type": "object"}).into(),
            }]
            .into(),
            cache_key: None,
            history_id: None,
        };
        let items: Vec<&Item> = history.iter().collect();
        let body = body(&request, &items, None);
        assert_eq!(body["instructions"], "Be brief.");
        assert_eq!(body["store"], true);
        assert!(body.get("previous_response_id").is_none());
        assert!(body.get("reasoning").is_none());
        assert_eq!(
            body["input"],
            json!([
                {"role": "user", "content": "hi"},
                {"role": "assistant", "content": "Looking."},
                {"type": "function_call", "call_id": "c1", "name": "lookup", "arguments": "{\"key\":"},
                {"type": "function_call_output", "call_id": "c1", "output": "bad arguments"},
                {"role": "system", "content": "Plan: 0 of 1 done."},
            ])
        );
        assert_eq!(
            body["tools"],
            json!([{"type": "function", "name": "lookup", "description": "Looks up.",
                "parameters": {"type": "object"}, "strict": false}])
        );
        // Following a stored response: only the items given, and its id.
        let tail = body_of_tail(&request, &items[3..]);
        assert_eq!(tail["previous_response_id"], "resp_1");
        assert_eq!(
            tail["input"],
            json!([{"role": "system", "content": "Plan: 0 of 1 done."}])
        );
    }

    fn body_of_tail(request: &ProviderRequest, items: &[&Item]) -> Value {
        body(request, items, Some("resp_1"))
    }

    #[test]
    fn a_reasoning_effort_goes_with_every_request() {
        let history = [Item::user("hi")];
        let request = ProviderRequest {
            system_prompt: "".into(),
            history: Arc::new(history.to_vec()),
            tools: Arc::from(Vec::new()),
            cache_key: None,
            history_id: None,
        };
        let mut endpoint = Endpoint::new("http://127.0.0.1:1/v1", "m");
        endpoint.reasoning_effort = Some(crate::ReasoningEffort::High);
        let items: Vec<&Item> = history.iter().collect();
        let body = body_for(&endpoint, &request, &items, Some("resp_1"));
        assert_eq!(body["reasoning"], json!({"effort": "high"}));
        assert!(body.get("instructions").is_none());
    }
}
