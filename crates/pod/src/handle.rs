//! The cloneable way in to a Pod.

use crate::error::PodError;
use crate::events::{EventBus, PodEvent};
use pod_llm::Item;
use pod_tools::TodoItem;
use pod_worker::TurnOutcome;
use std::path::{Path, PathBuf};
use tokio::sync::{broadcast, mpsc, oneshot};
use uuid::Uuid;

/// What a handle asks of its Pod; replies travel in the oneshot inside.
pub(crate) enum Command {
    Prompt {
        text: Option<String>,
        reply: oneshot::Sender<Result<TurnOutcome, PodError>>,
        /// The caller's span: the run's span is its child (a subagent's run
        /// under its parent's `task` call).
        caller: tracing::Span,
    },
    Notify {
        text: String,
    },
    Compact {
        reply: oneshot::Sender<Result<crate::compact::CompactionReport, PodError>>,
    },
    Cancel {
        /// By the person at the terminal (recorded as interrupted).
        interrupt: bool,
    },
    GetHistory {
        reply: oneshot::Sender<Result<Vec<Item>, PodError>>,
    },
    GetTodos {
        reply: oneshot::Sender<Vec<TodoItem>>,
    },
    Shutdown {
        reply: oneshot::Sender<Result<(), PodError>>,
    },
}

/// A handle to a running Pod. Clones talk to the same Pod; when the last one
/// is dropped the Pod cancels any running turn, syncs its log and stops.
#[derive(Clone, Debug)]
pub struct PodHandle {
    // Boxed commands: a channel's first block has room for 32 of them,
    // made with the channel, and a command inline is 72 bytes; every Pod,
    // idle or not, held those 2.3 KB.
    pub(crate) tx: mpsc::Sender<Box<Command>>,
    pub(crate) events: EventBus,
    pub(crate) session_id: Uuid,
    pub(crate) log_path: Option<PathBuf>,
}

impl PodHandle {
    /// The session id.
    pub fn session_id(&self) -> Uuid {
        self.session_id
    }

    /// The session log file, when the session is in the file store.
    pub fn log_path(&self) -> Option<&Path> {
        self.log_path.as_deref()
    }

    /// Subscribes to the Pod's events. A subscriber that falls more than the
    /// configured capacity behind sees `RecvError::Lagged`; it never slows
    /// the Pod down.
    pub fn subscribe(&self) -> broadcast::Receiver<PodEvent> {
        self.events.subscribe()
    }

    /// Runs a turn with this prompt and returns how it ended. Prompts sent
    /// while a turn runs wait, in order.
    pub async fn prompt(&self, text: impl Into<String>) -> Result<TurnOutcome, PodError> {
        self.run(Some(text.into())).await
    }

    /// Runs a turn without a new prompt: the model goes on from the history
    /// (after a resume, this continues the unfinished plan).
    pub async fn continue_turn(&self) -> Result<TurnOutcome, PodError> {
        self.run(None).await
    }

    async fn run(&self, text: Option<String>) -> Result<TurnOutcome, PodError> {
        let (reply, done) = oneshot::channel();
        let caller = tracing::Span::current();
        self.send(Command::Prompt {
            text,
            reply,
            caller,
        })
        .await?;
        done.await.map_err(|_| PodError::Closed)?
    }

    /// Delivers a notification to the model: a system item committed before
    /// the next request (kept until the next turn if the Pod is idle).
    pub async fn notify(&self, text: impl Into<String>) -> Result<(), PodError> {
        self.send(Command::Notify { text: text.into() }).await
    }

    /// Cancels the running turn, if any. Its prompt call returns with
    /// `TurnEndReason::Cancelled`; the history stays valid; the log says the
    /// run was cancelled.
    pub async fn cancel(&self) -> Result<(), PodError> {
        self.send(Command::Cancel { interrupt: false }).await
    }

    /// Cancels the running turn as the person at the terminal does (Ctrl-C,
    /// a closed output): the same as [`cancel`](Self::cancel), but the log
    /// says the run was interrupted.
    pub async fn interrupt(&self) -> Result<(), PodError> {
        self.send(Command::Cancel { interrupt: true }).await
    }

    /// Compacts the history now (after any running or queued turn): a
    /// summary, the recent tail and the unfinished plan become the context.
    /// On failure the history is unchanged.
    pub async fn compact(&self) -> Result<crate::compact::CompactionReport, PodError> {
        let (reply, done) = oneshot::channel();
        self.send(Command::Compact { reply }).await?;
        done.await.map_err(|_| PodError::Closed)?
    }

    /// The full history from the log, reminders and notifications included.
    pub async fn get_history(&self) -> Result<Vec<Item>, PodError> {
        let (reply, done) = oneshot::channel();
        self.send(Command::GetHistory { reply }).await?;
        done.await.map_err(|_| PodError::Closed)?
    }

    /// The current todo list.
    pub async fn get_todos(&self) -> Result<Vec<TodoItem>, PodError> {
        let (reply, done) = oneshot::channel();
        self.send(Command::GetTodos { reply }).await?;
        done.await.map_err(|_| PodError::Closed)
    }

    /// Cancels any running turn, fails queued prompts, syncs the log and
    /// stops the Pod; returns when all of that is done.
    pub async fn shutdown(&self) -> Result<(), PodError> {
        let (reply, done) = oneshot::channel();
        self.send(Command::Shutdown { reply }).await?;
        done.await.map_err(|_| PodError::Closed)?
    }

    async fn send(&self, command: Command) -> Result<(), PodError> {
        self.tx
            .send(Box::new(command))
            .await
            .map_err(|_| PodError::Closed)
    }
}
