//! The Pod actor: a task that owns a Worker, its log and its session state,
//! reached only through a [`PodHandle`].

use crate::checkpoints::Checkpoints;
use crate::config::{Durability, PodConfig};
use crate::error::PodError;
use crate::events::{EventBus, PodEvent};
use crate::gate::{ApprovalGate, ParkedOn};
use crate::handle::{Command, PodHandle};
use crate::hooks::{HookInterceptor, HookRunner, HookVerdicts};
use crate::interceptors::{Approval, CompactionTrigger, Followups, NotificationQueue, Spent};
use crate::job::{self, Answer, Done, Job};
use crate::log::{LogRecord, ParentLink};
use crate::observer::PodObserver;
use crate::questions::Questions;
use crate::session::{self, OpenSession};
use crate::stack::{context_window, shared_limits, stack, Gatekeepers};
use crate::store::{LogWriter, Store};
use crate::subagents::Lineage;
use crate::tools::{SessionTools, ToolsFor};
use crate::turn::{CompactionSetup, TurnParts};
use pod_llm::tokens::estimate_request_tokens;
use pod_llm::{Item, ProviderRequest};
use pod_tools::TodoStore;
use pod_worker::{InterceptorStack, Worker, WorkerConfig};
use std::collections::VecDeque;
use std::path::PathBuf;
use std::sync::Arc;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

// Commands are small and each caller awaits its reply, so a short mailbox is
// plenty; senders wait (not fail) when it is full.
const MAILBOX: usize = 32;

/// Starts Pods. See [`PodHandle`] for what a running Pod does.
pub struct Pod;

impl Pod {
    /// Starts a new session.
    pub async fn spawn(config: PodConfig) -> Result<PodHandle, PodError> {
        Self::create(config, Uuid::new_v4(), None).await
    }

    /// Starts a new session with the id `id`, which the caller derived
    /// (a webhook delivery's, so that a second delivery finds the first's
    /// session); refused if the store has a session `id`.
    pub async fn spawn_as(config: PodConfig, id: Uuid) -> Result<PodHandle, PodError> {
        Self::create(config, id, None).await
    }

    /// Starts a new session `id`; a subagent's names its parent.
    pub(crate) async fn create(
        config: PodConfig,
        id: Uuid,
        parent: Option<ParentLink>,
    ) -> Result<PodHandle, PodError> {
        let mut config = config;
        if let Some(cost) = config.cost_budget.as_mut() {
            // A child's is its parent's, already set.
            if parent.is_none() {
                cost.session_max = config.session_budget.cost;
            }
        }
        let config = Arc::new(config);
        let store = config.store();
        let header = session::header(&config, id, parent);
        let lineage = Lineage::of(Some(&header));
        let session = session::create(&config, &store, &header).await?;
        let events = event_channel(&config);
        let tools = SessionTools::new(&config, tools_for(id, lineage, &events))?;
        tracing::info!(
            session = %session.id,
            workspace = %config.workspace.display(),
            model = %config.provider.model_name(),
            depth = lineage.depth,
            "session created"
        );
        start(config, store, session, tools, events, lineage, false)
    }

    /// Reopens session `id` from its log and starts it.
    pub async fn resume(id: Uuid, config: PodConfig) -> Result<PodHandle, PodError> {
        Self::reopen(id, config, None).await
    }

