//! Every interceptor hook fires in the documented order with its effect.

use crate::support::{result_of, shape, Observed, Recorder, TestWorker};
use pod_llm::{validate_history, Item, ItemKind, ScriptStep, SystemKind};
use pod_worker::{
    AbortReason, PostToolAction, PreRequestAction, PreToolAction, PromptAction, TurnEndAction,
    TurnEndReason, YieldReason,
};
use serde_json::json;
use std::sync::atomic::Ordering;

fn echo(text: &str) -> serde_json::Value {
    json!({ "text": text })
}

#[tokio::test]
async fn hooks_fire_in_the_documented_order() {
    let mut t = TestWorker::new(vec![
        ScriptStep::tool_call("echo", echo("a")).and_call("echo", echo("b")),
        ScriptStep::text("done"),
    ]);
    let mut hooks = Recorder::new();
    let mut seen = Observed::default();
    let outcome = t.turn(Some("go"), &mut hooks, &mut seen).await.unwrap();
    assert_eq!(outcome.reason, TurnEndReason::EndTurn);
    assert_eq!(outcome.requests, 2);
    assert_eq!(
        hooks.log,
        [
            "on_prompt_submit",
            "pending_history_appends",
            "pre_llm_request",
            "pre_tool_call call_0_0 echo",
            "post_tool_call call_0_0 echo error=false",
            "pre_tool_call call_0_1 echo",
            "post_tool_call call_0_1 echo error=false",
            "pending_history_appends",
            "pre_llm_request",
            "on_turn_end",
        ]
    );
    assert!(hooks.aborts.is_empty());
    // on_turn_end is given what this turn committed.
    assert_eq!(hooks.turn_end_seen, [t.history().to_vec()]);
    t.assert_valid(&seen);
}

#[tokio::test]
async fn on_prompt_submit_may_edit_the_prompt() {
    let mut t = TestWorker::new(vec![ScriptStep::text("ok")]);
    let mut hooks = Recorder::new().rewrite_prompt("edited");
    let mut seen = Observed::default();
    t.turn(Some("original"), &mut hooks, &mut seen)
        .await
        .unwrap();
    assert_eq!(shape(t.history()), ["user:edited", "assistant:ok[]"]);
    assert_eq!(shape(&t.provider.requests()[0].history), ["user:edited"]);
}

#[tokio::test]
async fn on_prompt_submit_cancel_commits_nothing_and_sends_nothing() {
    let mut t = TestWorker::new(vec![ScriptStep::text("never")]);
    let mut hooks = Recorder::new().on_prompt(PromptAction::Cancel("not now".into()));
    let mut seen = Observed::default();
    let outcome = t.turn(Some("go"), &mut hooks, &mut seen).await.unwrap();
    assert_eq!(outcome.reason, TurnEndReason::Rejected("not now".into()));
    assert_eq!(outcome.requests, 0);
    assert!(t.history().is_empty());
    assert!(seen.items.is_empty());
    assert!(t.provider.requests().is_empty());
    assert_eq!(hooks.log, ["on_prompt_submit"]);
}

#[tokio::test]
async fn on_prompt_submit_continue_with_commits_the_prompt_then_the_items() {
    let mut t = TestWorker::new(vec![ScriptStep::text("ok")]);
    let extra = Item::system(SystemKind::Reminder, "remember the plan");
    let mut hooks = Recorder::new().on_prompt(PromptAction::ContinueWith(vec![extra.clone()]));
    let mut seen = Observed::default();
    t.turn(Some("go"), &mut hooks, &mut seen).await.unwrap();
    assert_eq!(
        shape(t.history()),
        ["user:go", "system:remember the plan", "assistant:ok[]"]
    );
    assert_eq!(t.history()[1], extra);
    assert_eq!(t.provider.requests()[0].history[..], t.history()[..2]);
    t.assert_valid(&seen);
}

