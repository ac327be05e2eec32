//! Money limits: the session's (`--max-cost`, `[budget] max_cost`, recorded
//! in its log) and a run's (`--max-run-cost`, `[budget] max_run_cost`).
//! What the session, or a run, and the subagents it starts spend together,
//! priced at the profile's prices, stops the run before its next request
//! once it reaches the limit.
//!
//! Every Pod of the session (the session and each subagent, however deep)
//! shares one [`CostBudget`] and its meters: each Pod's observer charges
//! its answers to them the moment they commit (so a subagent started by an
//! answer already sees that answer spent), and each Pod's [`CostGuard`]
//! checks the totals before asking its model. A subagent that spends the
//! rest stops at its next request; its parent stops before the one after
//! the subagent's result. The run meter starts at zero at each run of the
//! session; the session meter starts at what the log says the session
//! spent ([`crate::ledger::session_cost`]: its answers, its subagents' and
//! its graders'), so a restart, a crash's resume or another worker's
//! takeover continues it. The check is after the fact: a request is
//! charged when its answer commits, so a limit is passed by at most the
//! requests in flight when it was reached (one per Pod of the session).

use async_trait::async_trait;
use pod_llm::{Cost, Item, Prices};
use pod_worker::{Interceptor, Limit, PreRequestAction, RunStart};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// Money spent, shared by the guards of a session and its subagents.
#[derive(Clone, Debug, Default)]
pub struct CostMeter(Arc<AtomicU64>);

impl CostMeter {
    /// Spent so far.
    pub fn spent(&self) -> Cost {
        Cost::from_micros(self.0.load(Ordering::SeqCst))
    }

    /// Adds `cost`.
    pub fn add(&self, cost: Cost) {
        self.0.fetch_add(cost.micros(), Ordering::SeqCst);
    }

    /// Starts over at `cost`.
    pub fn set(&self, cost: Cost) {
        self.0.store(cost.micros(), Ordering::SeqCst);
    }
}

/// A session's money limits, the prices its answers are counted at, and
/// the meters its Pods share.
#[derive(Clone, Debug)]
pub struct CostBudget {
    /// The most one run (with its subagents) may spend; `None`: no limit.
    pub run_max: Option<Cost>,
    /// The most the session may spend over its life; `None`: no limit.
    /// The Pod sets it from its session budget when it starts.
    pub session_max: Option<Cost>,
    /// This session's model's prices.
    pub prices: Prices,
    /// The run's spending, shared with its subagents.
    pub meter: CostMeter,
    /// The session's spending since it was created.
    pub session: CostMeter,
}

impl CostBudget {
    /// Limits of `run_max` a run and `session_max` the session at
    /// `prices`, with fresh meters.
    pub fn new(run_max: Option<Cost>, session_max: Option<Cost>, prices: Prices) -> Self {
        Self {
            run_max,
            session_max,
            prices,
            meter: CostMeter::default(),
            session: CostMeter::default(),
        }
    }

    /// Charges `cost` to the run and the session.
    pub fn charge(&self, cost: Cost) {
        self.meter.add(cost);
        self.session.add(cost);
    }

    /// The limit spent, if one is.
    pub fn exceeded(&self) -> Option<Limit> {
        let spent = self.session.spent();
        if let Some(max) = self.session_max.filter(|max| spent >= *max) {
            return Some(Limit::SessionCost { max, spent });
        }
        match self.run_max {
            Some(max) if self.meter.spent() >= max => Some(Limit::RunCost(max)),
            _ => None,
        }
    }
}

/// Stops a Pod's runs once a meter reaches its limit.
pub struct CostGuard {
    budget: CostBudget,
    // The session's own guard starts the run meter at each run; a
    // subagent's adds to its parent's run.
    starts_runs: bool,
}

impl CostGuard {
    /// A guard of `budget`; `starts_runs` for the session's own Pod (not a
    /// subagent's).
    pub fn new(budget: CostBudget, starts_runs: bool) -> Self {
        Self {
            budget,
            starts_runs,
        }
    }
}

#[async_trait]
impl Interceptor for CostGuard {
    async fn on_run_start(&mut self, _run: &RunStart<'_>) {
        if self.starts_runs {
            self.budget.meter.set(Cost::default());
        }
    }

    async fn pre_llm_request(&mut self, _request: &mut Arc<Vec<Item>>) -> PreRequestAction {
        match self.budget.exceeded() {
            Some(limit) => PreRequestAction::Stop(limit),
            None => PreRequestAction::Continue,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn start(guard: &mut CostGuard) {
        let cancel = tokio_util::sync::CancellationToken::new();
        guard
            .on_run_start(&RunStart {
                history: &[],
                prompt: None,
                cancel: &cancel,
            })
            .await;
    }

    #[tokio::test]
    async fn a_run_and_its_subagents_share_one_limit() {
        let budget = CostBudget::new(Some(Cost::from_amount(10.0)), None, Prices::default());
        let mut parent = CostGuard::new(budget.clone(), true);
        let mut child = CostGuard::new(budget.clone(), false);
        let mut request = Arc::new(Vec::new());
        budget.charge(Cost::from_amount(3.0));
        start(&mut parent).await;
        assert_eq!(
            budget.meter.spent(),
            Cost::default(),
            "a run starts at zero"
        );
        budget.charge(Cost::from_amount(4.0));
        // A subagent's run adds to its parent's.
        start(&mut child).await;
        assert_eq!(budget.meter.spent(), Cost::from_amount(4.0));
        assert_eq!(
            child.pre_llm_request(&mut request).await,
            PreRequestAction::Continue
        );
        budget.charge(Cost::from_amount(6.0));
        for guard in [&mut child, &mut parent] {
            assert_eq!(
                guard.pre_llm_request(&mut request).await,
                PreRequestAction::Stop(Limit::RunCost(Cost::from_amount(10.0)))
            );
        }
    }

    #[tokio::test]
    async fn the_session_meter_goes_on_across_runs() {
        let mut budget = CostBudget::new(None, Some(Cost::from_amount(5.0)), Prices::default());
        budget.session.set(Cost::from_amount(4.0));
        budget.session_max = Some(Cost::from_amount(5.0));
        let mut guard = CostGuard::new(budget.clone(), true);
        let mut request = Arc::new(Vec::new());
        start(&mut guard).await;
        assert_eq!(
            guard.pre_llm_request(&mut request).await,
            PreRequestAction::Continue
        );
        budget.charge(Cost::from_amount(1.5));
        start(&mut guard).await;
        assert_eq!(
            guard.pre_llm_request(&mut request).await,
            PreRequestAction::Stop(Limit::SessionCost {
                max: Cost::from_amount(5.0),
                spent: Cost::from_amount(5.5)
            })
        );
    }
}
