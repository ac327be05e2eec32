//! The Worker and its turn loop.

use crate::budget::{Budget, BudgetMeter};
use crate::error::WorkerError;
use crate::interceptor::{CompactionOutcome, Interceptor, PromptAction, RunStart};
use crate::observer::{TurnObserver, WorkerEvent};
use crate::outcome::TurnOutcome;
use crate::step::{Answer, Step, Turn};
use crate::tool::ToolRegistry;
use crate::tool_state::ToolStates;
use futures_util::StreamExt;
use pod_llm::{
    AssembledResponse, HistoryId, Item, ItemKind, Provider, ProviderRequest, ResponseAssembler,
    Usage,
};
use std::collections::HashSet;
use std::hash::BuildHasher;
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

/// Settings of a [`Worker`].
#[derive(Debug, Clone)]
pub struct WorkerConfig {
    /// The system prompt sent with every request (each shares it).
    pub system_prompt: Arc<str>,
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
            system_prompt: "".into(),
            budget: Budget::default(),
            cancel_grace: Duration::from_secs(2),
            stream_retries: 2,
            stream_retry_delay: Duration::from_millis(500),
            cache_key: None,
        }
    }
}

/// Compacts a worker's history within a run, when an interceptor yields
/// for it ([`YieldReason::Compact`]); given to [`Worker::run`]. It replaces
/// the history through [`Worker::set_history`] and says how it went.
#[async_trait::async_trait]
pub trait Compaction: Send {
    /// Compacts `worker`'s history; gives up when `cancel` fires.
    async fn compact(
        &mut self,
        worker: &mut Worker,
        cancel: &CancellationToken,
    ) -> CompactionOutcome;
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
    // responses cannot make two calls share one result. Hashes, not the
    // ids: a resume fills it with every call of the log, and a copy of each
    // id was an allocation per call. Two ids of one hash only cost the
    // newer one a fresh name.
    call_ids: HashSet<u64>,
    // Hashes the ids in `call_ids` (seeded once per worker).
    id_hasher: std::hash::RandomState,
    // The stateful tools, told of each committed result.
    states: ToolStates,
}

enum Streamed {
    Complete(AssembledResponse),
    /// Cancelled mid-stream: the text that had arrived, and the tools of
    /// the calls that had started.
    Cancelled(String, Vec<String>),
}

