//! The Worker and its turn loop.

use crate::budget::{Budget, BudgetMeter, Limit};
use crate::error::WorkerError;
use crate::interceptor::{
    AbortReason, Interceptor, PreRequestAction, PromptAction, RunStart, TurnEndAction, YieldReason,
};
use crate::observer::{TurnObserver, WorkerEvent};
use crate::tool::ToolRegistry;
use crate::tool_state::ToolStates;
use futures_util::StreamExt;
use pod_llm::{
    AssembledResponse, FinishReason, HistoryId, Item, ItemKind, Provider, ProviderRequest,
    ResponseAssembler, Usage,
};
use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// Settings of a [`Worker`].
#[derive(Debug, Clone)]
pub struct WorkerConfig {
    /// The system prompt sent with every request.
    pub system_prompt: String,
    /// The limits of one run (see [`Budget`]); [`Worker::run_turn`] starts
    /// a fresh [`BudgetMeter`] from it.
    pub budget: Budget,
    /// How long a cancelled tool may take to stop by itself before it is
    /// dropped (dropping kills what it spawned with `kill_on_drop`).
    pub cancel_grace: Duration,
    /// How many times a request whose stream failed with a retryable error
    /// after it started (a dropped connection) is sent again. Providers retry
    /// by themselves only before the first event; past that point only the
    /// worker can, because it discards the partial response.
    pub stream_retries: u32,
    /// Wait before the first such retry, doubled for each later one.
    pub stream_retry_delay: Duration,
    /// Sent with every request as [`ProviderRequest::cache_key`].
    pub cache_key: Option<Arc<str>>,
}

impl Default for WorkerConfig {
    fn default() -> Self {
        Self {
            system_prompt: String::new(),
            budget: Budget::default(),
            cancel_grace: Duration::from_secs(2),
            stream_retries: 2,
            stream_retry_delay: Duration::from_millis(500),
            cache_key: None,
        }
    }
}

/// How a turn ended.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(tag = "kind", content = "detail", rename_all = "snake_case")]
pub enum TurnEndReason {
    /// The model answered without tool calls.
    EndTurn,
    /// The model's answer was cut by its output token limit.
    MaxTokens,
    /// The provider refused or filtered the answer.
    Refusal,
    /// A [`Limit`] of the run's [`Budget`] stopped it; every tool call has its
    /// result, and continuing (with a fresh budget) is safe.
    Limit(Limit),
    /// Cancelled from outside.
    Cancelled,
    /// An interceptor aborted it.
    Aborted(String),
    /// An interceptor paused it; it can be continued with a new turn.
    Paused(String),
    /// `pre_llm_request` yielded before a request, for the caller to do what
    /// the reason asks and continue the run.
    Yielded(YieldReason),
    /// `on_prompt_submit` refused the prompt; nothing was committed.
    Rejected(String),
}

/// The result of one turn.
#[derive(Debug, Clone, PartialEq)]
pub struct TurnOutcome {
    /// How it ended.
    pub reason: TurnEndReason,
    /// Model requests made.
    pub requests: u32,
    /// Tokens summed over the turn's requests.
    pub usage: Usage,
}

/// Owns a conversation and runs its turns.
pub struct Worker {
    provider: Arc<dyn Provider>,
    tools: ToolRegistry,
    config: WorkerConfig,
    // Shared with the request in flight (see `ProviderRequest`). Only ever
    // appended to; `set_history` replaces it under a new id.
    history: Arc<Vec<Item>>,
    history_id: HistoryId,
    // Every call id in history, so a provider that reuses ids across
    // responses cannot make two calls share one result.
    call_ids: HashSet<String>,
    // The stateful tools, told of each committed result.
    states: ToolStates,
}

enum Streamed {
    Complete(AssembledResponse),
    Cancelled(String),
}

/// A failed stream: before any event arrived, or midway through.
enum StreamFailure {
    Start(pod_llm::ProviderError),
    Midway(pod_llm::ProviderError),
}

pub(crate) enum CallsStop {
    Aborted(String),
    Paused(String),
    Limit(Limit),
    Cancelled,
}

impl Worker {
    /// A worker with an empty history.
    pub fn new(provider: Arc<dyn Provider>, tools: ToolRegistry, config: WorkerConfig) -> Self {
        Self {
            provider,
            states: ToolStates::of(&tools),
            tools,
            config,
            history: Arc::new(Vec::new()),
            history_id: HistoryId::fresh(),
            call_ids: HashSet::new(),
        }
    }

    /// The history, oldest first.
    pub fn history(&self) -> &[Item] {
        &self.history
    }

