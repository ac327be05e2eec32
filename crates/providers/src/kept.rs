//! What a provider keeps between requests so that a long session is not
//! re-encoded for each one: the tools array, while the registry hands out
//! the same specs, the system prompt's JSON string, and (Chat Completions)
//! the settled messages of the last request. Items sent again without
//! being settled keep their own encodings (see [`pod_llm::Item::wire`]).

use parking_lot::Mutex;
use pod_llm::{HistoryId, Item, ToolSpec};
use std::sync::{Arc, LazyLock, Weak};
use uuid::Uuid;

/// What one provider keeps between requests.
#[derive(Debug, Default)]
pub(crate) struct Kept {
    /// The tools array.
    pub tools: ToolsJson,
    /// The system prompt as a JSON string.
    pub system: StringJson,
    /// The history's messages of the last request, as far as their order
    /// was settled (Chat Completions).
    pub history: HistoryJson,
}

/// The messages of a committed history up to a point where their order was
/// settled (no tool call open, nothing held back), as the last request's
/// body sent them: pieces of the bodies they were first sent in (no copy),
/// which put together read `m1,m2,…,mk`. The next request of the same
/// history (same [`HistoryId`], so the same items and more) sends them
/// again as they are, instead of putting every item in order and copying
/// its encoding again.
#[derive(Debug, Default)]
pub(crate) struct HistoryJson(Mutex<Option<KeptHistory>>);

/// Pieces kept before they are put together into one: a request adds one,
/// and a body of many pieces is many writes.
pub(crate) const MAX_PIECES: usize = 32;

#[derive(Debug)]
struct KeptHistory {
    id: HistoryId,
    /// Items it covers, from the first.
    items: usize,
    /// The id of the last of them: checked against the history again.
    last: Uuid,
    pieces: Vec<bytes::Bytes>,
}

impl HistoryJson {
    /// The kept messages and how many items they cover, when `history`
    /// (committed as `id`) starts with the items they were made of.
    pub fn get(
        &self,
        id: Option<HistoryId>,
        history: &[Item],
    ) -> Option<(Vec<bytes::Bytes>, usize)> {
        let id = id?;
        // Held to read or replace one entry.
        let kept = self.0.lock();
        let kept = kept.as_ref()?;
        let follows =
            kept.id == id && kept.items <= history.len() && history[kept.items - 1].id == kept.last;
        follows.then(|| (kept.pieces.clone(), kept.items))
    }

    /// Keeps `pieces`, the messages of the first `items` items of
    /// `history` (committed as `id`), put together into one piece when
    /// there are too many; forgets what it kept when there is nothing to
    /// keep.
    pub fn keep(
        &self,
        id: Option<HistoryId>,
        history: &[Item],
        items: usize,
        mut pieces: Vec<bytes::Bytes>,
    ) {
        if pieces.len() > MAX_PIECES {
            let mut one = Vec::with_capacity(pieces.iter().map(|p| p.len()).sum());
            for piece in &pieces {
                one.extend_from_slice(piece);
            }
            pieces = vec![one.into()];
        }
        let mut kept = self.0.lock();
        *kept = match (id, items) {
            (Some(id), 1..) if !pieces.is_empty() => Some(KeptHistory {
                id,
                items,
                last: history[items - 1].id,
                pieces,
            }),
            _ => None,
        };
    }
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
    ///
    /// `encoding` names what `encode` writes (the wire, and any setting the
    /// array depends on): a session's first request takes the array another
    /// session's provider already encoded from the same specs under the
    /// same name. Every Pod's registry shares one spec array
    /// (`ToolRegistry::share_specs`), and encoding its schemas was about
    /// 430,000 instructions per session (callgrind), a seventh of what a
    /// 5-request fleet session cost the worker.
    pub fn get(
        &self,
        tools: &Arc<[ToolSpec]>,
        encoding: &str,
        encode: impl Fn(&[ToolSpec]) -> String,
    ) -> Arc<str> {
        // Held for a pointer compare, or one lookup in the process's table.
        let mut kept = self.0.lock();
        if let Some((specs, json)) = kept.as_ref() {
            if Arc::ptr_eq(specs, tools) {
                return json.clone();
            }
        }
        let json = encoded(tools, encoding, encode);
        *kept = Some((tools.clone(), json.clone()));
        json
    }
}

