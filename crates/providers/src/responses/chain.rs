//! Where each conversation stands on the server: the last response stored
//! there and which history it followed, so that the next request can name
//! that response and send only what came after its answer.
//!
//! A request follows the stored response only when it is the same
//! committed history, grown: the same [`HistoryId`] (the worker gives a
//! history a new id whenever it replaces it, and none to a request an
//! interceptor edited; ids are never reused), at least one item longer
//! than the answer, and holding at the stored length the committed form of
//! that response's answer (same text, same call ids). A history with one
//! id is only ever appended to, so its first items are the ones the server
//! holds. Anything else (a compaction, an edit, a discarded or renamed
//! answer, a fork, a resumed session, a request without an id) is sent
//! whole and starts a new chain. The check costs the same at any history
//! length.

use parking_lot::Mutex;
use pod_llm::{HistoryId, Item, ItemKind};
use std::collections::hash_map::DefaultHasher;
use std::collections::{HashMap, VecDeque};
use std::hash::{Hash, Hasher};
use std::sync::Arc;

/// The most conversations one provider remembers; the one recorded least
/// recently goes first.
const MAX_CONVERSATIONS: usize = 16_384;

/// What a response answered, as far as the next request can check it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Answer {
    /// The visible text, concatenated.
    pub text: String,
    /// The call ids, in order.
    pub call_ids: Vec<String>,
}

impl Answer {
    /// A digest of the answer: what a chain keeps instead of its text.
    fn digest(&self) -> u64 {
        digest(&self.text, self.call_ids.iter().map(String::as_str))
    }
}

fn digest<'a>(text: &str, call_ids: impl Iterator<Item = &'a str>) -> u64 {
    // SipHash with fixed keys: the same answer always digests the same.
    let mut hasher = DefaultHasher::new();
    text.hash(&mut hasher);
    for id in call_ids {
        id.hash(&mut hasher);
    }
    hasher.finish()
}

/// The digest of the answer `item` commits, if it is an assistant item.
fn committed_digest(item: &Item) -> Option<u64> {
    match &item.kind {
        ItemKind::Assistant {
            text, tool_calls, ..
        } => Some(digest(text, tool_calls.iter().map(|c| c.id.as_str()))),
        _ => None,
    }
}

/// The history a request was made of, as far as a later request can
/// recognise it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Sent {
    history: HistoryId,
    /// How many items it held.
    len: usize,
}

impl Sent {
    /// The history of a request, when it is a committed one.
    pub fn of(history_id: Option<HistoryId>, history: &[Item]) -> Option<Self> {
        Some(Self {
            history: history_id?,
            len: history.len(),
        })
    }
}

/// One stored response and what it followed.
#[derive(Clone, Debug)]
struct Chain {
    response_id: String,
    sent: Sent,
    answer: u64,
    /// When it was recorded, to find the least recent.
    recorded: u64,
}

/// Where a request can continue from.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Continuation {
    /// The response to name as `previous_response_id`.
    pub response_id: String,
    /// Index in the history of the first item the server does not hold
    /// (the one after the answer).
    pub first_new: usize,
}

/// The chains of the conversations one provider talks to, by cache key.
#[derive(Debug, Default)]
pub(crate) struct Conversations {
    // Held to look up, insert or drop one entry; never across an await.
    inner: Mutex<Inner>,
}

#[derive(Debug, Default)]
struct Inner {
    chains: HashMap<Arc<str>, Chain>,
    /// Keys by the time they were recorded; an entry whose time is not its
    /// chain's any more is stale and skipped.
    order: VecDeque<(u64, Arc<str>)>,
    clock: u64,
}

impl Conversations {
    /// Where a request of `history` (with id `history_id`) can continue,
    /// if anywhere.
    pub fn continuation(
        &self,
        key: &str,
        history_id: Option<HistoryId>,
        history: &[Item],
    ) -> Option<Continuation> {
        let history_id = history_id?;
        let inner = self.inner.lock();
        let chain = inner.chains.get(key)?;
        let sent = chain.sent;
        // The answer must be followed by something new to send.
        let follows = sent.history == history_id
            && history.len() >= sent.len + 2
            && committed_digest(&history[sent.len]) == Some(chain.answer);
        follows.then(|| Continuation {
            response_id: chain.response_id.clone(),
            first_new: sent.len + 1,
        })
    }