    /// Replaces the history (resume, compaction), under a new
    /// [`HistoryId`]. The caller is responsible for its validity.
    pub fn set_history(&mut self, history: Vec<Item>) {
        self.call_ids = history
            .iter()
            .flat_map(|item| item.tool_calls().iter().map(|c| c.id.clone()))
            .collect();
        self.history = Arc::new(history);
        self.history_id = HistoryId::fresh();
    }

    /// The tool registry.
    pub fn tools(&self) -> &ToolRegistry {
        &self.tools
    }

    /// The stateful tools' states, which the worker updates as results are
    /// committed. The owner of the history tells them of a compaction.
    pub fn tool_states(&mut self) -> &mut ToolStates {
        &mut self.states
    }

    /// The provider.
    pub fn provider(&self) -> &Arc<dyn Provider> {
        &self.provider
    }

    /// The settings.
    pub fn config(&self) -> &WorkerConfig {
        &self.config
    }

    /// Runs one turn. With `prompt`, it is submitted first; without, the
    /// model is asked to go on from the current history.
    pub async fn run_turn(
        &mut self,
        prompt: Option<Item>,
        hooks: &mut dyn Interceptor,
        observer: &mut dyn TurnObserver,
        cancel: &CancellationToken,
    ) -> Result<TurnOutcome, WorkerError> {
        let mut meter = BudgetMeter::new(self.config.budget.clone());
        hooks
            .on_run_start(&RunStart {
                history: &self.history,
                prompt: prompt.as_ref(),
                cancel,
            })
            .await;
        self.run_turn_within(prompt, &mut meter, hooks, observer, cancel)
            .await
    }