/// One tools array encoded in this process: from which specs, under which
/// name. Both weak: it lives as long as a provider keeps it.
struct Encoded {
    encoding: String,
    specs: Weak<[ToolSpec]>,
    json: Weak<str>,
}

/// The array `encode` writes of `tools` under `encoding`, encoded only when
/// no provider of the process holds one of the same specs (the same
/// allocation) and name.
fn encoded(
    tools: &Arc<[ToolSpec]>,
    encoding: &str,
    encode: impl Fn(&[ToolSpec]) -> String,
) -> Arc<str> {
    // Held to look through the few live arrays, or to add one; an encoding
    // is done outside it.
    static ENCODED: LazyLock<Mutex<Vec<Encoded>>> = LazyLock::new(Default::default);
    let find = |table: &[Encoded]| {
        table.iter().find_map(|entry| {
            let same = entry.encoding == encoding
                && std::ptr::addr_eq(entry.specs.as_ptr(), Arc::as_ptr(tools));
            // The specs' allocation is held by the weak pointer, so the same
            // address is the same specs.
            same.then(|| entry.json.upgrade()).flatten()
        })
    };
    if let Some(json) = find(&ENCODED.lock()) {
        return json;
    }
    let json = shared(encode(tools));
    let mut table = ENCODED.lock();
    table.retain(|entry| entry.specs.strong_count() > 0 && entry.json.strong_count() > 0);
    if let Some(json) = find(&table) {
        return json;
    }
    table.push(Encoded {
        encoding: encoding.to_owned(),
        specs: Arc::downgrade(tools),
        json: Arc::downgrade(&json),
    });
    json
}

/// `json` as the one copy every session of the process uses: a fleet's
/// sessions have the same tools and, mostly, the same system prompt, and
/// each kept its own (kilobytes a session, most of what its provider
/// held). Entries are by content hash, and forgotten once no session uses
/// them.
fn shared(json: String) -> Arc<str> {
    use std::collections::HashMap;
    use std::hash::{Hash, Hasher};
    struct Table {
        texts: HashMap<u64, Weak<str>>,
        /// The size at which the dead are swept out next.
        sweep_at: usize,
    }
    // Held for a lookup and an insert (a sweep of the dead now and then).
    static TEXTS: LazyLock<Mutex<Table>> = LazyLock::new(|| {
        Mutex::new(Table {
            texts: HashMap::new(),
            sweep_at: 64,
        })
    });
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    json.hash(&mut hasher);
    let key = hasher.finish();
    let mut table = TEXTS.lock();
    if let Some(kept) = table.texts.get(&key).and_then(Weak::upgrade) {
        if *kept == *json {
            return kept;
        }
    }
    let json: Arc<str> = json.into();
    if table.texts.len() >= table.sweep_at {
        table.texts.retain(|_, text| text.strong_count() > 0);
        // Next when the live ones have doubled: sessions with prompts of
        // their own (one per workspace) would otherwise sweep the whole
        // table at every start.
        table.sweep_at = (table.texts.len() * 2).max(64);
    }
    table.texts.insert(key, Arc::downgrade(&json));
    json
}

/// The JSON string literal (quotes included) of the last text asked for:
/// a session's system prompt, the same kilobytes in every request. The
/// text is the request's own (shared, not copied), and the literal is the
/// process's one copy for every session with the same prompt.
#[derive(Debug, Default)]
pub(crate) struct StringJson(Mutex<Option<(Arc<str>, Arc<str>)>>);

