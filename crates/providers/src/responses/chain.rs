//! Where each conversation stands on the server: the last response stored
//! there and which history it followed, so that the next request can name
//! that response and send only what came after its answer.
//!
//! A request follows the stored response only when it is the same history,
//! grown: the same shared history (one allocation: an interceptor's edited
//! copy is another, and so is a history replaced by a compaction), still
//! starting and ending its old part with the same items, followed by the
//! committed form of that response's answer (same text, same call ids).
//! Committed items are never changed in place (an edit goes through a
//! copy), so the old part is what the server holds. Anything else (a
//! compaction, an edit, a discarded answer, a fork, a resumed session) is
//! sent whole and starts a new chain. The check costs the same at any
//! history length.

use parking_lot::Mutex;
use pod_llm::{Item, ItemKind};
use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use uuid::Uuid;

/// The most conversations one provider remembers. A process running more
/// sessions than this at once sends the oldest ones' next request whole.
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
    /// Whether `item` is the committed form of this answer.
    fn is(&self, item: &Item) -> bool {
        match &item.kind {
            ItemKind::Assistant {
                text, tool_calls, ..
            } => {
                *text == self.text
                    && tool_calls.len() == self.call_ids.len()
                    && tool_calls
                        .iter()
                        .zip(&self.call_ids)
                        .all(|(call, id)| call.id == *id)
            }
            _ => false,
        }
    }
}

/// The history a request was made of, as far as a later request can
/// recognise it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Sent {
    /// Address of the shared history (compared, never dereferenced).
    history: usize,
    /// How many items it held.
    len: usize,
    /// Its first and last item.
    first: Uuid,
    last: Uuid,
}

impl Sent {
    /// What `history` looks like now; `None` when empty.
    pub fn of(history: &Arc<Vec<Item>>) -> Option<Self> {
        Some(Self {
            history: Arc::as_ptr(history) as usize,
            len: history.len(),
            first: history.first()?.id,
            last: history.last()?.id,
        })
    }
}

/// One stored response and what it followed.
#[derive(Clone, Debug)]
struct Chain {
    response_id: String,
    sent: Sent,
    answer: Answer,
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
    /// Keys in the order they were first recorded, for eviction.
    order: VecDeque<Arc<str>>,
}

impl Conversations {
    /// Where a request of `history` can continue, if anywhere.
    pub fn continuation(&self, key: &str, history: &Arc<Vec<Item>>) -> Option<Continuation> {
        let inner = self.inner.lock();
        let chain = inner.chains.get(key)?;
        let sent = chain.sent;
        // The answer must be followed by something new to send.
        if history.len() < sent.len + 2 {
            return None;
        }
        let same = Arc::as_ptr(history) as usize == sent.history
            && history[0].id == sent.first
            && history[sent.len - 1].id == sent.last
            && chain.answer.is(&history[sent.len]);
        same.then(|| Continuation {
            response_id: chain.response_id.clone(),
            first_new: sent.len + 1,
        })
    }

    /// Records that `response_id` followed `sent` and answered `answer`.
    pub fn record(&self, key: &Arc<str>, response_id: String, sent: Sent, answer: Answer) {
        let mut inner = self.inner.lock();
        let chain = Chain {
            response_id,
            sent,
            answer,
        };
        if inner.chains.insert(key.clone(), chain).is_none() {
            inner.order.push_back(key.clone());
            while inner.order.len() > MAX_CONVERSATIONS {
                if let Some(oldest) = inner.order.pop_front() {
                    inner.chains.remove(&oldest);
                }
            }
        }
    }

    /// Forgets a conversation's chain (the server no longer has it).
    pub fn forget(&self, key: &str) {
        let mut inner = self.inner.lock();
        if inner.chains.remove(key).is_some() {
            inner.order.retain(|k| k.as_ref() != key);
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
        let mut history = Arc::new(vec![Item::user("hi")]);
        let sent = Sent::of(&history).unwrap();
        conversations.record(&key, "r1".into(), sent, answer("", &["c1"]));
        Arc::make_mut(&mut history).push(answer_item("", &["c1"]));
        // The answer alone: nothing new to send yet.
        assert_eq!(conversations.continuation("s", &history), None);
        Arc::make_mut(&mut history).push(Item::tool_result("c1", "ok", false));
        assert_eq!(
            conversations.continuation("s", &history),
            Some(Continuation {
                response_id: "r1".into(),
                first_new: 2
            })
        );
        assert_eq!(conversations.continuation("other", &history), None);
        // A copy (what an interceptor's edit makes) is another history.
        let copy = Arc::new(history.as_ref().clone());
        assert_eq!(conversations.continuation("s", &copy), None);
        conversations.forget("s");
        assert_eq!(conversations.continuation("s", &history), None);
    }

    #[test]
    fn another_answer_or_other_items_start_over() {
        let key: Arc<str> = "s".into();
        let conversations = Conversations::default();
        let mut history = Arc::new(vec![Item::user("hi")]);
        conversations.record(
            &key,
            "r1".into(),
            Sent::of(&history).unwrap(),
            answer("", &["c1"]),
        );
        Arc::make_mut(&mut history).push(answer_item("", &["c9"]));
        Arc::make_mut(&mut history).push(Item::tool_result("c9", "ok", false));
        assert_eq!(conversations.continuation("s", &history), None);
        // The same allocation holding other items (a replaced history).
        let items = Arc::make_mut(&mut history);
        items.clear();
        items.extend([
            Item::user("summary"),
            answer_item("", &["c1"]),
            Item::user("go on"),
        ]);
        assert_eq!(conversations.continuation("s", &history), None);
    }

    #[test]
    fn the_oldest_conversation_goes_first_beyond_the_cap() {
        let conversations = Conversations::default();
        let mut history = Arc::new(vec![Item::user("hi")]);
        let sent = Sent::of(&history).unwrap();
        for n in 0..=MAX_CONVERSATIONS {
            let key: Arc<str> = format!("s{n}").into();
            conversations.record(&key, format!("r{n}"), sent, answer("ok", &[]));
        }
        Arc::make_mut(&mut history).extend([answer_item("ok", &[]), Item::user("more")]);
        assert_eq!(conversations.continuation("s0", &history), None);
        assert!(conversations.continuation("s1", &history).is_some());
        let last = format!("s{MAX_CONVERSATIONS}");
        assert!(conversations.continuation(&last, &history).is_some());
    }
}
