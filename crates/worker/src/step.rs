//! A turn as a step machine: from what happened so far, what to do next.
//!
//! [`Turn`] does no IO and calls no hook. The driver
//! ([`Worker::run`](crate::Worker::run)) asks it for the next [`Step`],
//! performs it (streams a request, runs tools, calls the interceptors,
//! commits to history, compacts) and feeds back what came of it. Every
//! decision of the turn loop lives here, so each is tested without a model
//! or a tool (`step_tests.rs`): budget checks, cancellation, what each
//! interceptor action leads to, what ends the turn and how.

use crate::budget::{Budget, BudgetMeter, Limit};
use crate::interceptor::{AbortReason, CompactionOutcome, PreRequestAction, TurnEndAction};
use crate::outcome::{TurnEndReason, TurnOutcome};
use crate::YieldReason;
use pod_llm::{FinishReason, Item, ToolCall, Usage};

/// What the driver does next.
#[derive(Debug, Clone, PartialEq)]
pub enum Step {
    /// Run these tool calls (those a crash interrupted, or the answer's),
    /// each with exactly one committed result; then [`Turn::calls_ran`].
    RunCalls(Vec<ToolCall>),
    /// Offer the prompt to `on_prompt_submit`; then [`Turn::submitted`]
    /// with what it decided (nothing is committed yet).
    Submit(Box<Item>),
    /// Commit these items, in order, and ask again.
    Commit(Vec<Item>),
    /// Commit the `pending_history_appends`, then ask `pre_llm_request`
    /// about the request; then [`Turn::prepared`].
    Prepare,
    /// Send the prepared request (it is request number
    /// [`Turn::requests`]) and commit the answer; then [`Turn::answered`],
    /// or [`Turn::cancelled`] when the run was cancelled while it streamed.
    Send,
    /// The answer called no tool: ask `on_turn_end`; then
    /// [`Turn::turn_ended`].
    EndOfAnswer,
    /// Compact the history (an interceptor yielded for it); tell the
    /// interceptors how it went, then [`Turn::compacted`].
    Compact,
    /// The turn is over: tell the interceptors of the abort, if any, and
    /// return [`Turn::outcome`].
    Done(Ending),
}

/// How a turn ends.
#[derive(Debug, Clone, PartialEq)]
pub struct Ending {
    /// Why.
    pub reason: TurnEndReason,
    /// What `on_abort` is told, when the turn was aborted or cancelled.
    pub abort: Option<AbortReason>,
}

impl Ending {
    fn quiet(reason: TurnEndReason) -> Self {
        Self {
            reason,
            abort: None,
        }
    }

    fn cancelled() -> Self {
        Self {
            reason: TurnEndReason::Cancelled,
            abort: Some(AbortReason::Cancelled),
        }
    }

    fn aborted(reason: String) -> Self {
        Self {
            abort: Some(AbortReason::Interceptor(reason.clone())),
            reason: TurnEndReason::Aborted(reason),
        }
    }
}

/// Why running tool calls stopped the turn.
#[derive(Debug, Clone, PartialEq)]
pub enum CallsStop {
    /// `pre_tool_call` or `post_tool_call` aborted it.
    Aborted(String),
    /// `pre_tool_call` paused it.
    Paused(String),
    /// `pre_tool_call` parked it: the calls from there on stay open.
    Parked(String),
    /// A budget limit (the loop guard) was reached.
    Limit(Limit),
    /// The run was cancelled.
    Cancelled,
}

/// The model's answer, as the turn needs to know it.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Answer {
    /// Its tool calls (already given unique ids and committed).
    pub calls: Vec<ToolCall>,
    /// Why the model stopped.
    pub finish: Option<FinishReason>,
    /// What it cost, when the provider said.
    pub usage: Option<Usage>,
}

#[derive(Debug)]
enum State {
    Calls(Vec<ToolCall>),
    Submit(Box<Item>),
    Commit(Vec<Item>),
    Prepare,
    Send,
    EndOfAnswer(Option<FinishReason>),
    Compact,
    Done(Ending),
    // The driver is performing the last step; its feedback sets the next.
    Waiting,
}

