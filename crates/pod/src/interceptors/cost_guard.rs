//! A run's money limit (`--max-cost`, `[budget] max_cost`): what a run and
//! the subagents it starts spend together, priced at the profile's prices,
//! stops the run before its next request once it reaches the limit.
//!
//! Every Pod of the run (the session and each subagent, however deep)
//! shares one [`CostMeter`]: each Pod's observer charges its answers to it
//! the moment they commit (so a subagent started by an answer already sees
//! that answer spent), and each Pod's [`CostGuard`] checks the total before
//! asking its model. A subagent that spends the rest stops at its next
//! request; its parent stops before the one after the subagent's result.
//! The meter starts at zero when the session's run starts (a resume is a
//! new run); compaction summaries are not counted.

use async_trait::async_trait;
use pod_llm::{Cost, Item, Prices};
use pod_worker::{Interceptor, Limit, PreRequestAction, RunStart};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// Money spent by a run and its subagents, shared by their guards.
#[derive(Clone, Debug, Default)]
pub struct CostMeter(Arc<AtomicU64>);

impl CostMeter {
    /// Spent so far in this run.
    pub fn spent(&self) -> Cost {
        Cost::from_micros(self.0.load(Ordering::SeqCst))
    }

    /// Adds `cost`.
    pub fn add(&self, cost: Cost) {
        self.0.fetch_add(cost.micros(), Ordering::SeqCst);
    }

    fn reset(&self) {
        self.0.store(0, Ordering::SeqCst);
    }
}

/// A run's money limit, the prices its answers are counted at, and the
/// meter its Pods share.
#[derive(Clone, Debug)]
pub struct CostBudget {
    /// The most a run may spend.
    pub max: Cost,
    /// This Pod's model's prices.
    pub prices: Prices,
    /// The run's spending, shared with its subagents.
    pub meter: CostMeter,
}

impl CostBudget {
    /// A limit of `max` at `prices`, with a fresh meter.
    pub fn new(max: Cost, prices: Prices) -> Self {
        Self {
            max,
            prices,
            meter: CostMeter::default(),
        }
    }
}

/// Stops a Pod's runs once the run's meter reaches the limit.
pub struct CostGuard {
    budget: CostBudget,
    // The session's own guard starts the meter at each run; a subagent's
    // adds to its parent's run.
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
            self.budget.meter.reset();
        }
    }

    async fn pre_llm_request(&mut self, _request: &mut Arc<Vec<Item>>) -> PreRequestAction {
        match self.budget.meter.spent() >= self.budget.max {
            true => PreRequestAction::Stop(Limit::RunCost(self.budget.max)),
            false => PreRequestAction::Continue,
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
        let budget = CostBudget::new(Cost::from_amount(10.0), Prices::default());
        let mut parent = CostGuard::new(budget.clone(), true);
        let mut child = CostGuard::new(budget.clone(), false);
        let mut request = Arc::new(Vec::new());
        budget.meter.add(Cost::from_amount(3.0));
        start(&mut parent).await;
        assert_eq!(
            budget.meter.spent(),
            Cost::default(),
            "a run starts at zero"
        );
        budget.meter.add(Cost::from_amount(4.0));
        // A subagent's run adds to its parent's.
        start(&mut child).await;
        assert_eq!(budget.meter.spent(), Cost::from_amount(4.0));
        assert_eq!(
            child.pre_llm_request(&mut request).await,
            PreRequestAction::Continue
        );
        budget.meter.add(Cost::from_amount(6.0));
        for guard in [&mut child, &mut parent] {
            assert_eq!(
                guard.pre_llm_request(&mut request).await,
                PreRequestAction::Stop(Limit::RunCost(Cost::from_amount(10.0)))
            );
        }
    }
}