    /// Records that `response_id` followed `sent` and answered `answer`.
    pub fn record(&self, key: &Arc<str>, response_id: String, sent: Sent, answer: &Answer) {
        let mut inner = self.inner.lock();
        inner.clock += 1;
        let recorded = inner.clock;
        let chain = Chain {
            response_id,
            sent,
            answer: answer.digest(),
            recorded,
        };
        inner.chains.insert(key.clone(), chain);
        inner.order.push_back((recorded, key.clone()));
        while inner.chains.len() > MAX_CONVERSATIONS {
            let Some((time, oldest)) = inner.order.pop_front() else {
                break;
            };
            if inner
                .chains
                .get(&oldest)
                .is_some_and(|c| c.recorded == time)
            {
                inner.chains.remove(&oldest);
            }
        }
        // Stale entries pile up while a few sessions record many times:
        // drop them once they outnumber the chains.
        if inner.order.len() > 2 * MAX_CONVERSATIONS.max(inner.chains.len()) {
            let Inner { chains, order, .. } = &mut *inner;
            order.retain(|(time, key)| chains.get(key).is_some_and(|c| c.recorded == *time));
        }
    }

    /// Forgets a conversation's chain if it still follows `response_id`
    /// (the server no longer has that response, or following it failed);
    /// a chain recorded since stays.
    pub fn forget_if(&self, key: &str, response_id: &str) {
        let mut inner = self.inner.lock();
        if inner
            .chains
            .get(key)
            .is_some_and(|c| c.response_id == response_id)
        {
            // Its entry in `order` is stale from now on.
            inner.chains.remove(key);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pod_llm::ToolCall;

    fn answer_item(text: &str, ids: &[&str]) -> Item {
        Item::new(ItemKind::Assistant {
            text: text.into(),
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

    fn answer(text: &str, ids: &[&str]) -> Answer {
        Answer {
            text: text.into(),
            call_ids: ids.iter().map(|id| (*id).to_string()).collect(),
        }
    }

    #[test]
    fn continues_only_the_same_history_grown_by_the_answer() {
        let key: Arc<str> = "s".into();
        let conversations = Conversations::default();
        let id = Some(HistoryId::fresh());
        let mut history = vec![Item::user("hi")];
        let sent = Sent::of(id, &history).unwrap();
        conversations.record(&key, "r1".into(), sent, &answer("", &["c1"]));
        history.push(answer_item("", &["c1"]));
        // The answer alone: nothing new to send yet.
        assert_eq!(conversations.continuation("s", id, &history), None);
        history.push(Item::tool_result("c1", "ok", false));
        assert_eq!(
            conversations.continuation("s", id, &history),
            Some(Continuation {
                response_id: "r1".into(),
                first_new: 2
            })
        );
        assert_eq!(conversations.continuation("other", id, &history), None);
        // An edited request (no id) or a replaced history (another id).
        assert_eq!(conversations.continuation("s", None, &history), None);
        let replaced = Some(HistoryId::fresh());
        assert_eq!(conversations.continuation("s", replaced, &history), None);
        assert_eq!(Sent::of(None, &history), None);
        conversations.forget_if("s", "r0");
        assert!(conversations.continuation("s", id, &history).is_some());
        conversations.forget_if("s", "r1");
        assert_eq!(conversations.continuation("s", id, &history), None);
    }

    #[test]
    fn another_answer_starts_over() {
        let key: Arc<str> = "s".into();
        let conversations = Conversations::default();
        let id = Some(HistoryId::fresh());
        let mut history = vec![Item::user("hi")];
        let sent = Sent::of(id, &history).unwrap();
        conversations.record(&key, "r1".into(), sent, &answer("ok", &["c1"]));
        history.push(answer_item("ok", &["c9"]));
        history.push(Item::tool_result("c9", "ok", false));
        assert_eq!(conversations.continuation("s", id, &history), None);
        history[1] = answer_item("o", &["c1"]);
        assert_eq!(conversations.continuation("s", id, &history), None);
        history[1] = Item::user("ok");
        assert_eq!(conversations.continuation("s", id, &history), None);
        history[1] = answer_item("ok", &["c1"]);
        assert!(conversations.continuation("s", id, &history).is_some());
    }

    #[test]
    fn the_least_recently_recorded_conversation_goes_first_beyond_the_cap() {
        let conversations = Conversations::default();
        let id = Some(HistoryId::fresh());
        let mut history = vec![Item::user("hi")];
        let sent = Sent::of(id, &history).unwrap();
        let key = |n: usize| -> Arc<str> { format!("s{n}").into() };
        for n in 0..MAX_CONVERSATIONS {
            conversations.record(&key(n), format!("r{n}"), sent, &answer("ok", &[]));
        }
        // s0 records again: s1 is now the least recent.
        conversations.record(&key(0), "r0b".into(), sent, &answer("ok", &[]));
        conversations.record(
            &key(MAX_CONVERSATIONS),
            "new".into(),
            sent,
            &answer("ok", &[]),
        );
        history.extend([answer_item("ok", &[]), Item::user("more")]);
        let follows = |n: usize| conversations.continuation(&key(n), id, &history);
        assert_eq!(follows(1), None);
        assert_eq!(follows(0).map(|c| c.response_id), Some("r0b".into()));
        assert!(follows(2).is_some());
        assert!(follows(MAX_CONVERSATIONS).is_some());
    }
}
