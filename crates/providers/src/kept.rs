//! What a provider keeps between requests so that a long session is not
//! re-encoded for each one: the tools array, while the registry hands out
//! the same specs. (History items keep their own encodings, see
//! [`pod_llm::Item::wire`].)

use parking_lot::Mutex;
use pod_llm::ToolSpec;
use std::sync::Arc;

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