/// One run's turn: its state, its budget and what it spent.
#[derive(Debug)]
pub struct Turn {
    state: State,
    // The prompt waits while the calls a crash interrupted run first.
    // Boxed, here and in the steps: a turn waiting on its model would
    // otherwise hold an item's room in each of them.
    prompt: Option<Box<Item>>,
    meter: BudgetMeter,
    requests: u32,
    usage: Usage,
    // Whether the driver can compact: a yield to compact is then done
    // within the run; otherwise the turn ends as yielded.
    can_compact: bool,
    // The finish reason of the answer being judged by `on_turn_end`.
    finish: Option<FinishReason>,
}

impl Turn {
    /// A run on a fresh `budget`: the calls a crash `interrupted` first,
    /// then the `prompt` (if any), then requests until the model is done.
    pub fn new(
        budget: Budget,
        prompt: Option<Box<Item>>,
        interrupted: Vec<ToolCall>,
        can_compact: bool,
    ) -> Self {
        let (state, prompt) = match (interrupted.is_empty(), prompt) {
            (false, prompt) => (State::Calls(interrupted), prompt),
            (true, Some(prompt)) => (State::Submit(prompt), None),
            (true, None) => (State::Prepare, None),
        };
        Self {
            state,
            prompt,
            meter: BudgetMeter::new(budget),
            requests: 0,
            usage: Usage::default(),
            can_compact,
            finish: None,
        }
    }

    /// The next step. `cancelled`: whether the run's token fired.
    pub fn next(&mut self, cancelled: bool) -> Step {
        match std::mem::replace(&mut self.state, State::Waiting) {
            State::Calls(calls) => Step::RunCalls(calls),
            State::Submit(prompt) => Step::Submit(prompt),
            State::Commit(items) => {
                self.state = State::Prepare;
                Step::Commit(items)
            }
            State::Prepare if cancelled => self.end(Ending::cancelled()),
            State::Prepare => match self.meter.before_request() {
                Some(limit) => {
                    tracing::info!(%limit, "budget limit reached");
                    self.end(Ending::quiet(TurnEndReason::Limit(limit)))
                }
                None => Step::Prepare,
            },
            State::Send => {
                self.requests += 1;
                self.meter.request_sent();
                Step::Send
            }
            State::EndOfAnswer(finish) => {
                self.finish = finish;
                Step::EndOfAnswer
            }
            State::Compact => Step::Compact,
            State::Done(ending) => self.end(ending),
            // Asked again without feedback: nothing new happened, so the
            // turn cannot go on; it ends rather than repeat a step.
            State::Waiting => self.end(Ending::aborted(
                "the turn was asked for a step before the last one was done".into(),
            )),
        }
    }

    fn end(&mut self, ending: Ending) -> Step {
        self.state = State::Done(ending.clone());
        Step::Done(ending)
    }

    /// The calls of a [`Step::RunCalls`] ran; `stop` says why the turn must
    /// end, if it must.
    pub fn calls_ran(&mut self, stop: Option<CallsStop>) {
        self.state = match stop {
            None => match self.prompt.take() {
                Some(prompt) => State::Submit(prompt),
                None => State::Prepare,
            },
            Some(CallsStop::Aborted(reason)) => State::Done(Ending::aborted(reason)),
            Some(CallsStop::Paused(reason)) => {
                State::Done(Ending::quiet(TurnEndReason::Paused(reason)))
            }
            Some(CallsStop::Parked(reason)) => {
                State::Done(Ending::quiet(TurnEndReason::Parked(reason)))
            }
            Some(CallsStop::Limit(limit)) => {
                State::Done(Ending::quiet(TurnEndReason::Limit(limit)))
            }
            Some(CallsStop::Cancelled) => State::Done(Ending::cancelled()),
        };
    }

