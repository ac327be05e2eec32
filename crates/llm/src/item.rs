//! History items: the conversation as the runtime records it.
//!
//! The JSON form of [`Item`] is the session log's record format, so it is
//! stable: fields are only ever added (with serde defaults), never renamed.
//! [`ITEM_FORMAT_VERSION`] is written in every log header.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use std::borrow::Cow;
use std::collections::HashSet;
use std::sync::OnceLock;
use uuid::Uuid;

/// Version of the JSON shape of [`Item`]. Bump it only with a reader for the
/// previous version.
pub const ITEM_FORMAT_VERSION: u32 = 1;

/// One committed entry of a conversation.
///
/// Deserialized through [`ItemRepr`] in one pass: serde's `flatten` would
/// buffer every field first, and reading logs is on the resume path.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(try_from = "ItemRepr")]
pub struct Item {
    /// Unique id of this item.
    pub id: Uuid,
    /// When the item was committed (UTC).
    pub at: DateTime<Utc>,
    /// What the item says.
    #[serde(flatten)]
    pub kind: ItemKind,
    /// The item's encoding on a provider's wire, made on first use.
    #[serde(skip)]
    wire: WireCache,
}

/// One provider encoding of an item, kept with it so a long history is not
/// re-encoded for every request (see [`Item::wire`]).
///
/// A committed item never changes, so its encoding stays right for as long
/// as the item lives. A clone starts empty: cloning is how an item gets
/// edited (a request an interceptor changes is a copy), and the copy's
/// fields may no longer match the original's encoding.
#[derive(Default)]
struct WireCache(OnceLock<(&'static str, Box<str>)>);

impl Clone for WireCache {
    fn clone(&self) -> Self {
        Self::default()
    }
}

impl PartialEq for WireCache {
    /// A cache says nothing about what the item is.
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

impl std::fmt::Debug for WireCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self.0.get() {
            Some((wire, _)) => wire,
            None => "-",
        })
    }
}

/// The content of an [`Item`], tagged by `"type"` in JSON.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ItemKind {
    /// A message from the user.
    User {
        /// The user's text.
        text: String,
    },
    /// One model response: text, optional reasoning and any tool calls.
    Assistant {
        /// Visible text (may be empty when the model only calls tools).
        #[serde(default)]
        text: String,
        /// The model's reasoning, when the provider exposes it.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reasoning: Option<Reasoning>,
        /// Tool calls, in the order the model made them.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        tool_calls: Vec<ToolCall>,
        /// Token usage of the request that produced this response.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        usage: Option<Usage>,
    },
    /// The result of one tool call.
    ToolResult {
        /// The id of the call this answers.
        call_id: String,
        /// What the tool returned (or why it did not run).
        content: String,
        /// Whether the call failed.
        #[serde(default)]
        is_error: bool,
        /// Structured data the tool records for replay (for example the hash
        /// of a file it read). Never sent to the model.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        meta: Option<Meta>,
    },
    /// A message injected by the runtime, never typed by the user.
    System {
        /// Why the runtime injected it.
        #[serde(default)]
        kind: SystemKind,
        /// The text the model sees.
        text: String,
    },
}

/// The flat JSON shape of an [`Item`], as read from a log.
#[derive(Deserialize)]
struct ItemRepr {
    id: Uuid,
    at: DateTime<Utc>,
    #[serde(rename = "type")]
    ty: ItemType,
    #[serde(default)]
    text: Option<String>,
    #[serde(default)]
    reasoning: Option<Reasoning>,
    #[serde(default)]
    tool_calls: Vec<ToolCall>,
    #[serde(default)]
    usage: Option<Usage>,
    #[serde(default)]
    call_id: Option<String>,
    #[serde(default)]
    content: Option<String>,
    #[serde(default)]
    is_error: bool,
    #[serde(default)]
    meta: Option<Meta>,
    #[serde(default)]
    kind: SystemKind,
}