#[tokio::test]
async fn pending_history_appends_are_committed_before_each_request() {
    let mut t = TestWorker::new(vec![
        ScriptStep::tool_call("echo", echo("a")),
        ScriptStep::text("done"),
    ]);
    let mut hooks = Recorder::new()
        .appends(vec![Item::system(SystemKind::Reminder, "first")])
        .appends(vec![
            Item::system(SystemKind::Notification, "second"),
            Item::system(SystemKind::Notification, "third"),
        ]);
    let mut seen = Observed::default();
    t.turn(Some("go"), &mut hooks, &mut seen).await.unwrap();
    assert_eq!(
        shape(t.history()),
        [
            "user:go",
            "system:first",
            "assistant:[\"call_0_0\"]",
            "result:call_0_0",
            "system:second",
            "system:third",
            "assistant:done[]",
        ]
    );
    let requests = t.provider.requests();
    assert_eq!(requests[0].history[..], t.history()[..2]);
    assert_eq!(requests[1].history[..], t.history()[..6]);
    t.assert_valid(&seen);
}

#[tokio::test]
async fn pre_llm_request_edits_reach_the_request_but_not_history() {
    let mut t = TestWorker::new(vec![
        ScriptStep::tool_call("echo", echo("a")),
        ScriptStep::text("done"),
    ]);
    let mut hooks = Recorder::new().edit_request(|request| {
        request.push(Item::system(SystemKind::Reminder, "request-only"));
        if let ItemKind::User { text } = &mut request[0].kind {
            text.push_str(" (edited)");
        }
    });
    let mut seen = Observed::default();
    t.turn(Some("go"), &mut hooks, &mut seen).await.unwrap();
    let requests = t.provider.requests();
    assert_eq!(
        shape(&requests[0].history),
        ["user:go (edited)", "system:request-only"]
    );
    // Each request starts from history again: the first edit is not carried.
    assert_eq!(
        shape(&requests[1].history),
        [
            "user:go (edited)",
            "assistant:[\"call_0_0\"]",
            "result:call_0_0",
            "system:request-only",
        ]
    );
    assert_eq!(
        shape(t.history()),
        [
            "user:go",
            "assistant:[\"call_0_0\"]",
            "result:call_0_0",
            "assistant:done[]"
        ]
    );
    t.assert_valid(&seen);
}

#[tokio::test]
async fn requests_name_their_history_until_it_is_edited_or_replaced() {
    let mut t = TestWorker::new(vec![
        ScriptStep::tool_call("echo", echo("a")),
        ScriptStep::text("done"),
        ScriptStep::text("edited"),
        ScriptStep::text("replaced"),
    ]);
    let mut seen = Observed::default();
    t.turn(Some("go"), &mut Recorder::new(), &mut seen)
        .await
        .unwrap();
    let mut editing = Recorder::new().edit_request(|request| {
        request.push(Item::system(SystemKind::Reminder, "request-only"));
    });
    t.turn(Some("again"), &mut editing, &mut seen)
        .await
        .unwrap();
    let history = t.history().to_vec();
    t.worker.set_history(history);
    t.turn(Some("more"), &mut Recorder::new(), &mut seen)
        .await
        .unwrap();
    let ids: Vec<_> = t.provider.requests().iter().map(|r| r.history_id).collect();
    // One grown history: one id; an edited request: none; a replaced
    // history: a new id.
    assert!(ids[0].is_some());
    assert_eq!(ids[1], ids[0]);
    assert_eq!(ids[2], None);
    assert!(ids[3].is_some());
    assert_ne!(ids[3], ids[0]);
    t.assert_valid(&seen);
}

#[tokio::test]
async fn pre_llm_request_cancel_ends_the_turn_without_a_request() {
    let mut t = TestWorker::new(vec![ScriptStep::text("never")]);
    let mut hooks = Recorder::new().pre_request(PreRequestAction::Cancel("budget".into()));
    let mut seen = Observed::default();
    let outcome = t.turn(Some("go"), &mut hooks, &mut seen).await.unwrap();
    assert_eq!(outcome.reason, TurnEndReason::Aborted("budget".into()));
    assert_eq!(outcome.requests, 0);
    assert!(t.provider.requests().is_empty());
    assert_eq!(shape(t.history()), ["user:go"]);
    assert_eq!(hooks.aborts, [AbortReason::Interceptor("budget".into())]);
    assert_eq!(
        hooks.log.last().unwrap(),
        "on_abort Interceptor(\"budget\")"
    );
    t.assert_valid(&seen);
}

