//! What a provider keeps between requests so that a long session is not
//! re-encoded for each one: the tools array, while the registry hands out
//! the same specs, and the system prompt's JSON string. (History items keep their own encodings, see
//! [`pod_llm::Item::wire`].)

use parking_lot::Mutex;
use pod_llm::ToolSpec;
use std::sync::Arc;

/// What one provider keeps between requests.
#[derive(Debug, Default)]
pub(crate) struct Kept {
    /// The tools array.
    pub tools: ToolsJson,
    /// The system prompt as a JSON string.
    pub system: StringJson,
}

/// The specs a tools array was encoded from, and that array's JSON.
type KeptTools = (Arc<[ToolSpec]>, Arc<str>);

/// The tools array of the last request.
#[derive(Debug, Default)]
pub(crate) struct ToolsJson(Mutex<Option<KeptTools>>);

impl ToolsJson {
    /// The JSON of `tools` as `encode` writes it, encoded again only when
    /// the specs are not the ones of the last call (registries build their
    /// specs once and share them, so a session's requests all hit).
    pub fn get(&self, tools: &Arc<[ToolSpec]>, encode: impl Fn(&[ToolSpec]) -> String) -> Arc<str> {
        // Held for a pointer compare, or one encoding of a few tools.
        let mut kept = self.0.lock();
        if let Some((specs, json)) = kept.as_ref() {
            if Arc::ptr_eq(specs, tools) {
                return json.clone();
            }
        }
        let json: Arc<str> = encode(tools).into();
        *kept = Some((tools.clone(), json.clone()));
        json
    }
}

/// The JSON string literal (quotes included) of the last text asked for:
/// a session's system prompt, the same kilobytes in every request.
#[derive(Debug, Default)]
pub(crate) struct StringJson(Mutex<Option<(String, Arc<str>)>>);

impl StringJson {
    /// `text` as a JSON string, escaped again only when it is not the text
    /// of the last call.
    pub fn get(&self, text: &str) -> Arc<str> {
        // Held for a compare, or one escape of the text.
        let mut kept = self.0.lock();
        if let Some((source, json)) = kept.as_ref() {
            if source == text {
                return json.clone();
            }
        }
        let json: Arc<str> = serde_json::Value::from(text).to_string().into();
        *kept = Some((text.to_owned(), json.clone()));
        json
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_text_is_escaped_again_only_when_it_changes() {
        let kept = StringJson::default();
        let first = kept.get("Say \"hi\".\n");
        assert_eq!(&*first, r#""Say \"hi\".\n""#);
        assert!(Arc::ptr_eq(&first, &kept.get("Say \"hi\".\n")));
        assert_eq!(&*kept.get("Other."), r#""Other.""#);
    }
}