#[derive(Deserialize)]
#[serde(rename_all = "snake_case")]
enum ItemType {
    User,
    Assistant,
    ToolResult,
    System,
}

impl TryFrom<ItemRepr> for Item {
    type Error = String;

    fn try_from(repr: ItemRepr) -> Result<Self, Self::Error> {
        let missing = |field: &str, ty: &str| format!("a {ty} item needs `{field}`");
        let kind = match repr.ty {
            ItemType::User => ItemKind::User {
                text: repr.text.ok_or_else(|| missing("text", "user"))?,
            },
            ItemType::Assistant => ItemKind::Assistant {
                text: repr.text.unwrap_or_default(),
                reasoning: repr.reasoning,
                tool_calls: repr.tool_calls,
                usage: repr.usage,
            },
            ItemType::ToolResult => ItemKind::ToolResult {
                call_id: repr
                    .call_id
                    .ok_or_else(|| missing("call_id", "tool_result"))?,
                content: repr
                    .content
                    .ok_or_else(|| missing("content", "tool_result"))?,
                is_error: repr.is_error,
                meta: repr.meta,
            },
            ItemType::System => ItemKind::System {
                kind: repr.kind,
                text: repr.text.ok_or_else(|| missing("text", "system"))?,
            },
        };
        Ok(Item::with_id(repr.id, repr.at, kind))
    }
}

/// Why the runtime injected a system item.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SystemKind {
    /// A `<system-reminder>` about the plan or other state.
    Reminder,
    /// A notification delivered through `notify`.
    Notification,
    /// A compaction summary.
    Summary,
    /// State carried over a compaction (unfinished todos, files to re-read).
    CarryOver,
    /// The operator's checks failed when the model ended its turn: what
    /// they said, as a `<system-reminder>`.
    Verification,
    /// The loop guard: the model repeats itself (the same call, a short
    /// cycle, the same text), as a `<system-reminder>`. Not a plan
    /// reminder: the plan's cadence and replay's run starts ignore it.
    Loop,
    /// Anything else the runtime says.
    #[default]
    #[serde(other)]
    Other,
}

/// The model's reasoning for one response.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Reasoning {
    /// Reasoning text as streamed.
    #[serde(default)]
    pub text: String,
    /// Provider signature that must be sent back with the text (Anthropic).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signature: Option<String>,
}

/// One tool call made by the model.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolCall {
    /// Call id, unique within the history; the result carries it back.
    pub id: String,
    /// Name of the tool.
    pub name: String,
    /// Arguments exactly as the model sent them (raw JSON text, possibly invalid).
    pub arguments: String,
}

/// Token usage reported for one request (or summed over several).
///
/// `prompt_tokens` is the whole request, cached or not (the context size
/// compaction watches); the cache fields say how much of it the provider
/// read from or wrote to its prompt cache, so the fresh part is
/// [`fresh_input`](Usage::fresh_input). Fields a provider does not report
/// are 0, and zeros are left out of the log.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    /// Tokens of the prompt (the whole request).
    #[serde(default)]
    pub prompt_tokens: u64,
    /// Tokens the model generated (reasoning included).
    #[serde(default)]
    pub completion_tokens: u64,
    /// Prompt tokens read from the provider's cache.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub cache_read_tokens: u64,
    /// Prompt tokens written to the provider's cache (Anthropic bills them
    /// above fresh input).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub cache_write_tokens: u64,
    /// Of the completion, tokens spent reasoning.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub reasoning_tokens: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

impl Usage {
    /// Prompt tokens neither read from nor written to the cache.
    pub fn fresh_input(&self) -> u64 {
        self.prompt_tokens
            .saturating_sub(self.cache_read_tokens)
            .saturating_sub(self.cache_write_tokens)
    }
}

impl std::ops::AddAssign for Usage {
    fn add_assign(&mut self, other: Usage) {
        self.prompt_tokens += other.prompt_tokens;
        self.completion_tokens += other.completion_tokens;
        self.cache_read_tokens += other.cache_read_tokens;
        self.cache_write_tokens += other.cache_write_tokens;
        self.reasoning_tokens += other.reasoning_tokens;
    }
}

