//! Whether a session's last answer was verified, from its log: what `pod
//! sessions`, `pod show` and the API say of a session that has checks.

use crate::goal::RecordedGoal;
use pod::log::LogRecord;
use pod_llm::Item;
use serde::Serialize;

/// What the checks said of the last answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "state", rename_all = "snake_case")]
pub enum Verification {
    /// Every check (and the grader) passed, in this round.
    Verified {
        /// Which round since the prompt passed.
        round: u32,
    },
    /// They kept failing: the rounds are spent.
    Unverified {
        /// What failed, in words.
        why: String,
    },
    /// Its round was cut short (the process stopped while the checks ran)
    /// or its failure was never told to the model: `pod resume` goes on.
    Pending,
}

/// The verification of `history`'s last answer, for a session whose goal
/// is `goal`; `None` when it has no checks or does not end with an answer.
pub fn of(
    records: &[LogRecord],
    history: &[Item],
    goal: Option<&RecordedGoal>,
) -> Option<Verification> {
    let goal = goal.filter(|g| g.is_set())?;
    let answer = pod::verify::final_answer(history)?;
    let last = records.iter().rev().find_map(|record| match record {
        LogRecord::Verify(verify) if verify.answer == answer => Some(verify),
        _ => None,
    });
    Some(match last {
        Some(record) if record.passed => Verification::Verified {
            round: record.round,
        },
        Some(record) if record.round >= goal.max_rounds => Verification::Unverified {
            why: pod::verify::gave_up(record),
        },
        _ => Verification::Pending,
    })
}