    /// Reopens session `id`; `parent` is written as its link when the crash
    /// cut the log's header (a subagent's).
    pub(crate) async fn reopen(
        id: Uuid,
        config: PodConfig,
        parent: Option<ParentLink>,
    ) -> Result<PodHandle, PodError> {
        let mut config = config;
        let store = config.store();
        let opened = session::open(id, &config, &store, parent).await?;
        let lineage = Lineage::of(Some(&opened.header));
        if lineage.depth == 0 {
            // The session's limits hold across its starts, and its money
            // meter goes on from what its log (and its subagents') spent.
            config.session_budget = session::settle_limits(&opened, &config).await?;
            if let Some(cost) = config.cost_budget.as_mut() {
                cost.session_max = config.session_budget.cost;
                if cost.session_max.is_some() {
                    let spent =
                        crate::ledger::session_cost(&store, id, &opened.records, &cost.prices)
                            .await?;
                    cost.session.set(spent);
                }
            }
        }
        let config = Arc::new(config);
        let events = event_channel(&config);
        let tools = SessionTools::new(&config, tools_for(id, lineage, &events))?;
        let session =
            session::resume(opened, &config, &tools.registry, &mut tools.states()).await?;
        tracing::info!(
            session = %id,
            items = session.history.len(),
            todos = tools.todos.snapshot().len(),
            model = %config.provider.model_name(),
            depth = lineage.depth,
            "session resumed"
        );
        start(config, store, session, tools, events, lineage, true)
    }
}

fn event_channel(config: &PodConfig) -> EventBus {
    EventBus::new(config.event_capacity)
}

fn tools_for(id: Uuid, lineage: Lineage, events: &EventBus) -> ToolsFor<'_> {
    ToolsFor {
        id,
        lineage,
        events,
    }
}

/// The job that runs now.
struct Running {
    task: JoinHandle<Done>,
    cancel: CancellationToken,
    // Cancelled by the person at the terminal, not by a cancel.
    interrupted: bool,
}

struct PodActor {
    // Shared with the session's subagent tool, which starts children from it.
    config: Arc<PodConfig>,
    // Where the session sits in a tree of subagents (its tools depend on it).
    lineage: Lineage,
    store: Store,
    log: LogWriter,
    // The plan as `GetTodos` answers it (the current tools' store).
    todos: TodoStore,
    events: EventBus,
    notifications: NotificationQueue,
    // The operator's hooks, if any.
    hooks: Option<HookRunner>,
    // `None` while a turn runs: the running task owns them.
    // Boxed: a job moves them into its task and back, and in a task
    // future an argument is held twice (as given, and as moved in).
    parts: Option<Box<TurnParts>>,
    // Set when the store fenced this Pod off (its lease was taken over).
    fenced: Option<(Uuid, i64)>,
    // The question the last turn parked on, if it did.
    parked: ParkedOn,
    // When the session was created (its wall-time limit counts from it).
    created_at: chrono::DateTime<chrono::Utc>,
    // A cancel that came before the next queued job started (interrupt or
    // not): that job starts cancelled.
    cancel_next: Option<bool>,
    running: Option<Running>,
    queue: VecDeque<Job>,
    rx: mpsc::Receiver<Box<Command>>,
}

fn start(
    config: Arc<PodConfig>,
    store: Store,
    session: OpenSession,
    tools: SessionTools,
    events: EventBus,
    lineage: Lineage,
    resumed: bool,
) -> Result<PodHandle, PodError> {
    if config.workspace_tools && config.sandbox.mode != pod_tools::SandboxMode::Off {
        match config.sandbox.is_enforced() {
            true => tracing::info!(sandbox = %config.sandbox.describe(), "bash is sandboxed"),
            // Never silently unsandboxed; front ends say it to the user too.
            false => tracing::warn!(sandbox = %config.sandbox.describe(), "bash sandbox"),
        }
    }
    let (tx, rx) = mpsc::channel(MAILBOX);
    let handle = PodHandle {
        tx,
        events: events.clone(),
        session_id: session.id,
        log_path: session.log.path().map(PathBuf::from),
    };
    for hook in &config.on_start {
        hook(&handle, &config);
    }
    let notifications = NotificationQueue::default();
    let todos = tools.todos.clone();
    let created_at = session.created_at;
    let parked = ParkedOn::default();
    let hooks = config
        .hooks
        .as_ref()
        .filter(|hooks| !hooks.is_empty())
        .map(|hooks| {
            HookRunner::new(
                hooks.clone(),
                session.id,
                session.log.path().map(PathBuf::from),
                config.workspace.clone(),
                events.clone(),
                resumed,
                lineage.depth > 0,
            )
        });
    if let Some(hooks) = &hooks {
        hooks.watch_notifications();
    }
    let parts = build_parts(
        &config,
        Shared {
            log: &session.log,
            events: &events,
            notifications: &notifications,
            parked: &parked,
            hooks: hooks.as_ref(),
        },
        tools,
        Replayed {
            history: session.history,
            spent: session.spent,
            questions: session.questions,
            created_at: session.created_at,
        },
        lineage,
    );
    let actor = PodActor {
        config,
        lineage,
        store,
        log: session.log,
        todos,
        events,
        notifications,
        hooks,
        parts: Some(parts),
        fenced: None,
        parked,
        created_at,
        cancel_next: None,
        running: None,
        queue: VecDeque::new(),
        rx,
    };
    tokio::spawn(actor.run());
    Ok(handle)
}