    /// `on_prompt_submit` decided about `prompt`: `rejected` with a reason,
    /// or committed with `extra` items after it.
    pub fn submitted(&mut self, prompt: Box<Item>, decision: Result<Vec<Item>, String>) {
        self.state = match decision {
            Err(reason) => State::Done(Ending::quiet(TurnEndReason::Rejected(reason))),
            Ok(extra) => {
                let mut items = Vec::with_capacity(1 + extra.len());
                items.push(*prompt);
                items.extend(extra);
                State::Commit(items)
            }
        };
    }

    /// `pre_llm_request` decided about the prepared request.
    pub fn prepared(&mut self, action: PreRequestAction) {
        self.state = match action {
            PreRequestAction::Continue => State::Send,
            PreRequestAction::Cancel(reason) => State::Done(Ending::aborted(reason)),
            PreRequestAction::Yield(YieldReason::Compact) if self.can_compact => State::Compact,
            PreRequestAction::Yield(reason) => {
                State::Done(Ending::quiet(TurnEndReason::Yielded(reason)))
            }
            PreRequestAction::Stop(limit) => {
                tracing::info!(%limit, "an interceptor's budget is spent");
                State::Done(Ending::quiet(TurnEndReason::Limit(limit)))
            }
        };
    }

    /// The answer to [`Step::Send`] is committed.
    pub fn answered(&mut self, answer: Answer) {
        if let Some(usage) = answer.usage {
            self.usage += usage;
            self.meter
                .spent_tokens(usage.prompt_tokens + usage.completion_tokens);
        }
        self.state = match answer.calls.is_empty() {
            true => State::EndOfAnswer(answer.finish),
            false => State::Calls(answer.calls),
        };
    }

    /// The run was cancelled while the answer streamed (what had arrived
    /// of its text is committed).
    pub fn cancelled(&mut self) {
        self.state = State::Done(Ending::cancelled());
    }

    /// `on_turn_end` decided; with `ContinueWithMessages`, its items are
    /// committed (next step) unless the run's continuations are spent.
    pub fn turn_ended(&mut self, action: TurnEndAction) {
        let finish = self.finish.take();
        self.state = match action {
            TurnEndAction::Finish => State::Done(Ending::quiet(match finish {
                Some(FinishReason::Length) => TurnEndReason::MaxTokens,
                Some(FinishReason::Refusal) => TurnEndReason::Refusal,
                _ => TurnEndReason::EndTurn,
            })),
            TurnEndAction::ContinueWithMessages(items) => match self.meter.continuation() {
                Err(limit) => State::Done(Ending::quiet(TurnEndReason::Limit(limit))),
                Ok(()) => State::Commit(items),
            },
            TurnEndAction::Pause => State::Done(Ending::quiet(TurnEndReason::Paused(
                "paused at turn end".into(),
            ))),
            TurnEndAction::Stall => State::Done(Ending::quiet(TurnEndReason::Stalled)),
            TurnEndAction::GiveUp(why) => State::Done(Ending::quiet(TurnEndReason::GoalUnmet(why))),
        };
    }

    /// The compaction of a [`Step::Compact`] is over: the next request is
    /// prepared again (on the compacted history, or, when it failed, on
    /// the same one; the interceptors were told which).
    pub fn compacted(&mut self, _outcome: &CompactionOutcome) {
        self.state = State::Prepare;
    }

    /// The run's budget, for what the driver measures itself (each tool
    /// result, for the loop guard).
    pub fn meter(&mut self) -> &mut BudgetMeter {
        &mut self.meter
    }

    /// Requests sent so far.
    pub fn requests(&self) -> u32 {
        self.requests
    }

    /// The turn's outcome, ending for `reason`.
    pub fn outcome(&self, reason: TurnEndReason) -> TurnOutcome {
        TurnOutcome {
            reason,
            requests: self.requests,
            usage: self.usage,
        }
    }
}

#[cfg(test)]
#[path = "step_tests.rs"]
mod tests;
