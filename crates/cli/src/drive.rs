//! Driving a Pod from the command line: one turn (continued by the Pod
//! itself in `--until-done` mode), events to the output, Ctrl-C.
//!
//! Ctrl-C once cancels the running turn (the history stays valid), then the
//! Pod is shut down so the log is synced, and the command exits 130. A second
//! Ctrl-C exits at once; the log already holds every committed item, so the
//! session stays resumable either way.
//!
//! When the session has a terminal approver, its questions arrive here
//! ([`Asks`]): the events before each one are printed first, then the user
//! is asked on stderr while the Pod waits. Ctrl-C during the question
//! answers it `Cancelled` and cancels the turn.

use crate::approval::terminal::{prompt_on_terminal, Ask};
use crate::error::{Outcome, EXIT_INTERRUPTED};
use crate::output::{Finished, Output, Started};
use crate::session;
use anyhow::Result;
use pod::{ApprovalDecision, PodHandle};
use pod_worker::TurnEndReason;
use tokio::sync::broadcast::error::{RecvError, TryRecvError};
use tokio::sync::{broadcast, mpsc, oneshot};

/// Questions of the session's terminal approver; `None` when it has none.
pub type Asks = Option<mpsc::Receiver<Ask>>;

/// A question on screen: the user's answer and where it goes.
struct Asking {
    answer: oneshot::Receiver<ApprovalDecision>,
    reply: oneshot::Sender<ApprovalDecision>,
}

/// What the first turn is given.
pub enum FirstTurn {
    /// A prompt.
    Prompt(String),
    /// Nothing: the model goes on from the history.
    Continue,
}

/// Runs the turn, reporting to `out`; shuts the Pod down before returning.
/// With `--until-done` the Pod itself continues the turn while todos are
/// unfinished (`PodConfig::until_done`).
pub async fn drive(
    handle: PodHandle,
    started: Started,
    first: FirstTurn,
    out: &mut dyn Output,
    mut asks: Asks,
) -> Result<Outcome> {
    let mut events = handle.subscribe();
    out.started(&started)?;
    let turn = async {
        match first {
            FirstTurn::Prompt(text) => handle.prompt(text).await,
            FirstTurn::Continue => handle.continue_turn().await,
        }
    };
    tokio::pin!(turn);
    let mut interrupted = false;
    let mut asking: Option<Asking> = None;
    // One listener for the whole drive, so no signal slips between polls.
    let ctrl_c = tokio::signal::ctrl_c();
    tokio::pin!(ctrl_c);
    let result = loop {
        tokio::select! {
            // Show what happened before reacting to the end of the turns.
            biased;
            event = events.recv() => match event {
                Ok(event) => out.event(&event)?,
                Err(RecvError::Lagged(missed)) => out.lagged(missed)?,
                Err(RecvError::Closed) => {}
            },
            Some(ask) = next_ask(&mut asks), if asking.is_none() => {
                // The events sent before the question belong above it.
                drain(&mut events, out)?;
                out.prompting()?;
                asking = Some(Asking {
                    answer: prompt_on_terminal(ask.request),
                    reply: ask.reply,
                });
            }
            decision = answer(&mut asking) => {
                if let Some(asked) = asking.take() {
                    // The Pod may have stopped waiting (cancelled turn).
                    let _ = asked.reply.send(decision);
                }
            }
            _ = &mut ctrl_c, if !interrupted => {
                interrupted = true;
                if let Some(asked) = asking.take() {
                    let _ = asked.reply.send(ApprovalDecision::Cancelled);
                }
                out.note("cancelling the turn (Ctrl-C again to quit at once)")?;
                exit_on_second_ctrl_c();
                // A closed Pod has nothing to cancel.
                let _ = handle.cancel().await;
            }
            result = &mut turn => break result,
        }
    };
    // Every event of the turns was sent before their replies: drain them.
    drain(&mut events, out)?;
    let todos = handle.get_todos().await.unwrap_or_default();
    handle.shutdown().await?;
    let interrupted =
        interrupted || matches!(&result, Ok(o) if o.reason == TurnEndReason::Cancelled);
    let finished = Finished {
        session_id: started.session_id,
        log_path: started.log_path,
        reason: result.as_ref().ok().map(|o| o.reason.clone()),
        requests: result.as_ref().map_or(0, |o| o.requests),
        todos: session::progress(&todos),
        interrupted,
    };
    out.finished(&finished)?;
    result?;
    Ok(if interrupted {
        Outcome::Interrupted
    } else {
        Outcome::Done
    })
}

/// Prints the events already sent.
fn drain(events: &mut broadcast::Receiver<pod::PodEvent>, out: &mut dyn Output) -> Result<()> {
    loop {
        match events.try_recv() {
            Ok(event) => out.event(&event)?,
            Err(TryRecvError::Lagged(missed)) => out.lagged(missed)?,
            Err(TryRecvError::Empty | TryRecvError::Closed) => return Ok(()),
        }
    }
}

/// The approver's next question; never, without an approver.
async fn next_ask(asks: &mut Asks) -> Option<Ask> {
    match asks {
        Some(asks) => asks.recv().await,
        None => std::future::pending().await,
    }
}

/// The user's answer to the question on screen; never, without one. A
/// prompt that ended without answering is `Cancelled`.
async fn answer(asking: &mut Option<Asking>) -> ApprovalDecision {
    match asking {
        Some(asked) => (&mut asked.answer)
            .await
            .unwrap_or(ApprovalDecision::Cancelled),
        None => std::future::pending().await,
    }
}

/// After the first Ctrl-C, the next one ends the process at once.
fn exit_on_second_ctrl_c() {
    tokio::spawn(async {
        if tokio::signal::ctrl_c().await.is_ok() {
            eprintln!("interrupted");
            std::process::exit(i32::from(EXIT_INTERRUPTED));
        }
    });
}