/// What a session's log gave a Pod that (re)builds its parts.
struct Replayed {
    history: Vec<Item>,
    spent: Spent,
    questions: Questions,
    created_at: chrono::DateTime<chrono::Utc>,
}

/// What the Pod keeps for its whole life and every set of parts shares.
struct Shared<'a> {
    log: &'a LogWriter,
    events: &'a EventBus,
    notifications: &'a NotificationQueue,
    parked: &'a ParkedOn,
    hooks: Option<&'a HookRunner>,
}

/// The parts a job runs with, over tools whose state is already rebuilt.
fn build_parts(
    config: &PodConfig,
    shared: Shared<'_>,
    tools: SessionTools,
    replayed: Replayed,
    lineage: Lineage,
) -> Box<TurnParts> {
    let Shared {
        log,
        events,
        notifications,
        parked,
        hooks,
    } = shared;
    let Replayed {
        history,
        spent,
        questions,
        created_at,
    } = replayed;
    // The gate takes up the questions where the log left them; a
    // subagent's turn never parks (its parent's call would move on).
    let gate = ApprovalGate::new(config.approval.clone(), config.approver.clone())
        .recorded(
            log.clone(),
            events.clone(),
            &questions,
            &history,
            lineage.depth == 0,
            parked.clone(),
        )
        .with_client_tools(config.client_tools.iter().map(|t| t.name.clone()));
    // The hooks take up their decisions where the log left them, and tell
    // the approval after them what they allowed or want asked.
    let verdicts = HookVerdicts::default();
    let first_tree = crate::checkpoints::FirstTree::default();
    if let Some(tree) = questions.first_tree() {
        let _ = first_tree.set(tree.to_string());
    }
    let gatekeepers = Gatekeepers {
        hooks: hooks.map(|runner| {
            HookInterceptor::new(
                runner.clone(),
                log.clone(),
                verdicts.clone(),
                questions.hook_decisions(&history),
            )
        }),
        approval: Approval::new(gate).with_hooks(verdicts),
        followups: config
            .followups
            .filter(|_| lineage.depth == 0)
            .map(|followups| Followups::new(parked.clone(), followups.wakes, &history)),
        checkpoints: (config.checkpoints && lineage.depth == 0).then(|| {
            Checkpoints::new(
                pod_checkpoint::Shadow::new(
                    config.home.path().join(crate::checkpoints::STORE_DIR),
                    config
                        .home
                        .session_dir(log.session_id())
                        .join(crate::checkpoints::INDEX_FILE),
                    config.workspace.clone(),
                ),
                log.clone(),
                events.clone(),
                first_tree.clone(),
            )
        }),
    };
    let SessionTools {
        registry,
        todos: store,
        workspace,
        subagents,
        checks,
    } = tools;
    // One copy for the worker and every request it makes.
    let system_prompt: Arc<str> = config.system_prompt.as_str().into();
    let worker_config = WorkerConfig {
        system_prompt: Arc::clone(&system_prompt),
        budget: config.budget.clone(),
        // One session, one prompt cache.
        cache_key: Some(log.session_id().to_string().into()),
        ..WorkerConfig::default()
    };
    let trigger = context_window(config).map(|window| CompactionTrigger {
        window,
        limit: (window as f64 * config.compaction.threshold.clamp(0.05, 1.0)) as u64,
        overhead: estimate_request_tokens(&ProviderRequest {
            system_prompt: Arc::clone(&system_prompt),
            history: Default::default(),
            tools: registry.specs(),
            cache_key: None,
            history_id: None,
        }),
    });
    let limits = shared_limits(config, parked, lineage.depth == 0).map(|(guard, pending)| {
        let overhead = estimate_request_tokens(&ProviderRequest {
            system_prompt: Arc::clone(&system_prompt),
            history: Default::default(),
            tools: registry.specs(),
            cache_key: None,
            history_id: None,
        });
        (guard.with_overhead(overhead), pending)
    });
    let pending = limits.as_ref().map(|guard| guard.1.clone());
    let interceptor = stack(
        config,
        &store,
        notifications,
        trigger,
        (spent, created_at),
        (gatekeepers, limits.map(|guard| guard.0)),
        lineage.depth == 0,
    );
    let verifier = match (&config.verify, checks) {
        (Some(verify), Some(workspace)) => Some(Arc::new(crate::verify::Verifier::new(
            verify.clone(),
            crate::verify::VerifierParts {
                workspace,
                changes: config.checkpoints.then(|| {
                    let shadow = crate::checkpoints::shadow(
                        &config.home,
                        log.session_id(),
                        config.workspace.clone(),
                    );
                    (shadow, first_tree.clone())
                }),
                log: log.clone(),
                events: events.clone(),
                todos: store.clone(),
            },
            questions.verified(),
            &history,
        ))),
        _ => None,
    };
    // Verification sees the stack's combined answer at each turn's end.
    let interceptor = match &verifier {
        Some(verifier) => {
            let mut outer = InterceptorStack::new();
            outer.push(crate::verify::VerifyGate::new(
                interceptor,
                Arc::clone(verifier),
            ));
            outer
        }
        None => interceptor,
    };
    let mut worker = Worker::new(config.provider.clone(), registry, worker_config);
    worker.set_history(history);
    Box::new(TurnParts {
        worker,
        interceptor,
        verifier,
        observer: PodObserver::new(
            log.clone(),
            events.clone(),
            store.clone(),
            config.durability,
        )
        .charging(config.cost_budget.clone())
        .settling(pending),
        compaction: CompactionSetup {
            provider: config
                .compact_provider
                .clone()
                .unwrap_or_else(|| config.provider.clone()),
            config: config.compaction.clone(),
            todos: store,
            files: workspace.map(|w| w.tracker().clone()),
            log: log.clone(),
            events: events.clone(),
            hooks: hooks.cloned(),
            cost: config.cost_budget.clone(),
        },
        subagents,
        trace: questions.last_trace().map(str::to_string),
    })
}

