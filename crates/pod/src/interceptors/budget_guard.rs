//! A session budget: a cap on the model requests, tokens and wall time of
//! a whole session, across runs, crashes and resumes, for embedders who
//! run agents on someone's bill (its money cap is the [`CostGuard`](super::CostGuard)'s,
//! which sees subagents' answers as they commit). It is an ordinary interceptor (the example the docs
//! point embedders to): it keeps its books from the committed history and
//! ends the run cleanly, before a request, once the budget is spent; the
//! history stays valid and a larger budget lets a later run go on.
//!
//! What was spent before the Pod started is read from the log (every
//! answer in it, compacted ones included: [`Spent::of_log`]).

use crate::log::LogRecord;
use async_trait::async_trait;
use pod_llm::{Item, ItemKind};
use pod_worker::{Interceptor, Limit, PreRequestAction, RunStart};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

/// The caps; `None` is no cap. Recorded in the session's log
/// ([`LogRecord::Limits`]) whenever they are set or raised, so every
/// later start (a resume, a crash's, another worker's) holds them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SessionBudget {
    /// Model requests over the session's life.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requests: Option<u64>,
    /// Tokens (prompt + completion, as providers report them) over the
    /// session's life.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tokens: Option<u64>,
    /// Money over the session's life: its answers, its subagents' and its
    /// graders', at the profile's prices (enforced by the [`CostGuard`](super::CostGuard)).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost: Option<pod_llm::Cost>,
    /// Seconds from the session's creation after which no request is sent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wall_secs: Option<u64>,
}

impl SessionBudget {
    /// Whether any cap is set.
    pub fn is_set(&self) -> bool {
        self.requests.is_some()
            || self.tokens.is_some()
            || self.cost.is_some()
            || self.wall_secs.is_some()
    }

    /// These caps with every cap `over` sets replaced.
    pub fn overlaid(self, over: SessionBudget) -> SessionBudget {
        SessionBudget {
            requests: over.requests.or(self.requests),
            tokens: over.tokens.or(self.tokens),
            cost: over.cost.or(self.cost),
            wall_secs: over.wall_secs.or(self.wall_secs),
        }
    }

    /// The caps the log recorded last (none when it recorded none).
    pub fn recorded(records: &[LogRecord]) -> Option<SessionBudget> {
        records.iter().rev().find_map(|record| match record {
            LogRecord::Limits(limits) => Some(limits.limits),
            _ => None,
        })
    }
}

/// Requests and tokens spent.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Spent {
    /// Model requests (answers in the log).
    pub requests: u64,
    /// Tokens the answers reported.
    pub tokens: u64,
}

impl Spent {
    /// What the answers of a log spent. A compaction's tail repeats items
    /// of the log; only the originals count.
    pub fn of_log(records: &[LogRecord]) -> Self {
        let (usage, answers) = crate::ledger::session_usage(records);
        Self {
            requests: answers,
            tokens: usage.prompt_tokens + usage.completion_tokens,
        }
    }

    fn count(&mut self, item: &Item) {
        if let ItemKind::Assistant { usage, .. } = &item.kind {
            self.requests += 1;
            if let Some(usage) = usage {
                self.tokens += usage.prompt_tokens + usage.completion_tokens;
            }
        }
    }
}

/// Ends runs once the session budget is spent.
pub struct SessionBudgetGuard {
    budget: SessionBudget,
    spent: Spent,
    // When the session was created: its wall time counts from there.
    created_at: Option<chrono::DateTime<chrono::Utc>>,
    // The newest answer already counted; answers after it are new. Copies in
    // a compacted history keep their ids, so nothing is counted twice.
    counted_up_to: Option<Uuid>,
    started: bool,
}

impl SessionBudgetGuard {
    /// A guard of `budget`, `spent` before this Pod started.
    pub fn new(budget: SessionBudget, spent: Spent) -> Self {
        Self {
            budget,
            spent,
            created_at: None,
            counted_up_to: None,
            started: false,
        }
    }

    /// The same guard, counting wall time from `created_at`.
    pub fn created_at(mut self, created_at: chrono::DateTime<chrono::Utc>) -> Self {
        self.created_at = Some(created_at);
        self
    }

    /// What the session has spent so far.
    pub fn spent(&self) -> Spent {
        self.spent
    }