#[tokio::test]
async fn pre_llm_request_yield_ends_the_turn_and_a_new_turn_continues() {
    let mut t = TestWorker::new(vec![ScriptStep::text("continued")]);
    let mut hooks = Recorder::new().pre_request(PreRequestAction::Yield(YieldReason::Compact));
    let mut seen = Observed::default();
    let outcome = t.turn(Some("go"), &mut hooks, &mut seen).await.unwrap();
    assert_eq!(outcome.reason, TurnEndReason::Yielded(YieldReason::Compact));
    assert!(t.provider.requests().is_empty());
    assert!(hooks.aborts.is_empty(), "yield is not an abort");

    let outcome = t.turn(None, &mut hooks, &mut seen).await.unwrap();
    assert_eq!(outcome.reason, TurnEndReason::EndTurn);
    assert_eq!(shape(t.history()), ["user:go", "assistant:continued[]"]);
    t.assert_valid(&seen);
}

#[tokio::test]
async fn pre_tool_call_skip_answers_without_running_and_the_turn_goes_on() {
    let mut t = TestWorker::new(vec![
        ScriptStep::tool_call("echo", echo("a")).and_call("echo", echo("b")),
        ScriptStep::text("done"),
    ]);
    let mut hooks = Recorder::new().pre_tool("call_0_0", PreToolAction::Skip("denied".into()));
    let mut seen = Observed::default();
    let outcome = t.turn(Some("go"), &mut hooks, &mut seen).await.unwrap();
    assert_eq!(outcome.reason, TurnEndReason::EndTurn);
    assert_eq!(t.echo.runs.load(Ordering::SeqCst), 1);
    assert_eq!(result_of(t.history(), "call_0_0"), ("denied".into(), true));
    assert_eq!(result_of(t.history(), "call_0_1"), ("b".into(), false));
    assert!(hooks
        .log
        .contains(&"post_tool_call call_0_1 echo error=false".to_string()));
    assert!(
        !hooks
            .log
            .iter()
            .any(|l| l.starts_with("post_tool_call call_0_0")),
        "a skipped call has no post_tool_call"
    );
    t.assert_valid(&seen);
}