/// What woke the actor.
enum Woken {
    Command(Option<Command>),
    // Boxed: the parts it carries are most of a Pod, and whatever the
    // actor's future holds, every idle Pod holds.
    Joined(Box<Result<Done, tokio::task::JoinError>>),
}

impl PodActor {
    async fn run(mut self) {
        loop {
            self.start_next_turn();
            let woken = tokio::select! {
                command = self.rx.recv() => Woken::Command(command.map(|command| *command)),
                joined = wait_for(&mut self.running), if self.running.is_some() => Woken::Joined(Box::new(joined)),
            };
            // The work a wake-up starts is boxed: an idle Pod's task keeps
            // only what waiting needs, not the largest of these futures
            // (several KB, with a rebuild from the log inside), for every
            // Pod of a process that runs thousands.
            match woken {
                Woken::Command(Some(Command::Shutdown { reply })) => {
                    let _ = reply.send(Box::pin(self.shutdown()).await);
                    return;
                }
                Woken::Command(Some(command)) => Box::pin(self.handle(command)).await,
                Woken::Command(None) => {
                    if let Err(err) = Box::pin(self.shutdown()).await {
                        tracing::error!(%err, "pod shutdown after last handle dropped");
                    }
                    return;
                }
                Woken::Joined(joined) => Box::pin(self.finish_turn(*joined)).await,
            }
        }
    }

