//! Every decision of the turn loop, without a model or a tool.

use super::*;
use pod_llm::SystemKind;

fn call(id: &str) -> ToolCall {
    ToolCall {
        id: id.into(),
        name: "t".into(),
        arguments: "{}".into(),
    }
}

fn usage(prompt: u64, completion: u64) -> Usage {
    Usage {
        prompt_tokens: prompt,
        completion_tokens: completion,
        ..Usage::default()
    }
}

fn answer(calls: &[&str]) -> Answer {
    Answer {
        calls: calls.iter().map(|id| call(id)).collect(),
        finish: None,
        usage: Some(usage(10, 5)),
    }
}

fn done(step: Step) -> Ending {
    match step {
        Step::Done(ending) => ending,
        other => panic!("expected the end, got {other:?}"),
    }
}

/// Drives one request to its answer: Prepare, Send, answered.
fn request(turn: &mut Turn, answer: Answer) {
    assert_eq!(turn.next(false), Step::Prepare);
    turn.prepared(PreRequestAction::Continue);
    assert_eq!(turn.next(false), Step::Send);
    turn.answered(answer);
}

#[test]
fn a_prompt_is_submitted_committed_then_sent_until_the_model_answers() {
    let prompt = Item::user("go");
    let mut turn = Turn::new(
        Budget::default(),
        Some(Box::new(prompt.clone())),
        Vec::new(),
        false,
    );
    assert_eq!(turn.next(false), Step::Submit(Box::new(prompt.clone())));
    let note = Item::system(SystemKind::Reminder, "plan");
    turn.submitted(Box::new(prompt.clone()), Ok(vec![note.clone()]));
    assert_eq!(turn.next(false), Step::Commit(vec![prompt, note]));
    request(&mut turn, answer(&["c1"]));
    assert_eq!(turn.next(false), Step::RunCalls(vec![call("c1")]));
    turn.calls_ran(None);
    request(&mut turn, answer(&[]));
    assert_eq!(turn.next(false), Step::EndOfAnswer);
    turn.turn_ended(TurnEndAction::Finish);
    let ending = done(turn.next(false));
    assert_eq!(ending.reason, TurnEndReason::EndTurn);
    assert_eq!(ending.abort, None);
    let outcome = turn.outcome(ending.reason);
    assert_eq!(outcome.requests, 2);
    assert_eq!(outcome.usage, usage(20, 10));
}

#[test]
fn calls_a_crash_interrupted_run_before_the_prompt() {
    let prompt = Item::user("more");
    let mut turn = Turn::new(
        Budget::default(),
        Some(Box::new(prompt.clone())),
        vec![call("old")],
        false,
    );
    assert_eq!(turn.next(false), Step::RunCalls(vec![call("old")]));
    turn.calls_ran(None);
    assert_eq!(turn.next(false), Step::Submit(Box::new(prompt)));
    // Without a prompt, the model is asked next.
    let mut turn = Turn::new(Budget::default(), None, vec![call("old")], false);
    assert_eq!(turn.next(false), Step::RunCalls(vec![call("old")]));
    turn.calls_ran(None);
    assert_eq!(turn.next(false), Step::Prepare);
}

#[test]
fn a_rejected_prompt_commits_nothing_and_ends_quietly() {
    let prompt = Item::user("huge");
    let mut turn = Turn::new(
        Budget::default(),
        Some(Box::new(prompt.clone())),
        Vec::new(),
        false,
    );
    turn.next(false);
    turn.submitted(Box::new(prompt), Err("too large".into()));
    let ending = done(turn.next(false));
    assert_eq!(ending.reason, TurnEndReason::Rejected("too large".into()));
    assert_eq!(ending.abort, None);
}

#[test]
fn a_cancelled_run_ends_before_the_next_request_and_tells_the_hooks() {
    let mut turn = Turn::new(Budget::default(), None, Vec::new(), false);
    let ending = done(turn.next(true));
    assert_eq!(ending.reason, TurnEndReason::Cancelled);
    assert_eq!(ending.abort, Some(AbortReason::Cancelled));
    assert_eq!(turn.outcome(ending.reason).requests, 0);
    // Cancelled while the answer streamed.
    let mut turn = Turn::new(Budget::default(), None, Vec::new(), false);
    turn.next(false);
    turn.prepared(PreRequestAction::Continue);
    turn.next(false);
    turn.cancelled();
    assert_eq!(done(turn.next(false)).abort, Some(AbortReason::Cancelled));
}