    /// Like [`run_turn`](Self::run_turn), spending from `meter`: for a caller
    /// that continues one run over several calls (after a yield) and keeps
    /// one budget for all of them. The caller calls
    /// [`Interceptor::on_run_start`] once, before the first call.
    pub async fn run_turn_within(
        &mut self,
        prompt: Option<Item>,
        meter: &mut BudgetMeter,
        hooks: &mut dyn Interceptor,
        observer: &mut dyn TurnObserver,
        cancel: &CancellationToken,
    ) -> Result<TurnOutcome, WorkerError> {
        let start = self.history.len();
        let mut outcome = TurnOutcome {
            reason: TurnEndReason::EndTurn,
            requests: 0,
            usage: Usage::default(),
        };
        // Calls a crash interrupted come first: history is valid only once
        // each has its result, and the model asked for them before anything
        // that follows.
        let open = self.open_calls();
        if !open.is_empty() {
            tracing::info!(calls = open.len(), "running the calls a crash interrupted");
            if let Some(stop) = self
                .run_tool_calls(open, hooks, observer, meter, cancel)
                .await?
            {
                outcome.reason = stopped(stop, hooks).await;
                return Ok(outcome);
            }
        }
        if let Some(mut prompt) = prompt {
            match hooks.on_prompt_submit(&mut prompt).await {
                PromptAction::Continue => self.commit(prompt, observer).await?,
                PromptAction::Cancel(reason) => {
                    outcome.reason = TurnEndReason::Rejected(reason);
                    return Ok(outcome);
                }
                PromptAction::ContinueWith(items) => {
                    self.commit(prompt, observer).await?;
                    self.commit_all(items, observer).await?;
                }
            }
        }
        loop {
            if cancel.is_cancelled() {
                hooks.on_abort(&AbortReason::Cancelled).await;
                outcome.reason = TurnEndReason::Cancelled;
                return Ok(outcome);
            }
            if let Some(limit) = meter.before_request() {
                tracing::info!(%limit, "budget limit reached");
                outcome.reason = TurnEndReason::Limit(limit);
                return Ok(outcome);
            }
            let appends = hooks.pending_history_appends(&self.history).await;
            self.commit_all(appends, observer).await?;
            // Shared with the history; an interceptor's edit copies it.
            let mut request_items = Arc::clone(&self.history);
            match hooks.pre_llm_request(&mut request_items).await {
                PreRequestAction::Continue => {}
                PreRequestAction::Cancel(reason) => {
                    hooks
                        .on_abort(&AbortReason::Interceptor(reason.clone()))
                        .await;
                    outcome.reason = TurnEndReason::Aborted(reason);
                    return Ok(outcome);
                }
                PreRequestAction::Yield(reason) => {
                    outcome.reason = TurnEndReason::Yielded(reason);
                    return Ok(outcome);
                }
                PreRequestAction::Stop(limit) => {
                    tracing::info!(%limit, "an interceptor's budget is spent");
                    outcome.reason = TurnEndReason::Limit(limit);
                    return Ok(outcome);
                }
            }
            outcome.requests += 1;
            meter.request_sent();
            tracing::debug!(
                request = outcome.requests,
                items = request_items.len(),
                run_requests = meter.requests(),
                "model request"
            );
            observer.on_event(WorkerEvent::RequestStarted {
                number: outcome.requests,
            });
            if self.tools.refresh() {
                tracing::info!(tools = self.tools.names().len(), "the tool set changed");
            }
            // An interceptor's edit is a copy: the request is then not the
            // committed history.
            let history_id = Arc::ptr_eq(&request_items, &self.history).then_some(self.history_id);
            let request = ProviderRequest {
                system_prompt: self.config.system_prompt.clone(),
                history: request_items,
                tools: self.tools.specs(),
                cache_key: self.config.cache_key.clone(),
                history_id,
            };
            let response = match self.stream_with_retries(request, observer, cancel).await? {
                Streamed::Complete(response) => response,
                Streamed::Cancelled(partial_text) => {
                    if !partial_text.is_empty() {
                        let item = assistant_item(partial_text, None, Vec::new(), None);
                        self.commit(item, observer).await?;
                    }
                    hooks.on_abort(&AbortReason::Cancelled).await;
                    outcome.reason = TurnEndReason::Cancelled;
                    return Ok(outcome);
                }
            };
            if let Some(usage) = response.usage {
                outcome.usage += usage;
                meter.spent_tokens(usage.prompt_tokens + usage.completion_tokens);
                observer.on_event(WorkerEvent::Usage(usage));
            }
            let calls = self.unique_call_ids(response.tool_calls);
            let finish = response.finish;
            tracing::debug!(
                text_chars = response.text.len(),
                tool_calls = calls.len(),
                ?finish,
                usage = ?response.usage,
                "model response"
            );
            let item = assistant_item(
                response.text,
                response.reasoning,
                calls.clone(),
                response.usage,
            );
            self.commit(item, observer).await?;

            if calls.is_empty() {
                match hooks.on_turn_end(&self.history[start..]).await {
                    TurnEndAction::Finish => {
                        outcome.reason = match finish {
                            Some(FinishReason::Length) => TurnEndReason::MaxTokens,
                            Some(FinishReason::Refusal) => TurnEndReason::Refusal,
                            _ => TurnEndReason::EndTurn,
                        };
                        return Ok(outcome);
                    }
                    TurnEndAction::ContinueWithMessages(items) => {
                        if let Err(limit) = meter.continuation() {
                            outcome.reason = TurnEndReason::Limit(limit);
                            return Ok(outcome);
                        }
                        self.commit_all(items, observer).await?;
                        continue;
                    }
                    TurnEndAction::Pause => {
                        outcome.reason = TurnEndReason::Paused("paused at turn end".into());
                        return Ok(outcome);
                    }
                }
            }
            if let Some(stop) = self
                .run_tool_calls(calls, hooks, observer, meter, cancel)
                .await?
            {
                outcome.reason = stopped(stop, hooks).await;
                return Ok(outcome);
            }
        }
    }

    /// The calls of the last answer that have no result: after a resume,
    /// those of [`resumable`](crate::Tool::resumable) tools, which the
    /// crash interrupted and the next run finishes.
    pub fn open_calls(&self) -> Vec<pod_llm::ToolCall> {
        let Some(at) = self
            .history
            .iter()
            .rposition(|item| matches!(item.kind, ItemKind::Assistant { .. }))
        else {
            return Vec::new();
        };
        let answered: HashSet<&str> = self.history[at + 1..]
            .iter()
            .filter_map(|item| match &item.kind {
                ItemKind::ToolResult { call_id, .. } => Some(call_id.as_str()),
                _ => None,
            })
            .collect();
        self.history[at]
            .tool_calls()
            .iter()
            .filter(|call| !answered.contains(call.id.as_str()))
            .cloned()
            .collect()
    }

    /// Streams a response, sending the request again when its stream fails
    /// with a retryable error. Nothing of a failed attempt is kept; front
    /// ends are told to drop what they showed of it.
    async fn stream_with_retries(
        &self,
        request: ProviderRequest,
        observer: &mut dyn TurnObserver,
        cancel: &CancellationToken,
    ) -> Result<Streamed, WorkerError> {
        let mut attempt = 0;
        loop {
            let error = match self.stream_response(&request, observer, cancel).await {
                Err(StreamFailure::Midway(error))
                    if error.is_retryable() && attempt < self.config.stream_retries =>
                {
                    error
                }
                Err(StreamFailure::Midway(error) | StreamFailure::Start(error)) => {
                    return Err(error.into())
                }
                Ok(streamed) => return Ok(streamed),
            };
            attempt += 1;
            tracing::warn!(%error, attempt, "model stream failed; sending the request again");
            observer.on_event(WorkerEvent::RequestRetried {
                attempt,
                error: error.to_string(),
            });
            let delay = self.config.stream_retry_delay * 2u32.saturating_pow(attempt - 1);
            tokio::select! {
                _ = cancel.cancelled() => return Ok(Streamed::Cancelled(String::new())),
                _ = tokio::time::sleep(delay) => {}
            }
        }
    }

