//! A `tools/call` result as the text the model reads.
//!
//! Text content is passed on; images, audio and embedded resources are
//! summarised with their type and size (no base64 in the context); links
//! are named. `isError` makes the result an error result. The whole text is
//! capped like other tools' outputs.

use serde_json::Value;

/// Most bytes of a result the model sees; the rest is cut with a note.
pub const MAX_OUTPUT: usize = 30_000;

/// The text of a result (its JSON form, as the server sent it) and whether
/// it is an error.
pub fn result_text(result: &Value) -> (String, bool) {
    let is_error = result
        .get("isError")
        .and_then(Value::as_bool)
        .unwrap_or(false);
    let mut parts: Vec<String> = Vec::new();
    for block in result
        .get("content")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        parts.push(block_text(block));
    }
    if parts.is_empty() {
        if let Some(structured) = result.get("structuredContent").filter(|v| !v.is_null()) {
            parts.push(structured.to_string());
        }
    }
    let text = match parts.is_empty() {
        true => "(no content)".to_string(),
        false => parts.join("\n"),
    };
    (cap(text), is_error)
}

fn block_text(block: &Value) -> String {
    let kind = block.get("type").and_then(Value::as_str).unwrap_or("");
    let str_of = |key: &str| block.get(key).and_then(Value::as_str).unwrap_or("");
    match kind {
        "text" => str_of("text").to_string(),
        "image" | "audio" => format!(
            "[{kind}: {}, {} bytes]",
            non_empty(str_of("mimeType"), "unknown type"),
            base64_len(str_of("data"))
        ),
        "resource" => {
            let resource = block.get("resource").cloned().unwrap_or(Value::Null);
            let uri = resource.get("uri").and_then(Value::as_str).unwrap_or("?");
            let mime = resource
                .get("mimeType")
                .and_then(Value::as_str)
                .unwrap_or("unknown type");
            match resource.get("text").and_then(Value::as_str) {
                Some(text) => format!("[resource {uri} ({mime})]\n{text}"),
                None => format!(
                    "[resource {uri}: {mime}, {} bytes]",
                    base64_len(resource.get("blob").and_then(Value::as_str).unwrap_or(""))
                ),
            }
        }
        "resource_link" => format!(
            "[resource link {}{}]",
            str_of("uri"),
            match str_of("name") {
                "" => String::new(),
                name => format!(" ({name})"),
            }
        ),
        other => format!("[{} content]", non_empty(other, "unknown")),
    }
}

fn non_empty<'a>(text: &'a str, otherwise: &'a str) -> &'a str {
    match text.is_empty() {
        true => otherwise,
        false => text,
    }
}

/// Decoded size of base64 text.
fn base64_len(data: &str) -> usize {
    let data = data.trim_end_matches('=');
    data.len() * 3 / 4
}

fn cap(text: String) -> String {
    if text.len() <= MAX_OUTPUT {
        return text;
    }
    let mut cut = MAX_OUTPUT;
    while !text.is_char_boundary(cut) {
        cut -= 1;
    }
    format!(
        "{}\n[output cut: {} of {} bytes shown]",
        &text[..cut],
        cut,
        text.len()
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn content_becomes_text_without_floods() {
        let (text, error) = result_text(&json!({"content": [
            {"type": "text", "text": "hello"},
            {"type": "image", "mimeType": "image/png", "data": "A".repeat(4000)},
            {"type": "resource", "resource": {"uri": "file:///a.txt", "mimeType": "text/plain", "text": "inside"}},
            {"type": "resource_link", "uri": "file:///b", "name": "b"}
        ]}));
        assert!(!error);
        assert!(
            text.starts_with("hello\n[image: image/png, 3000 bytes]"),
            "{text}"
        );
        assert!(text.contains("[resource file:///a.txt (text/plain)]\ninside"));
        assert!(text.contains("[resource link file:///b (b)]"));
        assert!(!text.contains("AAAA"));
        let (text, error) =
            result_text(&json!({"content": [{"type": "text", "text": "no"}], "isError": true}));
        assert!(error && text == "no");
        let (long, _) =
            result_text(&json!({"content": [{"type": "text", "text": "é".repeat(MAX_OUTPUT)}]}));
        assert!(long.len() < MAX_OUTPUT + 100 && long.ends_with("bytes shown]"));
    }
}