#[test]
fn the_run_budget_is_checked_before_every_request() {
    let budget = Budget {
        requests: Some(1),
        ..Budget::default()
    };
    let mut turn = Turn::new(budget, None, Vec::new(), false);
    request(&mut turn, answer(&["c1"]));
    turn.next(false);
    turn.calls_ran(None);
    let ending = done(turn.next(false));
    assert_eq!(ending.reason, TurnEndReason::Limit(Limit::RunRequests(1)));
    assert_eq!(ending.abort, None);
    // Tokens count what the provider reported.
    let budget = Budget {
        tokens: Some(15),
        ..Budget::default()
    };
    let mut turn = Turn::new(budget, None, Vec::new(), false);
    request(&mut turn, answer(&["c1"]));
    turn.next(false);
    turn.calls_ran(None);
    assert_eq!(
        done(turn.next(false)).reason,
        TurnEndReason::Limit(Limit::RunTokens(15))
    );
}

#[test]
fn each_pre_request_action_leads_where_it_says() {
    let prepared = |action, can_compact| {
        let mut turn = Turn::new(Budget::default(), None, Vec::new(), can_compact);
        assert_eq!(turn.next(false), Step::Prepare);
        turn.prepared(action);
        turn.next(false)
    };
    let ending = done(prepared(PreRequestAction::Cancel("no".into()), false));
    assert_eq!(ending.reason, TurnEndReason::Aborted("no".into()));
    assert_eq!(ending.abort, Some(AbortReason::Interceptor("no".into())));
    let ending = done(prepared(
        PreRequestAction::Stop(Limit::SessionRequests(3)),
        false,
    ));
    assert_eq!(
        ending.reason,
        TurnEndReason::Limit(Limit::SessionRequests(3))
    );
    assert_eq!(ending.abort, None);
    // A yield to compact ends the turn unless the driver can compact.
    let ending = done(prepared(
        PreRequestAction::Yield(YieldReason::Compact),
        false,
    ));
    assert_eq!(ending.reason, TurnEndReason::Yielded(YieldReason::Compact));
    assert_eq!(
        prepared(PreRequestAction::Yield(YieldReason::Compact), true),
        Step::Compact
    );
}

#[test]
fn after_a_compaction_the_request_is_prepared_again_whatever_came_of_it() {
    for outcome in [
        CompactionOutcome::Compacted {
            tokens_before: 900,
            tokens_after: 100,
        },
        CompactionOutcome::Failed("the compact model is down".into()),
        CompactionOutcome::NothingToCompact,
    ] {
        let mut turn = Turn::new(Budget::default(), None, Vec::new(), true);
        turn.next(false);
        turn.prepared(PreRequestAction::Yield(YieldReason::Compact));
        assert_eq!(turn.next(false), Step::Compact);
        turn.compacted(&outcome);
        assert_eq!(turn.next(false), Step::Prepare, "{outcome:?}");
        // No request was counted for the yield.
        assert_eq!(turn.requests(), 0);
    }
    // Cancelled during it: the turn ends at the next step.
    let mut turn = Turn::new(Budget::default(), None, Vec::new(), true);
    turn.next(false);
    turn.prepared(PreRequestAction::Yield(YieldReason::Compact));
    turn.next(false);
    turn.compacted(&CompactionOutcome::Cancelled);
    assert_eq!(done(turn.next(true)).reason, TurnEndReason::Cancelled);
}