impl StringJson {
    /// `text` as a JSON string, escaped again only when it is not the text
    /// of the last call.
    pub fn get(&self, text: &Arc<str>) -> Arc<str> {
        // Held for a compare, or one escape of the text.
        let mut kept = self.0.lock();
        if let Some((source, json)) = kept.as_ref() {
            // `Arc`'s equality compares the pointers first.
            if source == text {
                return json.clone();
            }
        }
        let json = shared(serde_json::Value::from(&**text).to_string());
        *kept = Some((Arc::clone(text), json.clone()));
        json
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sessions_with_the_same_tools_share_one_array() {
        let spec = |name: &str| ToolSpec {
            name: name.into(),
            description: "d".into(),
            parameters: serde_json::json!({"type": "object"}).into(),
        };
        let encode = |specs: &[ToolSpec]| {
            let names: Vec<&str> = specs.iter().map(|s| s.name.as_str()).collect();
            serde_json::to_string(&names).unwrap_or_default()
        };
        // Two sessions' registries: equal specs, not the same allocation.
        let (one, two) = (ToolsJson::default(), ToolsJson::default());
        let first: Arc<[ToolSpec]> = vec![spec("read_file"), spec("bash")].into();
        let second: Arc<[ToolSpec]> = vec![spec("read_file"), spec("bash")].into();
        let a = one.get(&first, "names", encode);
        let b = two.get(&second, "names", encode);
        assert!(Arc::ptr_eq(&a, &b), "{a} and {b} are two copies");
        // Other tools get their own.
        let other: Arc<[ToolSpec]> = vec![spec("read_file")].into();
        let c = ToolsJson::default().get(&other, "names", encode);
        assert_eq!(&*c, r#"["read_file"]"#);
        assert!(!Arc::ptr_eq(&a, &c));
    }

    #[test]
    fn specs_are_encoded_once_per_encoding_across_providers() {
        use std::sync::atomic::{AtomicUsize, Ordering};
        let encodings = AtomicUsize::new(0);
        let encoder = |wire: &'static str| {
            let encodings = &encodings;
            move |specs: &[ToolSpec]| {
                encodings.fetch_add(1, Ordering::Relaxed);
                format!("{wire}: {} tools", specs.len())
            }
        };
        let encode = encoder("a");
        let specs: Arc<[ToolSpec]> = vec![ToolSpec {
            name: "encoded_once".into(),
            description: "d".into(),
            parameters: serde_json::json!({"type": "object"}).into(),
        }]
        .into();
        // Three sessions' providers, one spec array.
        let first = ToolsJson::default().get(&specs, "wire-a", encode);
        let second = ToolsJson::default();
        assert!(Arc::ptr_eq(&first, &second.get(&specs, "wire-a", encode)));
        assert_eq!(encodings.load(Ordering::Relaxed), 1);
        // Another wire (or cache setting) writes its own array.
        let other = ToolsJson::default().get(&specs, "wire-b", encoder("b"));
        assert_eq!(encodings.load(Ordering::Relaxed), 2);
        assert_eq!(&*other, "b: 1 tools");
        // Once no provider holds it, the array is forgotten, not kept for
        // the process's life.
        drop((first, second));
        let again = ToolsJson::default().get(&specs, "wire-a", encode);
        assert_eq!(encodings.load(Ordering::Relaxed), 3);
        assert_eq!(&*again, "a: 1 tools");
    }

    #[test]
    fn a_text_is_escaped_again_only_when_it_changes() {
        let kept = StringJson::default();
        let text: Arc<str> = "Say \"hi\".\n".into();
        let first = kept.get(&text);
        assert_eq!(&*first, r#""Say \"hi\".\n""#);
        assert!(Arc::ptr_eq(&first, &kept.get(&text)));
        // An equal text in another allocation is the same text.
        assert!(Arc::ptr_eq(&first, &kept.get(&"Say \"hi\".\n".into())));
        assert_eq!(&*kept.get(&"Other.".into()), r#""Other.""#);
    }

    #[test]
    fn sessions_with_the_same_prompt_share_one_literal() {
        // Two sessions' providers, each with its own copy of the prompt.
        let (one, two) = (StringJson::default(), StringJson::default());
        let prompt = "You are an agent of a fleet.".repeat(100);
        let a = one.get(&prompt.as_str().into());
        let b = two.get(&prompt.as_str().into());
        assert!(Arc::ptr_eq(&a, &b), "two copies of the prompt's literal");
        let c = StringJson::default().get(&"Another prompt.".into());
        assert!(!Arc::ptr_eq(&a, &c));
    }
}