    async fn handle(&mut self, command: Command) {
        match command {
            Command::Prompt {
                text,
                reply,
                caller,
            } => self.queue.push_back(Job::Prompt {
                text,
                reply,
                caller,
            }),
            Command::Compact { reply } => self.queue.push_back(Job::Compact { reply }),
            Command::Notify { text } => self.notifications.push(text),
            Command::Cancel { interrupt } => match &mut self.running {
                Some(running) => {
                    running.interrupted |= interrupt;
                    running.cancel.cancel();
                }
                // A prompt sent and cancelled before its turn started (an
                // API client's create then cancel): its turn ends at once.
                None if !self.queue.is_empty() => self.cancel_next = Some(interrupt),
                None => {}
            },
            Command::GetHistory { reply } => {
                let _ =
                    reply.send(Self::full_history(self.store.clone(), self.log.session_id()).await);
            }
            Command::GetTodos { reply } => {
                let _ = reply.send(self.todos.snapshot());
            }
            Command::Shutdown { .. } => {}
        }
    }

    fn start_next_turn(&mut self) {
        if self.running.is_some() {
            return;
        }
        let Some(parts) = self.parts.take() else {
            // A crashed job whose state could not be rebuilt from the log,
            // or a lost lease: answer waiting callers instead of leaving
            // them hanging.
            let fenced = self.fenced;
            for job in self.queue.drain(..) {
                job.fail(match fenced {
                    Some((id, epoch)) => PodError::LeaseLost { id, epoch },
                    None => PodError::Lost,
                });
            }
            return;
        };
        let Some(next) = self.queue.pop_front() else {
            self.parts = Some(parts);
            return;
        };
        if let Job::Prompt { text, .. } = &next {
            self.parked.clear();
            tracing::info!(
                prompt_chars = text.as_ref().map(String::len),
                "turn started"
            );
            self.events.send(PodEvent::TurnStarted {
                prompt: text.clone(),
            });
        }
        let cancel = CancellationToken::new();
        let interrupted = match self.cancel_next.take() {
            Some(interrupt) => {
                cancel.cancel();
                interrupt
            }
            None => false,
        };
        let task = tokio::spawn(job::run(parts, next, cancel.clone()));
        self.running = Some(Running {
            task,
            cancel,
            interrupted,
        });
    }

    async fn finish_turn(&mut self, joined: Result<Done, tokio::task::JoinError>) {
        let Some(running) = self.running.take() else {
            return;
        };
        let Done { parts, mut answer } = match joined {
            Ok(done) => done,
            // The job catches its own panics; a task that still failed
            // (aborted by the runtime) took its caller's reply with it.
            Err(join) => {
                tracing::error!(%join, "pod job lost; rebuilding the pod from its log");
                if let Err(err) = self.rebuild_from_log().await {
                    self.emit(PodEvent::Error {
                        message: pod_llm::error_chain(&err),
                    });
                }
                return;
            }
        };
        let observed_fence = parts.as_ref().and_then(|parts| parts.observer.fenced());
        self.parts = parts;
        if self.parts.is_none() {
            // The job's task panicked and took its parts with it: rebuild
            // everything from the log, the one source of truth.
            tracing::error!(error = ?answer.error(), "pod job crashed; rebuilding the pod from its log");
            if let Err(err) = self.rebuild_from_log().await {
                answer.fail_with(err);
            }
        } else if let Some(fenced) = answer
            .error()
            .and_then(|err| job::lease_lost(err, observed_fence))
        {
            // Another worker owns the session now: this Pod must never
            // write to it again, so it stops running jobs.
            tracing::error!(session = %self.log.session_id(), "lost the session's lease; stopping");
            self.parts = None;
            self.fenced = Some(fenced);
        } else if answer.error().is_some_and(job::persist_failed) {
            // The log refused an item the worker may hold in memory: make
            // memory match the log again.
            tracing::error!(error = ?answer.error(), "log append failed; rebuilding the pod from its log");
            if let Err(err) = self.rebuild_from_log().await {
                self.emit(PodEvent::Error {
                    message: pod_llm::error_chain(&err),
                });
            }
        }
        // A turn that did not finish says how in the log, so every reader
        // (`pod sessions`, the API, a later resume) tells the truth about it.
        let cut = self.parts.as_mut().and_then(|p| p.observer.take_cut());
        if self.fenced.is_none() {
            if let Some(ended) = job::ended(&answer, running.interrupted, cut) {
                if let Err(err) = self.log.append(&LogRecord::Ended(ended), true).await {
                    tracing::warn!(err = %pod_llm::error_chain(&err), "cannot record how the run ended");
                }
            }
        }
        if self.config.durability != Durability::Never {
            if let Err(err) = self.log.sync().await {
                self.emit(PodEvent::Error {
                    message: pod_llm::error_chain(&err),
                });
            }
        }
        match answer {
            Answer::Turn { result, reply } => {
                match &result {
                    Ok(outcome) => {
                        tracing::info!(
                            reason = ?outcome.reason,
                            requests = outcome.requests,
                            "turn ended"
                        );
                        self.emit(PodEvent::TurnEnded {
                            reason: outcome.reason.clone(),
                            usage: outcome.usage,
                            requests: outcome.requests,
                        });
                    }
                    // The caller gets the error and reports it.
                    Err(err) => {
                        tracing::info!(err = %pod_llm::error_chain(err), "turn failed");
                        self.emit(PodEvent::TurnFailed {
                            message: pod_llm::error_chain(err),
                        });
                    }
                }
                let _ = reply.send(result);
            }
            Answer::Compact { result, reply } => {
                let _ = reply.send(result);
            }
        }
    }