    fn count_new(&mut self, history: &[Item]) {
        let start = match self.counted_up_to {
            Some(id) => history
                .iter()
                .rposition(|item| item.id == id)
                .map_or(history.len(), |at| at + 1),
            None => 0,
        };
        for item in &history[start..] {
            self.spent.count(item);
        }
        if let Some(last) = history
            .iter()
            .rev()
            .find(|item| matches!(item.kind, ItemKind::Assistant { .. }))
        {
            self.counted_up_to = Some(last.id);
        }
    }

    fn exceeded(&self) -> Option<Limit> {
        if let Some(max) = self
            .budget
            .requests
            .filter(|max| self.spent.requests >= *max)
        {
            return Some(Limit::SessionRequests(max));
        }
        if let Some(max) = self.budget.tokens.filter(|max| self.spent.tokens >= *max) {
            return Some(Limit::SessionTokens(max));
        }
        if let (Some(max_secs), Some(created)) = (self.budget.wall_secs, self.created_at) {
            let elapsed = (chrono::Utc::now() - created).num_seconds();
            if elapsed >= i64::try_from(max_secs).unwrap_or(i64::MAX) {
                return Some(Limit::SessionWall { max_secs });
            }
        }
        None
    }
}

#[async_trait]
impl Interceptor for SessionBudgetGuard {
    async fn on_run_start(&mut self, run: &RunStart<'_>) {
        if !std::mem::replace(&mut self.started, true) {
            // The history the Pod started with is in `spent` already.
            self.counted_up_to = run
                .history
                .iter()
                .rev()
                .find(|item| matches!(item.kind, ItemKind::Assistant { .. }))
                .map(|item| item.id);
        }
    }

    async fn pending_history_appends(&mut self, history: &[Item]) -> Vec<Item> {
        self.count_new(history);
        Vec::new()
    }

    async fn pre_llm_request(
        &mut self,
        _request: &mut std::sync::Arc<Vec<Item>>,
    ) -> PreRequestAction {
        match self.exceeded() {
            Some(limit) => PreRequestAction::Stop(limit),
            None => PreRequestAction::Continue,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pod_llm::Usage;

    fn answer(tokens: u64) -> Item {
        Item::new(ItemKind::Assistant {
            text: "a".into(),
            reasoning: None,
            tool_calls: Vec::new(),
            usage: Some(Usage {
                prompt_tokens: tokens,
                completion_tokens: 0,
                ..Default::default()
            }),
        })
    }

    #[tokio::test]
    async fn stops_once_spent_and_counts_each_answer_once() {
        let budget = SessionBudget {
            tokens: Some(100),
            ..SessionBudget::default()
        };
        let mut guard = SessionBudgetGuard::new(
            budget,
            Spent {
                requests: 1,
                tokens: 40,
            },
        );
        let before = vec![Item::user("go"), answer(40)];
        let cancel = tokio_util::sync::CancellationToken::new();
        guard
            .on_run_start(&RunStart {
                history: &before,
                prompt: None,
                cancel: &cancel,
            })
            .await;
        let mut history = before.clone();
        guard.pending_history_appends(&history).await;
        assert_eq!(
            guard.spent(),
            Spent {
                requests: 1,
                tokens: 40
            }
        );
        assert_eq!(
            guard
                .pre_llm_request(&mut std::sync::Arc::new(history.clone()))
                .await,
            PreRequestAction::Continue
        );
        history.push(answer(30));
        guard.pending_history_appends(&history).await;
        guard.pending_history_appends(&history).await;
        assert_eq!(
            guard.spent(),
            Spent {
                requests: 2,
                tokens: 70
            }
        );
        // A compaction keeps the last answer as a copy: not counted again.
        let compacted = vec![Item::user("summary"), history[2].clone()];
        guard.pending_history_appends(&compacted).await;
        assert_eq!(guard.spent().requests, 2);
        let mut history = compacted;
        history.push(answer(30));
        guard.pending_history_appends(&history).await;
        assert_eq!(
            guard.spent(),
            Spent {
                requests: 3,
                tokens: 100
            }
        );
        assert_eq!(
            guard
                .pre_llm_request(&mut std::sync::Arc::new(history.clone()))
                .await,
            PreRequestAction::Stop(Limit::SessionTokens(100))
        );
    }

    #[test]
    fn the_log_counts_every_answer_once() {
        let records = vec![
            LogRecord::Item(Item::user("go")),
            LogRecord::Item(answer(10)),
            LogRecord::Item(answer(5)),
        ];
        assert_eq!(
            Spent::of_log(&records),
            Spent {
                requests: 2,
                tokens: 15
            }
        );
    }
}