#[tokio::test]
async fn pre_tool_call_may_edit_the_arguments() {
    let mut t = TestWorker::new(vec![
        ScriptStep::tool_call("echo", echo("original")),
        ScriptStep::text("done"),
    ]);
    let mut hooks = Recorder::new().tool_args("call_0_0", r#"{"text":"edited"}"#);
    let mut seen = Observed::default();
    t.turn(Some("go"), &mut hooks, &mut seen).await.unwrap();
    assert_eq!(result_of(t.history(), "call_0_0"), ("edited".into(), false));
    // History keeps what the model sent.
    assert_eq!(
        t.history()[1].tool_calls()[0].arguments,
        r#"{"text":"original"}"#
    );
}

#[tokio::test]
async fn pre_tool_call_abort_answers_every_call_and_calls_on_abort() {
    let mut t = TestWorker::new(vec![
        ScriptStep::tool_call("echo", echo("a"))
            .and_call("echo", echo("b"))
            .and_call("echo", echo("c")),
        ScriptStep::text("never"),
    ]);
    let mut hooks = Recorder::new().pre_tool("call_0_1", PreToolAction::Abort("unsafe".into()));
    let mut seen = Observed::default();
    let outcome = t.turn(Some("go"), &mut hooks, &mut seen).await.unwrap();
    assert_eq!(outcome.reason, TurnEndReason::Aborted("unsafe".into()));
    assert_eq!(outcome.requests, 1);
    assert_eq!(t.provider.requests().len(), 1);
    assert_eq!(
        t.echo.runs.load(Ordering::SeqCst),
        1,
        "only the call before the abort ran"
    );
    assert_eq!(result_of(t.history(), "call_0_0"), ("a".into(), false));
    let not_run = "Not run: the turn was aborted before this call (unsafe).";
    assert_eq!(result_of(t.history(), "call_0_1"), (not_run.into(), true));
    assert_eq!(result_of(t.history(), "call_0_2"), (not_run.into(), true));
    assert_eq!(hooks.aborts, [AbortReason::Interceptor("unsafe".into())]);
    assert!(
        !hooks
            .log
            .contains(&"pre_tool_call call_0_2 echo".to_string()),
        "no hook for calls after the abort"
    );
    t.assert_valid(&seen);
}

#[tokio::test]
async fn pre_tool_call_pause_answers_every_call_and_a_new_turn_continues() {
    let mut t = TestWorker::new(vec![
        ScriptStep::tool_call("echo", echo("a")).and_call("echo", echo("b")),
        ScriptStep::text("resumed"),
    ]);
    let mut hooks = Recorder::new().pre_tool("call_0_0", PreToolAction::Pause("ask user".into()));
    let mut seen = Observed::default();
    let outcome = t.turn(Some("go"), &mut hooks, &mut seen).await.unwrap();
    assert_eq!(outcome.reason, TurnEndReason::Paused("ask user".into()));
    assert_eq!(t.echo.runs.load(Ordering::SeqCst), 0);
    let not_run = "Not run: the turn was paused before this call (ask user).";
    assert_eq!(result_of(t.history(), "call_0_0"), (not_run.into(), true));
    assert_eq!(result_of(t.history(), "call_0_1"), (not_run.into(), true));
    assert!(hooks.aborts.is_empty(), "a pause is not an abort");
    t.assert_valid(&seen);

    let outcome = t.turn(None, &mut hooks, &mut seen).await.unwrap();
    assert_eq!(outcome.reason, TurnEndReason::EndTurn);
    assert_eq!(shape(t.history()).last().unwrap(), "assistant:resumed[]");
    t.assert_valid(&seen);
}

#[tokio::test]
async fn pre_tool_call_park_leaves_the_calls_open_and_the_next_run_runs_them_first() {
    let mut t = TestWorker::new(vec![
        ScriptStep::tool_call("echo", echo("a"))
            .and_call("echo", echo("b"))
            .and_call("echo", echo("c")),
        ScriptStep::text("resumed"),
    ]);
    let mut hooks = Recorder::new().pre_tool(
        "call_0_1",
        PreToolAction::Park("waiting for an answer".into()),
    );
    let mut seen = Observed::default();
    let outcome = t.turn(Some("go"), &mut hooks, &mut seen).await.unwrap();
    assert_eq!(
        outcome.reason,
        TurnEndReason::Parked("waiting for an answer".into())
    );
    // The call before the parked one ran; it and the ones after have no
    // result, and nobody was told of an abort.
    assert_eq!(t.echo.runs.load(Ordering::SeqCst), 1);
    assert!(!result_of(t.history(), "call_0_0").1);
    let results: Vec<&Item> = t
        .history()
        .iter()
        .filter(|item| matches!(item.kind, ItemKind::ToolResult { .. }))
        .collect();
    assert_eq!(results.len(), 1);
    assert!(hooks.aborts.is_empty());
    assert_eq!(t.provider.requests().len(), 1);

    // The next run runs the open calls before it asks the model again.
    let outcome = t.turn(None, &mut hooks, &mut seen).await.unwrap();
    assert_eq!(outcome.reason, TurnEndReason::EndTurn);
    assert_eq!(t.echo.runs.load(Ordering::SeqCst), 3);
    assert_eq!(t.provider.requests().len(), 2);
    assert_eq!(
        shape(&t.provider.requests()[1].history).len(),
        5,
        "the prompt, the answer and three results"
    );
    t.assert_valid(&seen);
}

#[tokio::test]
async fn post_tool_call_may_edit_the_result_and_abort_commits_it() {
    let mut t = TestWorker::new(vec![
        ScriptStep::tool_call("echo", echo("secret")).and_call("echo", echo("b")),
        ScriptStep::text("never"),
    ]);
    let mut hooks = Recorder::new()
        .rewrite_result("call_0_0", "[redacted]")
        .post_tool("call_0_0", PostToolAction::Abort("leak".into()));
    let mut seen = Observed::default();
    let outcome = t.turn(Some("go"), &mut hooks, &mut seen).await.unwrap();
    assert_eq!(outcome.reason, TurnEndReason::Aborted("leak".into()));
    assert_eq!(
        result_of(t.history(), "call_0_0"),
        ("[redacted]".into(), false)
    );
    assert_eq!(
        result_of(t.history(), "call_0_1"),
        (
            "Not run: the turn was aborted before this call (leak).".into(),
            true
        )
    );
    assert_eq!(t.echo.runs.load(Ordering::SeqCst), 1);
    assert_eq!(hooks.aborts, [AbortReason::Interceptor("leak".into())]);
    assert_eq!(t.provider.requests().len(), 1);
    t.assert_valid(&seen);
}

#[tokio::test]
async fn on_turn_end_continue_with_messages_asks_the_model_again() {
    let mut t = TestWorker::new(vec![ScriptStep::text("first"), ScriptStep::text("second")]);
    let nudge = Item::system(SystemKind::Reminder, "todos remain");
    let mut hooks = Recorder::new().turn_end(TurnEndAction::ContinueWithMessages(vec![nudge]));
    let mut seen = Observed::default();
    let outcome = t.turn(Some("go"), &mut hooks, &mut seen).await.unwrap();
    assert_eq!(outcome.reason, TurnEndReason::EndTurn);
    assert_eq!(outcome.requests, 2);
    assert_eq!(
        shape(t.history()),
        [
            "user:go",
            "assistant:first[]",
            "system:todos remain",
            "assistant:second[]"
        ]
    );
    assert_eq!(t.provider.requests()[1].history[..], t.history()[..3]);
    assert_eq!(
        hooks.log,
        [
            "on_prompt_submit",
            "pending_history_appends",
            "pre_llm_request",
            "on_turn_end",
            "pending_history_appends",
            "pre_llm_request",
            "on_turn_end",
        ]
    );
    // The second on_turn_end sees the whole turn so far.
    assert_eq!(hooks.turn_end_seen[1], t.history());
    t.assert_valid(&seen);
}

#[tokio::test]
async fn on_turn_end_pause_ends_the_turn_as_paused() {
    let mut t = TestWorker::new(vec![ScriptStep::text("first"), ScriptStep::text("unused")]);
    let mut hooks = Recorder::new().turn_end(TurnEndAction::Pause);
    let mut seen = Observed::default();
    let outcome = t.turn(Some("go"), &mut hooks, &mut seen).await.unwrap();
    assert_eq!(
        outcome.reason,
        TurnEndReason::Paused("paused at turn end".into())
    );
    assert_eq!(t.provider.requests().len(), 1);
    assert!(hooks.aborts.is_empty());
    validate_history(t.history()).unwrap();
}

#[tokio::test]
async fn on_turn_end_is_given_only_this_turns_items() {
    let mut t = TestWorker::new(vec![ScriptStep::text("one"), ScriptStep::text("two")]);
    let mut seen = Observed::default();
    t.turn(Some("first"), &mut Recorder::new(), &mut seen)
        .await
        .unwrap();
    let mut hooks = Recorder::new();
    t.turn(Some("second"), &mut hooks, &mut seen).await.unwrap();
    assert_eq!(hooks.turn_end_seen, [t.history()[2..].to_vec()]);
    assert_eq!(
        shape(&hooks.turn_end_seen[0]),
        ["user:second", "assistant:two[]"]
    );
}