    fn emit(&self, event: PodEvent) {
        // No subscriber is fine: events are for display only.
        self.events.send(event);
    }

    async fn rebuild_from_log(&mut self) -> Result<(), PodError> {
        // Fresh tools, so nothing the failed job held survives; the
        // embedder's tools are cleared by the replay.
        let id = self.log.session_id();
        let tools = SessionTools::new(&self.config, tools_for(id, self.lineage, &self.events))?;
        let (history, spent, questions) = session::reload(
            &self.store,
            &self.log,
            self.config.session_budget.is_set(),
            &tools.registry,
            &mut tools.states(),
        )
        .await?;
        self.todos = tools.todos.clone();
        // Undelivered notifications stay in the shared queue.
        self.parts = Some(build_parts(
            &self.config,
            Shared {
                log: &self.log,
                events: &self.events,
                notifications: &self.notifications,
                parked: &self.parked,
                hooks: self.hooks.as_ref(),
            },
            tools,
            Replayed {
                history,
                spent,
                questions,
                created_at: self.created_at,
            },
            self.lineage,
        ));
        Ok(())
    }

    /// Every logged item. Takes the store, not `&self`: the actor (which
    /// holds the interceptor stack, not `Sync`) is not shared across the
    /// read.
    async fn full_history(store: Store, id: Uuid) -> Result<Vec<Item>, PodError> {
        let contents = store.read(id).await?;
        Ok(crate::replay::full_history(&contents.records))
    }

    async fn shutdown(&mut self) -> Result<(), PodError> {
        if let Some(running) = &self.running {
            running.cancel.cancel();
        }
        if let Some(running) = self.running.as_mut() {
            let joined = (&mut running.task).await;
            self.finish_turn(joined).await;
        }
        for job in self.queue.drain(..) {
            job.fail(PodError::Closed);
        }
        if let Some(hooks) = &self.hooks {
            hooks.session_end().await;
        }
        // Parked on a question: a store with workers wakes it on the answer
        // (or at the question's timeout).
        match self.parked.take() {
            Some(waits) => self.log.hand_over(waits).await.map(|_| ()),
            None => self.log.shutdown().await,
        }
    }
}

async fn wait_for(running: &mut Option<Running>) -> Result<Done, tokio::task::JoinError> {
    match running {
        Some(running) => (&mut running.task).await,
        None => std::future::pending().await,
    }
}