    async fn stream_response(
        &self,
        request: &ProviderRequest,
        observer: &mut dyn TurnObserver,
        cancel: &CancellationToken,
    ) -> Result<Streamed, StreamFailure> {
        let mut stream = tokio::select! {
            biased;
            _ = cancel.cancelled() => return Ok(Streamed::Cancelled(String::new())),
            stream = self.provider.stream(request) => stream.map_err(StreamFailure::Start)?,
        };
        let mut assembler = ResponseAssembler::new();
        let mut started = false;
        loop {
            let next = tokio::select! {
                biased;
                _ = cancel.cancelled() => {
                    return Ok(Streamed::Cancelled(assembler.text().to_string()));
                }
                next = stream.next() => next,
            };
            let Some(event) = next else { break };
            // Before the first event the provider's own retry layer decides;
            // after it, only the worker can start over.
            let fail = |error| match started {
                true => StreamFailure::Midway(error),
                false => StreamFailure::Start(error),
            };
            let event = event.map_err(fail)?;
            started = true;
            match &event {
                pod_llm::StreamEvent::TextDelta { text } => {
                    observer.on_event(WorkerEvent::TextDelta(text.clone()))
                }
                pod_llm::StreamEvent::ReasoningDelta { text } => {
                    observer.on_event(WorkerEvent::ReasoningDelta(text.clone()))
                }
                _ => {}
            }
            assembler.push(event).map_err(StreamFailure::Midway)?;
        }
        Ok(Streamed::Complete(assembler.finish()))
    }

    /// Gives every call an id that is non-empty and new to this history.
    fn unique_call_ids(&mut self, mut calls: Vec<pod_llm::ToolCall>) -> Vec<pod_llm::ToolCall> {
        for call in &mut calls {
            if call.id.is_empty() || self.call_ids.contains(&call.id) {
                let base = if call.id.is_empty() {
                    "call"
                } else {
                    call.id.as_str()
                };
                let mut n = self.call_ids.len();
                let mut candidate = format!("{base}_{n}");
                while self.call_ids.contains(&candidate) {
                    n += 1;
                    candidate = format!("{base}_{n}");
                }
                call.id = candidate;
            }
            self.call_ids.insert(call.id.clone());
        }
        calls
    }

    pub(crate) async fn commit(
        &mut self,
        item: Item,
        observer: &mut dyn TurnObserver,
    ) -> Result<(), WorkerError> {
        observer.on_history_append(&item).await?;
        // Saved: a stateful tool's call takes effect now, not before.
        self.states.observe(&item);
        // The request that shared the history was dropped when its response
        // ended, so nothing is copied here (a provider that keeps requests,
        // like the scripted one, costs one copy).
        Arc::make_mut(&mut self.history).push(item);
        Ok(())
    }

    async fn commit_all(
        &mut self,
        items: Vec<Item>,
        observer: &mut dyn TurnObserver,
    ) -> Result<(), WorkerError> {
        for item in items {
            self.commit(item, observer).await?;
        }
        Ok(())
    }
}

/// How a turn ends when its tool calls stopped it; tells the hooks of an
/// abort.
async fn stopped(stop: CallsStop, hooks: &mut dyn Interceptor) -> TurnEndReason {
    match stop {
        CallsStop::Aborted(reason) => {
            hooks
                .on_abort(&AbortReason::Interceptor(reason.clone()))
                .await;
            TurnEndReason::Aborted(reason)
        }
        CallsStop::Paused(reason) => TurnEndReason::Paused(reason),
        CallsStop::Limit(limit) => TurnEndReason::Limit(limit),
        CallsStop::Cancelled => {
            hooks.on_abort(&AbortReason::Cancelled).await;
            TurnEndReason::Cancelled
        }
    }
}

fn assistant_item(
    text: String,
    reasoning: Option<pod_llm::Reasoning>,
    tool_calls: Vec<pod_llm::ToolCall>,
    usage: Option<Usage>,
) -> Item {
    Item::new(ItemKind::Assistant {
        text,
        reasoning,
        tool_calls,
        usage,
    })
}