/// A tool result's [meta](ItemKind::ToolResult::meta), kept as its JSON
/// text: a history holds one per file a session read or wrote, and as a
/// JSON value (two maps for a file's stamp) each was over a kilobyte.
/// Written to the log as the JSON it holds; equal when the texts are.
#[derive(Clone, Debug, Serialize)]
#[serde(transparent)]
pub struct Meta(Box<serde_json::value::RawValue>);

impl Meta {
    /// The JSON text.
    pub fn get(&self) -> &str {
        self.0.get()
    }

    /// The JSON value.
    pub fn to_value(&self) -> serde_json::Value {
        // It was written from a value: it reads back.
        serde_json::from_str(self.0.get()).unwrap_or_default()
    }
}

impl From<&serde_json::Value> for Meta {
    fn from(value: &serde_json::Value) -> Self {
        // Writing a JSON value out does not fail; `null` if it ever did.
        Self(
            serde_json::value::to_raw_value(value)
                .unwrap_or_else(|_| serde_json::value::RawValue::NULL.to_owned()),
        )
    }
}

impl PartialEq for Meta {
    fn eq(&self, other: &Self) -> bool {
        self.get() == other.get()
    }
}

impl<'de> Deserialize<'de> for Meta {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        // Through a value, not straight to text: a record's fields may
        // reach here buffered by serde, where raw text cannot be had.
        serde_json::Value::deserialize(deserializer).map(|value| Self::from(&value))
    }
}

impl Item {
    /// A new item of `kind`, with a fresh id and the current time.
    pub fn new(kind: ItemKind) -> Self {
        Self::with_id(Uuid::new_v4(), Utc::now(), kind)
    }

    /// An item with the given id and time (one read back, or a test's).
    pub fn with_id(id: Uuid, at: DateTime<Utc>, kind: ItemKind) -> Self {
        Self {
            id,
            at,
            kind,
            wire: WireCache::default(),
        }
    }

    /// This item as the wire format named `wire` encodes it: `encode`
    /// runs the first time and its text is kept with the item, so a history
    /// sent again and again is encoded once. `wire` names the encoding (one
    /// per provider format); an item keeps the first wire it was asked
    /// for, and any other wire is encoded afresh each time.
    ///
    /// The kept text is right only while the item is unchanged, which is
    /// what history items are: the worker appends, never edits, and an
    /// edit goes through a clone (which starts with nothing kept).
    pub fn wire(&self, wire: &'static str, encode: impl Fn(&Item) -> String) -> Cow<'_, str> {
        let (kept, text) = self
            .wire
            .0
            .get_or_init(|| (wire, encode(self).into_boxed_str()));
        if *kept == wire {
            Cow::Borrowed(text)
        } else {
            Cow::Owned(encode(self))
        }
    }

    /// A user message.
    pub fn user(text: impl Into<String>) -> Self {
        Self::new(ItemKind::User { text: text.into() })
    }

    /// A system item of the given kind.
    pub fn system(kind: SystemKind, text: impl Into<String>) -> Self {
        Self::new(ItemKind::System {
            kind,
            text: text.into(),
        })
    }

    /// A tool result answering `call_id`.
    pub fn tool_result(
        call_id: impl Into<String>,
        content: impl Into<String>,
        is_error: bool,
    ) -> Self {
        Self::new(ItemKind::ToolResult {
            call_id: call_id.into(),
            content: content.into(),
            is_error,
            meta: None,
        })
    }

    /// The tool calls of an assistant item (empty for other kinds).
    pub fn tool_calls(&self) -> &[ToolCall] {
        match &self.kind {
            ItemKind::Assistant { tool_calls, .. } => tool_calls,
            _ => &[],
        }
    }
}

/// A way in which a history breaks the tool-call/result invariant.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum HistoryError {
    /// A tool call has no result.
    #[error("tool call {0} has no result")]
    MissingResult(String),
    /// A result answers no earlier call, or answers one twice.
    #[error("tool result at item {index} answers no open call ({call_id})")]
    OrphanResult {
        /// Position of the result in the history.
        index: usize,
        /// The call id it names.
        call_id: String,
    },
    /// Two calls share an id.
    #[error("tool call id {0} is used twice")]
    DuplicateCallId(String),
}