#[test]
fn the_finish_reason_names_the_end_of_an_answer_without_calls() {
    for (finish, reason) in [
        (None, TurnEndReason::EndTurn),
        (Some(FinishReason::Stop), TurnEndReason::EndTurn),
        (Some(FinishReason::Length), TurnEndReason::MaxTokens),
        (Some(FinishReason::Refusal), TurnEndReason::Refusal),
    ] {
        let mut turn = Turn::new(Budget::default(), None, Vec::new(), false);
        request(
            &mut turn,
            Answer {
                finish,
                ..Answer::default()
            },
        );
        assert_eq!(turn.next(false), Step::EndOfAnswer);
        turn.turn_ended(TurnEndAction::Finish);
        assert_eq!(done(turn.next(false)).reason, reason);
    }
}

#[test]
fn turn_end_continues_pauses_or_stops_at_the_continuation_budget() {
    let more = vec![Item::system(SystemKind::Reminder, "go on")];
    let mut turn = Turn::new(Budget::default(), None, Vec::new(), false);
    request(&mut turn, answer(&[]));
    turn.next(false);
    turn.turn_ended(TurnEndAction::ContinueWithMessages(more.clone()));
    assert_eq!(turn.next(false), Step::Commit(more.clone()));
    assert_eq!(turn.next(false), Step::Prepare);

    let budget = Budget {
        continuations: Some(0),
        ..Budget::default()
    };
    let mut turn = Turn::new(budget, None, Vec::new(), false);
    request(&mut turn, answer(&[]));
    turn.next(false);
    turn.turn_ended(TurnEndAction::ContinueWithMessages(more));
    assert_eq!(
        done(turn.next(false)).reason,
        TurnEndReason::Limit(Limit::Continuations(0)),
        "the messages are not committed"
    );

    let mut turn = Turn::new(Budget::default(), None, Vec::new(), false);
    request(&mut turn, answer(&[]));
    turn.next(false);
    turn.turn_ended(TurnEndAction::Pause);
    assert_eq!(
        done(turn.next(false)).reason,
        TurnEndReason::Paused("paused at turn end".into())
    );

    let mut turn = Turn::new(Budget::default(), None, Vec::new(), false);
    request(&mut turn, answer(&[]));
    turn.next(false);
    turn.turn_ended(TurnEndAction::Stall);
    let ending = done(turn.next(false));
    assert_eq!(ending.reason, TurnEndReason::Stalled);
    assert_eq!(ending.abort, None);
}

#[test]
fn tool_calls_that_stop_the_turn_say_how_and_who_hears_of_it() {
    let stopped = |stop| {
        let mut turn = Turn::new(Budget::default(), None, Vec::new(), false);
        request(&mut turn, answer(&["c1"]));
        turn.next(false);
        turn.calls_ran(Some(stop));
        done(turn.next(false))
    };
    let ending = stopped(CallsStop::Aborted("guard".into()));
    assert_eq!(ending.reason, TurnEndReason::Aborted("guard".into()));
    assert_eq!(ending.abort, Some(AbortReason::Interceptor("guard".into())));
    let ending = stopped(CallsStop::Paused("ask later".into()));
    assert_eq!(ending.reason, TurnEndReason::Paused("ask later".into()));
    assert_eq!(ending.abort, None);
    let repeated = Limit::RepeatedFailure {
        tool: "bash".into(),
        times: 5,
    };
    let ending = stopped(CallsStop::Limit(repeated.clone()));
    assert_eq!(ending.reason, TurnEndReason::Limit(repeated));
    assert_eq!(ending.abort, None);
    let ending = stopped(CallsStop::Cancelled);
    assert_eq!(ending.abort, Some(AbortReason::Cancelled));
    let ending = stopped(CallsStop::Parked("waiting for an answer".into()));
    assert_eq!(
        ending.reason,
        TurnEndReason::Parked("waiting for an answer".into())
    );
    assert_eq!(ending.abort, None);
}

#[test]
fn a_step_asked_for_twice_without_its_result_ends_the_turn() {
    let mut turn = Turn::new(Budget::default(), None, Vec::new(), false);
    assert_eq!(turn.next(false), Step::Prepare);
    let ending = done(turn.next(false));
    assert!(
        matches!(ending.reason, TurnEndReason::Aborted(_)),
        "{ending:?}"
    );
    // And stays ended.
    assert_eq!(done(turn.next(false)), ending);
}