/// A failed stream: before any event arrived, or midway through.
enum StreamFailure {
    Start(pod_llm::ProviderError),
    Midway(pod_llm::ProviderError),
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
            id_hasher: std::hash::RandomState::new(),
        }
    }

    /// The history, oldest first.
    pub fn history(&self) -> &[Item] {
        &self.history
    }

    /// Replaces the history (resume, compaction), under a new
    /// [`HistoryId`]. The caller is responsible for its validity.
    pub fn set_history(&mut self, history: Vec<Item>) {
        let hasher = &self.id_hasher;
        self.call_ids = history
            .iter()
            .flat_map(|item| item.tool_calls().iter().map(|c| hasher.hash_one(&c.id)))
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
    /// model is asked to go on from the current history. A yield to compact
    /// ends the turn as [`TurnEndReason::Yielded`]; see [`Self::run`] for a
    /// run that compacts.
    pub async fn run_turn(
        &mut self,
        prompt: Option<Item>,
        hooks: &mut dyn Interceptor,
        observer: &mut dyn TurnObserver,
        cancel: &CancellationToken,
    ) -> Result<TurnOutcome, WorkerError> {
        self.run(prompt, hooks, observer, None, cancel).await
    }

    /// Runs one run: `on_run_start`, then the steps [`Turn`] decides, on a
    /// fresh budget. With `compaction`, a yield to compact compacts the
    /// history within the run (the interceptors are told how it went) and
    /// the turn goes on.
    pub fn run<'a>(
        &'a mut self,
        prompt: Option<Item>,
        hooks: &'a mut dyn Interceptor,
        observer: &'a mut dyn TurnObserver,
        compaction: Option<&'a mut dyn Compaction>,
        cancel: &'a CancellationToken,
    ) -> impl std::future::Future<Output = Result<TurnOutcome, WorkerError>> + Send + 'a {
        // The prompt boxed before the run's state is laid out: the state of
        // a run waiting on its model keeps every argument's room.
        self.run_boxed(prompt.map(Box::new), hooks, observer, compaction, cancel)
    }

    async fn run_boxed(
        &mut self,
        prompt: Option<Box<Item>>,
        hooks: &mut dyn Interceptor,
        observer: &mut dyn TurnObserver,
        mut compaction: Option<&mut dyn Compaction>,
        cancel: &CancellationToken,
    ) -> Result<TurnOutcome, WorkerError> {
        hooks
            .on_run_start(&RunStart {
                history: &self.history,
                prompt: prompt.as_deref(),
                cancel,
            })
            .await;
        let interrupted = self.open_calls();
        if !interrupted.is_empty() {
            tracing::info!(
                calls = interrupted.len(),
                "running the calls a crash interrupted"
            );
        }
        let mut turn = Turn::new(
            self.config.budget.clone(),
            prompt,
            interrupted,
            compaction.is_some(),
        );
        // Where this turn's items begin, for `on_turn_end`: moved to the
        // end of the history again when a compaction replaces it.
        let mut start = self.history.len();
        // The request `pre_llm_request` prepared, until it is sent.
        let mut prepared: Option<Arc<Vec<Item>>> = None;
        loop {
            match turn.next(cancel.is_cancelled()) {
                Step::RunCalls(calls) => {
                    // Boxed: the largest state of this loop; inline, a
                    // turn waiting on its model would reserve it too.
                    let stop =
                        Box::pin(self.run_tool_calls(calls, hooks, observer, turn.meter(), cancel))
                            .await?;
                    turn.calls_ran(stop);
                }
                Step::Submit(mut prompt) => {
                    let decision = match hooks.on_prompt_submit(&mut prompt).await {
                        PromptAction::Continue => Ok(Vec::new()),
                        PromptAction::ContinueWith(items) => Ok(items),
                        PromptAction::Cancel(reason) => Err(reason),
                    };
                    turn.submitted(prompt, decision);
                }
                Step::Commit(items) => self.commit_all(items, observer).await?,
                Step::Prepare => {
                    let appends = hooks.pending_history_appends(&self.history).await;
                    self.commit_all(appends, observer).await?;
                    // Shared with the history; an interceptor's edit copies it.
                    let mut request = Arc::clone(&self.history);
                    let action = hooks.pre_llm_request(&mut request).await;
                    prepared = Some(request);
                    turn.prepared(action);
                }
                Step::Send => {
                    let request = prepared.take().unwrap_or_else(|| Arc::clone(&self.history));
                    // One span per model request, named and attributed as
                    // the OpenTelemetry GenAI conventions say; the usage is
                    // recorded on it when the answer is in.
                    // Field values are computed only when a subscriber
                    // wants the span (OTLP configured): free otherwise.
                    let span = tracing::info_span!(
                        "chat",
                        otel.name = %format!("chat {}", self.provider.model_name()),
                        otel.kind = "client",
                        gen_ai.operation.name = "chat",
                        gen_ai.request.model = %self.provider.model_name(),
                        gen_ai.usage.input_tokens = tracing::field::Empty,
                        gen_ai.usage.output_tokens = tracing::field::Empty,
                        gen_ai.usage.cache_read.input_tokens = tracing::field::Empty,
                        gen_ai.usage.cache_creation.input_tokens = tracing::field::Empty,
                        gen_ai.response.finish_reasons = tracing::field::Empty,
                        pod.request.number = i64::from(turn.requests()),
                        otel.status_code = tracing::field::Empty,
                    );
                    let sent = self
                        .send(request, turn.requests(), turn.meter(), observer, cancel)
                        .instrument(span.clone())
                        .await;
                    if sent.is_err() {
                        // A request that failed is an error on its span.
                        span.record("otel.status_code", "ERROR");
                    }
                    let sent = sent?;
                    match sent {
                        Some(answer) => turn.answered(answer),
                        None => turn.cancelled(),
                    }
                }
                Step::EndOfAnswer => {
                    let committed = self.history.get(start..).unwrap_or_default();
                    let action = hooks.on_turn_end(committed).await;
                    turn.turn_ended(action);
                }
                Step::Compact => {
                    let outcome = match compaction.as_deref_mut() {
                        Some(compaction) => compaction.compact(self, cancel).await,
                        None => CompactionOutcome::Failed("no compaction for this run".into()),
                    };
                    hooks.on_compaction(&outcome).await;
                    start = self.history.len();
                    turn.compacted(&outcome);
                }
                Step::Done(ending) => {
                    if let Some(abort) = &ending.abort {
                        hooks.on_abort(abort).await;
                    }
                    return Ok(turn.outcome(ending.reason));
                }
            }
        }
    }

    /// Sends request number `number` and commits the answer; `None` when
    /// the run was cancelled while it streamed (what had arrived of its
    /// text is committed).
    async fn send(
        &mut self,
        items: Arc<Vec<Item>>,
        number: u32,
        meter: &BudgetMeter,
        observer: &mut dyn TurnObserver,
        cancel: &CancellationToken,
    ) -> Result<Option<Answer>, WorkerError> {
        tracing::debug!(
            request = number,
            items = items.len(),
            run_requests = meter.requests(),
            "model request"
        );
        observer.on_event(WorkerEvent::RequestStarted { number });
        if self.tools.refresh() {
            tracing::info!(tools = self.tools.names().len(), "the tool set changed");
        }
        // An interceptor's edit is a copy: the request is then not the
        // committed history.
        let history_id = Arc::ptr_eq(&items, &self.history).then_some(self.history_id);
        let request = ProviderRequest {
            system_prompt: Arc::clone(&self.config.system_prompt),
            history: items,
            tools: self.tools.specs(),
            cache_key: self.config.cache_key.clone(),
            history_id,
        };
        let response = match self.stream_with_retries(request, observer, cancel).await? {
            Streamed::Complete(response) => response,
            Streamed::Cancelled(partial_text, calls_not_made) => {
                let mut partial_answer = None;
                if !partial_text.is_empty() {
                    let item = assistant_item(partial_text, None, Vec::new(), None);
                    partial_answer = Some(item.id);
                    self.commit(item, observer).await?;
                }
                if partial_answer.is_some() || !calls_not_made.is_empty() {
                    observer.on_event(WorkerEvent::AnswerCut {
                        partial_answer,
                        calls_not_made,
                    });
                }
                return Ok(None);
            }
        };
        if let Some(usage) = response.usage {
            observer.on_event(WorkerEvent::Usage(usage));
            let span = tracing::Span::current();
            // As signed integers: OpenTelemetry's attributes have no
            // unsigned ones (a u64 would arrive as a string).
            let int = |n: u64| i64::try_from(n).unwrap_or(i64::MAX);
            span.record("gen_ai.usage.input_tokens", int(usage.prompt_tokens));
            span.record("gen_ai.usage.output_tokens", int(usage.completion_tokens));
            span.record(
                "gen_ai.usage.cache_read.input_tokens",
                int(usage.cache_read_tokens),
            );
            span.record(
                "gen_ai.usage.cache_creation.input_tokens",
                int(usage.cache_write_tokens),
            );
        }
        if let Some(finish) = &response.finish {
            // The conventions' words (`stop`, `tool_calls`, …), as the
            // provider wire names them.
            let word = serde_json::to_value(finish)
                .ok()
                .and_then(|v| v.as_str().map(str::to_string))
                .unwrap_or_default();
            tracing::Span::current().record("gen_ai.response.finish_reasons", word.as_str());
        }
        let calls = self.unique_call_ids(response.tool_calls);
        tracing::debug!(
            text_chars = response.text.len(),
            tool_calls = calls.len(),
            finish = ?response.finish,
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
        Ok(Some(Answer {
            calls,
            finish: response.finish,
            usage: response.usage,
        }))
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
                _ = cancel.cancelled() => return Ok(Streamed::Cancelled(String::new(), Vec::new())),
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
            _ = cancel.cancelled() => return Ok(Streamed::Cancelled(String::new(), Vec::new())),
            stream = self.provider.stream(request) => stream.map_err(StreamFailure::Start)?,
        };
        let mut assembler = ResponseAssembler::new();
        let mut started = false;
        loop {
            let next = tokio::select! {
                biased;
                _ = cancel.cancelled() => {
                    return Ok(Streamed::Cancelled(
                        assembler.text().to_string(),
                        assembler.started_calls(),
                    ));
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
                pod_llm::StreamEvent::ToolCallStart { name, .. } => {
                    observer.on_event(WorkerEvent::CallStreaming { name: name.clone() })
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
            if call.id.is_empty() || self.call_ids.contains(&self.id_hasher.hash_one(&call.id)) {
                let base = if call.id.is_empty() {
                    "call"
                } else {
                    call.id.as_str()
                };
                let mut n = self.call_ids.len();
                let mut candidate = format!("{base}_{n}");
                while self.call_ids.contains(&self.id_hasher.hash_one(&candidate)) {
                    n += 1;
                    candidate = format!("{base}_{n}");
                }
                call.id = candidate;
            }
            self.call_ids.insert(self.id_hasher.hash_one(&call.id));
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
