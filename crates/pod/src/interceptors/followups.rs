//! Follow-ups the agent schedules (`schedule_followup`, opt-in): the call
//! parks the turn until its time, and runs (returning the agent's note)
//! when the session is continued then.
//!
//! Parking is the durable-question machinery's: the call stays open
//! without a result, the Pod hands the session over as waiting
//! ([`Waits::Until`]), and a store with workers (PostgreSQL) has any fleet
//! worker claim it at that time. The tool is resumable, so the open call
//! survives the restart and the next run offers it here again: before its
//! time it parks again (a `pod resume` too early changes nothing), after
//! it, it runs.
//!
//! When it is due is fixed once: the time of the answer that made the call
//! plus the delay (replayed from the log; a live call counts from when it
//! reaches this interceptor, a moment after). A session that no worker
//! would wake (not run by a fleet worker) gets a result saying so instead
//! of parking for ever.

use crate::gate::ParkedOn;
use crate::store::Waits;
use chrono::{DateTime, Utc};
use pod_llm::{Item, ItemKind};
use pod_tools::followup::{self, SCHEDULE_FOLLOWUP};
use pod_worker::{Interceptor, PreToolAction, ToolCallInfo};
use std::collections::{HashMap, HashSet};

/// What a call gets when no worker would wake the session.
const NO_WAKER: &str = "schedule_followup did not run: this session is not run by a fleet \
worker, so nothing would wake it later. Do what you can now, and end by saying what should be \
checked again and when. (Sessions queued with `pod submit` on a PostgreSQL store and run by \
`pod serve` can schedule follow-ups.)";

/// Parks `schedule_followup` calls until they are due.
pub struct Followups {
    parked: ParkedOn,
    // Whether a worker wakes the session once it parks (a fleet worker
    // runs it).
    wakes: bool,
    // When each call seen is due, by call id.
    due: HashMap<String, DateTime<Utc>>,
}

impl Followups {
    /// Follow-ups of a session whose replayed active context is `history`
    /// (the open calls' due times come from it); `wakes` when a worker
    /// wakes the session once it parks.
    pub(crate) fn new(parked: ParkedOn, wakes: bool, history: &[Item]) -> Self {
        Self {
            parked,
            wakes,
            due: open_due(history),
        }
    }
}

/// The due times of the open `schedule_followup` calls of the last answer.
fn open_due(history: &[Item]) -> HashMap<String, DateTime<Utc>> {
    let Some(at) = history
        .iter()
        .rposition(|item| matches!(item.kind, ItemKind::Assistant { .. }))
    else {
        return HashMap::new();
    };
    let answered: HashSet<&str> = history[at + 1..]
        .iter()
        .filter_map(|item| match &item.kind {
            ItemKind::ToolResult { call_id, .. } => Some(call_id.as_str()),
            _ => None,
        })
        .collect();
    let answer = &history[at];
    answer
        .tool_calls()
        .iter()
        .filter(|call| call.name == SCHEDULE_FOLLOWUP && !answered.contains(call.id.as_str()))
        .filter_map(|call| {
            let delay = followup::parse(&call.arguments).ok()?.delay;
            let delay = chrono::Duration::from_std(delay).ok()?;
            Some((call.id.clone(), answer.at + delay))
        })
        .collect()
}

#[async_trait::async_trait]
impl Interceptor for Followups {
    async fn pre_tool_call(&mut self, call: &mut ToolCallInfo) -> PreToolAction {
        if call.name != SCHEDULE_FOLLOWUP {
            return PreToolAction::Continue;
        }
        let asked = match followup::parse(&call.arguments) {
            Ok(asked) => asked,
            Err(text) => return PreToolAction::Skip(text),
        };
        let now = Utc::now();
        let due = match self.due.get(&call.call_id) {
            Some(due) => *due,
            // Nobody would wake it: refused at once.
            None if !self.wakes => return PreToolAction::Skip(NO_WAKER.into()),
            None => {
                let delay = chrono::Duration::from_std(asked.delay).unwrap_or_default();
                *self.due.entry(call.call_id.clone()).or_insert(now + delay)
            }
        };
        if now >= due {
            return PreToolAction::Continue;
        }
        // Continued before its time where nothing would wake it again (a
        // `pod resume` by hand): the wait ends here, saying so.
        if !self.wakes {
            return PreToolAction::Skip(NO_WAKER.into());
        }
        self.parked.set(Waits::Until { at: due });
        PreToolAction::Park(format!(
            "waiting for its follow-up at {}",
            due.format("%Y-%m-%d %H:%M:%S UTC")
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pod_llm::ToolCall;

    fn followup_call(id: &str, delay: &str) -> ToolCall {
        ToolCall {
            id: id.into(),
            name: SCHEDULE_FOLLOWUP.into(),
            arguments: serde_json::json!({"in": delay, "note": "check CI"}).to_string(),
        }
    }

    fn info(call: &ToolCall) -> ToolCallInfo {
        ToolCallInfo {
            call_id: call.id.clone(),
            name: call.name.clone(),
            arguments: call.arguments.clone(),
        }
    }

    #[tokio::test]
    async fn a_call_parks_until_due_and_runs_after_bad_ones_are_refused() {
        let parked = ParkedOn::default();
        let mut followups = Followups::new(parked.clone(), true, &[]);
        let call = followup_call("c1", "1h");
        let action = followups.pre_tool_call(&mut info(&call)).await;
        assert!(matches!(action, PreToolAction::Park(_)), "{action:?}");
        let Some(Waits::Until { at }) = parked.take() else {
            panic!("not parked until a time");
        };
        let ahead = at - Utc::now();
        assert!(ahead > chrono::Duration::minutes(59), "{ahead}");

        // Replayed from an answer two hours old: due, so it runs.
        let answer = Item::with_id(
            uuid::Uuid::new_v4(),
            Utc::now() - chrono::Duration::hours(2),
            ItemKind::Assistant {
                text: String::new(),
                reasoning: None,
                tool_calls: vec![call.clone()],
                usage: None,
            },
        );
        let mut replayed = Followups::new(parked.clone(), true, std::slice::from_ref(&answer));
        let action = replayed.pre_tool_call(&mut info(&call)).await;
        assert_eq!(action, PreToolAction::Continue);
        assert!(parked.take().is_none());
        // Resumed by hand once due: it runs there too.
        let mut by_hand = Followups::new(parked.clone(), false, &[answer]);
        let action = by_hand.pre_tool_call(&mut info(&call)).await;
        assert_eq!(action, PreToolAction::Continue);

        let bad = followup_call("c2", "8d");
        let action = followups.pre_tool_call(&mut info(&bad)).await;
        assert!(
            matches!(&action, PreToolAction::Skip(text) if text.contains("between 1s and 7d")),
            "{action:?}"
        );
        // Nobody would wake it: refused, saying so.
        let mut alone = Followups::new(parked.clone(), false, &[]);
        let action = alone.pre_tool_call(&mut info(&call)).await;
        assert!(
            matches!(&action, PreToolAction::Skip(text) if text.contains("fleet")),
            "{action:?}"
        );
        assert!(parked.take().is_none());
    }
}