/// Checks that every tool call has exactly one result, placed after it.
///
/// Model APIs reject histories that break this; the runtime keeps it true
/// whatever happens during a turn.
pub fn validate_history(items: &[Item]) -> Result<(), HistoryError> {
    let mut seen = HashSet::new();
    let mut open: Vec<&str> = Vec::new();
    for (index, item) in items.iter().enumerate() {
        match &item.kind {
            ItemKind::Assistant { tool_calls, .. } => {
                for call in tool_calls {
                    if !seen.insert(call.id.as_str()) {
                        return Err(HistoryError::DuplicateCallId(call.id.clone()));
                    }
                    open.push(&call.id);
                }
            }
            ItemKind::ToolResult { call_id, .. } => {
                match open.iter().position(|id| id == call_id) {
                    Some(pos) => {
                        open.remove(pos);
                    }
                    None => {
                        return Err(HistoryError::OrphanResult {
                            index,
                            call_id: call_id.clone(),
                        })
                    }
                }
            }
            _ => {}
        }
    }
    match open.first() {
        Some(id) => Err(HistoryError::MissingResult((*id).to_string())),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_results_meta_is_logged_as_json_and_read_back_equal() {
        let value =
            serde_json::json!({"file": {"path": "a.txt", "hash": "xxh3-128:00", "size": 3}});
        let mut item = Item::tool_result("c1", "abc", false);
        if let ItemKind::ToolResult { meta, .. } = &mut item.kind {
            *meta = Some(Meta::from(&value));
        }
        let line = serde_json::to_string(&item).unwrap();
        assert!(
            line.contains(r#""meta":{"file":{"path":"a.txt","hash":"xxh3-128:00","size":3}}"#),
            "{line}"
        );
        assert_eq!(serde_json::from_str::<Item>(&line).unwrap(), item);
        assert_eq!(serde_json::to_value(&item).unwrap()["meta"], value);
        // Read where serde buffers the fields first, as a tagged record.
        #[derive(Deserialize)]
        #[serde(tag = "record")]
        enum Record {
            Item(Item),
        }
        let tagged = format!(r#"{{"record":"Item",{}"#, &line[1..]);
        let Record::Item(back) = serde_json::from_str(&tagged).unwrap();
        assert_eq!(back, item);
        if let ItemKind::ToolResult {
            meta: Some(meta), ..
        } = &back.kind
        {
            assert_eq!(meta.to_value(), value);
        }
    }

    fn assistant_calling(ids: &[&str]) -> Item {
        Item::new(ItemKind::Assistant {
            text: String::new(),
            reasoning: None,
            tool_calls: ids
                .iter()
                .map(|id| ToolCall {
                    id: (*id).into(),
                    name: "t".into(),
                    arguments: "{}".into(),
                })
                .collect(),
            usage: None,
        })
    }

    #[test]
    fn json_shape_is_stable() {
        let item = Item::with_id(
            Uuid::nil(),
            DateTime::parse_from_rfc3339("2026-01-02T03:04:05Z")
                .unwrap()
                .with_timezone(&Utc),
            ItemKind::ToolResult {
                call_id: "c1".into(),
                content: "ok".into(),
                is_error: false,
                meta: None,
            },
        );
        assert_eq!(
            serde_json::to_string(&item).unwrap(),
            r#"{"id":"00000000-0000-0000-0000-000000000000","at":"2026-01-02T03:04:05Z","type":"tool_result","call_id":"c1","content":"ok","is_error":false}"#
        );
    }

    #[test]
    fn a_wire_encoding_is_made_once_and_not_cloned() {
        let calls = std::cell::Cell::new(0);
        let encode = |item: &Item| {
            calls.set(calls.get() + 1);
            format!("{:?}", item.kind)
        };
        let item = Item::user("hi");
        let first = item.wire("a", encode).into_owned();
        assert_eq!(item.wire("a", encode), first);
        assert_eq!(calls.get(), 1);
        // Another wire is encoded each time; the first one stays kept.
        item.wire("b", encode);
        item.wire("b", encode);
        assert_eq!(calls.get(), 3);
        // A clone keeps nothing: it may be edited.
        let mut copy = item.clone();
        assert_eq!(copy, item);
        copy.kind = ItemKind::User {
            text: "edited".into(),
        };
        assert!(copy.wire("a", encode).contains("edited"));
        assert_eq!(calls.get(), 4);
        // What is kept is not part of the item's record.
        assert_eq!(
            serde_json::to_string(&item).unwrap(),
            serde_json::to_string(&Item::with_id(item.id, item.at, item.kind.clone())).unwrap()
        );
    }

    #[test]
    fn old_lines_without_optional_fields_still_parse() {
        let line = r#"{"id":"00000000-0000-0000-0000-000000000000","at":"2026-01-02T03:04:05Z","type":"assistant"}"#;
        let item: Item = serde_json::from_str(line).unwrap();
        assert_eq!(item.tool_calls().len(), 0);
        let unknown_kind = r#"{"id":"00000000-0000-0000-0000-000000000000","at":"2026-01-02T03:04:05Z","type":"system","kind":"from_the_future","text":"x"}"#;
        let item: Item = serde_json::from_str(unknown_kind).unwrap();
        assert!(matches!(
            item.kind,
            ItemKind::System {
                kind: SystemKind::Other,
                ..
            }
        ));
    }

    #[test]
    fn every_kind_round_trips_and_missing_fields_are_named() {
        let items = vec![
            Item::user("hi"),
            Item::system(SystemKind::CarryOver, "carried"),
            Item::tool_result("c", "out", true),
            assistant_calling(&["a", "b"]),
        ];
        for item in items {
            let json = serde_json::to_string(&item).unwrap();
            assert_eq!(serde_json::from_str::<Item>(&json).unwrap(), item);
        }
        let no_text = r#"{"id":"00000000-0000-0000-0000-000000000000","at":"2026-01-02T03:04:05Z","type":"user"}"#;
        let err = serde_json::from_str::<Item>(no_text)
            .unwrap_err()
            .to_string();
        assert!(err.contains("a user item needs `text`"), "{err}");
        let unknown = r#"{"id":"00000000-0000-0000-0000-000000000000","at":"2026-01-02T03:04:05Z","type":"video"}"#;
        assert!(serde_json::from_str::<Item>(unknown).is_err());
    }

    #[test]
    fn validate_history_finds_each_violation() {
        let ok = vec![
            assistant_calling(&["a", "b"]),
            Item::tool_result("b", "", false),
            Item::tool_result("a", "", false),
        ];
        assert_eq!(validate_history(&ok), Ok(()));
        assert_eq!(
            validate_history(&ok[..2]),
            Err(HistoryError::MissingResult("a".into()))
        );
        let orphan = vec![Item::tool_result("x", "", false)];
        assert!(matches!(
            validate_history(&orphan),
            Err(HistoryError::OrphanResult { index: 0, .. })
        ));
        let twice = vec![
            assistant_calling(&["a"]),
            Item::tool_result("a", "", false),
            Item::tool_result("a", "", false),
        ];
        assert!(matches!(
            validate_history(&twice),
            Err(HistoryError::OrphanResult { index: 2, .. })
        ));
        let dup = vec![assistant_calling(&["a"]), assistant_calling(&["a"])];
        assert_eq!(
            validate_history(&dup),
            Err(HistoryError::DuplicateCallId("a".into()))
        );
    }
}
