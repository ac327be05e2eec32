//! Driving a Pod from the command line: one run (continued by the Pod
//! itself in `--until-done` mode), events to the output, Ctrl-C, and an
//! honest ending: how the run ended decides the exit code.
//!
//! Ctrl-C once cancels the running turn (the history stays valid), then the
//! Pod is shut down so the log is synced, and the command exits 130. A second
//! Ctrl-C exits at once; the log already holds every committed item, so the
//! session stays resumable either way. End of input at an approval prompt
//! is the user walking away: the turn is cancelled the same way. A closed
//! stdout cancels the turn too (nobody sees what it does) and exits 141.
//!
//! When the session has a terminal approver, its questions arrive here
//! ([`Asks`]): the events before each one are printed first, then the user
//! is asked on stderr while the Pod waits. Ctrl-C during the question
//! answers it `Cancelled` and cancels the turn.

use crate::approval::terminal::{prompt_on_terminal, Ask, Asks};
use crate::error::{is_broken_pipe, Outcome, EXIT_INTERRUPTED};
use crate::output::{Finished, Output, Started, Stopped};
use anyhow::Result;
use pod::{ApprovalDecision, PodEvent, PodHandle};
use pod_launch::sessions::{self as session, Progress};
use pod_worker::TurnEndReason;
use std::collections::HashSet;
use std::io::IsTerminal;
use tokio::sync::broadcast::error::{RecvError, TryRecvError};
use tokio::sync::{broadcast, oneshot};

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

/// Why the drive loop stopped the run early.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Interruption {
    /// Ctrl-C, or end of input at a prompt.
    User,
    /// Stdout was closed.
    OutputClosed,
}

/// Tool calls answered without running: the events tell which.
#[derive(Default)]
struct CallsSeen {
    started: HashSet<String>,
    not_run: Vec<String>,
    refused: Vec<crate::output::Refused>,
    // The last verification round's outcome.
    verified: Option<bool>,
}

impl CallsSeen {
    fn observe(&mut self, event: &PodEvent) {
        if let PodEvent::Verified { record } = event {
            self.verified = Some(record.passed);
        }
        match event {
            PodEvent::ToolCallStarted { call_id, .. } => {
                self.started.insert(call_id.clone());
            }
            PodEvent::CallNotRun {
                name, by, reason, ..
            } => self.refused.push(crate::output::Refused {
                tool: name.clone(),
                by: *by,
                reason: reason.clone(),
            }),
            PodEvent::ToolCallFinished { call_id, name, .. } if !self.started.contains(call_id) => {
                self.not_run.push(name.clone())
            }
            _ => {}
        }
    }
}

/// The session's ledger from its log; an unreadable log (reported
/// elsewhere) counts nothing.
async fn session_usage(started: &Started) -> pod_llm::Usage {
    match started.store.read(started.session_id).await {
        Ok(contents) => pod::ledger::session_usage(&contents.records).0,
        Err(_) => Default::default(),
    }
}

/// How often a live status line is redrawn (its clock and spinner).
const TICK: std::time::Duration = std::time::Duration::from_millis(250);

/// Runs the turn, reporting to `out`; shuts the Pod down before returning.
/// With `until_done` the Pod itself continues the turn while todos are
/// unfinished (`PodConfig::until_done`), and ending with some unfinished is
/// a stop, not a success.
pub async fn drive(
    handle: PodHandle,
    started: Started,
    first: FirstTurn,
    until_done: bool,
    out: &mut dyn Output,
    mut asks: Asks,
) -> Result<Outcome> {
    let mut events = handle.subscribe();
    if let Err(err) = out.started(&started) {
        handle.shutdown().await?;
        return match is_broken_pipe(&err) {
            true => Ok(Outcome::OutputClosed),
            false => Err(err),
        };
    }
    let turn = async {
        match first {
            FirstTurn::Prompt(text) => handle.prompt(text).await,
            FirstTurn::Continue => handle.continue_turn().await,
        }
    };
    tokio::pin!(turn);
    let mut interrupted: Option<Interruption> = None;
    let mut asking: Option<Asking> = None;
    let mut calls = CallsSeen::default();
    // One listener for the whole drive, so no signal slips between polls.
    let ctrl_c = tokio::signal::ctrl_c();
    tokio::pin!(ctrl_c);
    // A live status line's clock and spinner (on a terminal only).
    let ticking = out.ticks();
    let mut ticks = tokio::time::interval(TICK);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    // What the log does not show a person (a retried request), in words.
    let mut notices = crate::notices::take();
    let result = loop {
        tokio::select! {
            // Show what happened before reacting to the end of the turns.
            biased;
            event = events.recv(), if interrupted != Some(Interruption::OutputClosed) => {
                let shown = match event {
                    Ok(event) => {
                        calls.observe(&event);
                        out.event(&event)
                    }
                    Err(RecvError::Lagged(missed)) => out.lagged(missed),
                    Err(RecvError::Closed) => Ok(()),
                };
                if let Err(err) = shown {
                    if !is_broken_pipe(&err) {
                        return Err(err);
                    }
                    interrupted = Some(Interruption::OutputClosed);
                    answer_cancelled(&mut asking);
                    let _ = handle.interrupt().await;
                }
            }
            Some(notice) = next_notice(&mut notices), if interrupted != Some(Interruption::OutputClosed) => {
                if let Err(err) = out.note(&notice) {
                    if !is_broken_pipe(&err) {
                        return Err(err);
                    }
                }
            }
            Some(ask) = next_ask(&mut asks), if asking.is_none() => {
                // The events sent before the question belong above it.
                drain(&mut events, &mut calls, out)?;
                out.prompting()?;
                asking = Some(Asking {
                    answer: prompt_on_terminal(ask.request),
                    reply: ask.reply,
                });
            }
            decision = answer(&mut asking) => {
                if let Some(asked) = asking.take() {
                    if decision == ApprovalDecision::Cancelled && interrupted.is_none() {
                        // End of input: the user left the question unanswered
                        // (the log says the run was interrupted, not failed).
                        interrupted = Some(Interruption::User);
                        let _ = handle.interrupt().await;
                    }
                    // The Pod may have stopped waiting (cancelled turn).
                    let _ = asked.reply.send(decision);
                }
            }
            _ = &mut ctrl_c, if interrupted.is_none() => {
                interrupted = Some(Interruption::User);
                answer_cancelled(&mut asking);
                out.note("cancelling the turn (Ctrl-C again to quit at once)")?;
                exit_on_second_ctrl_c();
                // A closed Pod has nothing to cancel.
                let _ = handle.interrupt().await;
            }
            _ = ticks.tick(), if ticking && asking.is_none() => {
                if let Err(err) = out.tick() {
                    if !is_broken_pipe(&err) {
                        return Err(err);
                    }
                }
            }
            result = &mut turn => break result,
        }
    };
    crate::notices::give_back(notices);
    // A prompt cut short by Ctrl-C may still hold the terminal.
    crate::approval::terminal::restore_terminal();
    // Every event of the turns was sent before their replies: drain them.
    if interrupted != Some(Interruption::OutputClosed) {
        if let Err(err) = drain(&mut events, &mut calls, out) {
            if !is_broken_pipe(&err) {
                return Err(err);
            }
            interrupted = Some(Interruption::OutputClosed);
        }
    }
    let todos = handle.get_todos().await.unwrap_or_default();
    handle.shutdown().await?;
    if interrupted.is_none() && matches!(&result, Ok(o) if o.reason == TurnEndReason::Cancelled) {
        interrupted = Some(Interruption::User);
    }
    let progress = session::progress(&todos);
    let stopped = match (&result, interrupted) {
        (Ok(outcome), None) => stop_of(&outcome.reason, until_done, progress),
        _ => None,
    };
    // Read after the Pod shut down, so every answer is in the log.
    let session_usage = session_usage(&started).await;
    let (key, resumed) = (started.key.clone(), started.resumed);
    let finished = Finished {
        session_id: started.session_id,
        log_path: started.log_path,
        reason: result.as_ref().ok().map(|o| o.reason.clone()),
        requests: result.as_ref().map_or(0, |o| o.requests),
        usage: result
            .as_ref()
            .map_or_else(|_| Default::default(), |o| o.usage),
        session_usage,
        todos: progress,
        interrupted: interrupted.is_some(),
        stopped: stopped.clone(),
        not_run: std::mem::take(&mut calls.not_run),
        refused: std::mem::take(&mut calls.refused),
        verified: calls.verified,
    };
    if interrupted != Some(Interruption::OutputClosed) {
        match out.finished(&finished) {
            Err(err) if is_broken_pipe(&err) => interrupted = Some(Interruption::OutputClosed),
            other => other?,
        }
    }
    if let Err(err) = result {
        let id = finished.session_id;
        let hint = failure_hint(&err, &finished, key.as_deref(), resumed);
        return Err(anyhow::Error::new(err).context(crate::error::Failure::new(
            format!("session {id} stopped on an error"),
            hint,
        )));
    }
    if let Some(TurnEndReason::Rejected(why)) = &finished.reason {
        let hint = if why.contains("UserPromptSubmit hook") {
            "the operator's hook refused it (docs/hooks.md); change the prompt or the hook"
        } else {
            "shorten it, or use a model with a larger context window (context_window in the profile)"
        };
        return Err(anyhow::Error::from(crate::error::Failure::new(
            format!("the prompt was refused: {why}"),
            hint,
        )));
    }
    let outcome = match (interrupted, &stopped) {
        (Some(Interruption::OutputClosed), _) => Outcome::OutputClosed,
        (Some(Interruption::User), _) => Outcome::Interrupted,
        (None, Some(_)) if matches!(finished.reason, Some(TurnEndReason::GoalUnmet(_))) => {
            Outcome::Unverified
        }
        (None, Some(_)) => Outcome::Stopped,
        (None, None) => Outcome::Done,
    };
    tell_terminal(&finished, outcome, out.shows_hints_on_stdout());
    Ok(outcome)
}

/// Why a run that ended by itself did not finish its work, if it did not.
fn stop_of(reason: &TurnEndReason, until_done: bool, todos: Progress) -> Option<Stopped> {
    match reason {
        TurnEndReason::Limit(limit) => Some(Stopped {
            limit: Some(limit.clone()),
            message: limit.stop_line(),
        }),
        TurnEndReason::Stalled => Some(Stopped {
            limit: None,
            message: "stopped: the model ended its turn without progress on the unfinished plan"
                .into(),
        }),
        TurnEndReason::GoalUnmet(why) => Some(Stopped {
            limit: None,
            message: format!("unverified: {why}"),
        }),
        // An until-done run that ended otherwise (the output limit, a
        // refusal) with work left is stopped too.
        _ if until_done && todos.unfinished() => Some(Stopped {
            limit: None,
            message: "stopped with the plan unfinished".into(),
        }),
        _ => None,
    }
}

/// The lines a person needs when the run did not finish, or refused calls:
/// on stderr, unless the human output already showed them on a terminal.
fn tell_terminal(finished: &Finished, outcome: Outcome, shown_on_stdout: bool) {
    // On a terminal the human output showed them; a piped stdout may go
    // to a file nobody reads now, so stderr says them too.
    if shown_on_stdout && std::io::stdout().is_terminal() {
        return;
    }
    let mut text: String = crate::output::not_run_lines(finished)
        .into_iter()
        .map(|line| format!("pod: {line}\n"))
        .collect();
    let what = match (&finished.stopped, outcome) {
        // A drive never diverges: only `pod replay` does.
        (_, Outcome::Done | Outcome::Diverged) => None,
        (_, Outcome::OutputClosed) => Some("stdout was closed, so the turn was cancelled".into()),
        (_, Outcome::Interrupted) => Some("interrupted".to_string()),
        (Some(stopped), _) => Some(stopped.message.clone()),
        (None, Outcome::Stopped) => Some("stopped".to_string()),
        (None, Outcome::Unverified) => Some("unverified".to_string()),
    };
    if let Some(what) = what {
        let todos = finished.todos;
        let progress = match todos.total {
            0 => String::new(),
            _ => format!(
                " with {} of {} todos completed",
                todos.completed, todos.total
            ),
        };
        text.push_str(&format!(
            "pod: {what}{progress}; continue with: pod resume {}\n",
            finished.session_id
        ));
    }
    // Nothing to do if stderr is closed too.
    let _ = crate::output::eprint(&text);
}

/// Withdraws the question on screen, if any.
fn answer_cancelled(asking: &mut Option<Asking>) {
    if let Some(asked) = asking.take() {
        let _ = asked.reply.send(ApprovalDecision::Cancelled);
    }
}

/// Prints the events already sent.
fn drain(
    events: &mut broadcast::Receiver<PodEvent>,
    calls: &mut CallsSeen,
    out: &mut dyn Output,
) -> Result<()> {
    loop {
        match events.try_recv() {
            Ok(event) => {
                calls.observe(&event);
                out.event(&event)?
            }
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
            crate::approval::terminal::restore_terminal();
            let _ = crate::output::eprint("interrupted\n");
            std::process::exit(i32::from(EXIT_INTERRUPTED));
        }
    });
}

/// The next notice, or never without a receiver.
async fn next_notice(
    notices: &mut Option<tokio::sync::mpsc::UnboundedReceiver<String>>,
) -> Option<String> {
    match notices {
        Some(rx) => rx.recv().await,
        None => std::future::pending().await,
    }
}

/// What to do after a run failed: check the key the provider refused; for
/// a new session nothing answered, whether to keep it; else resume.
fn failure_hint(
    err: &pod::PodError,
    finished: &Finished,
    key: Option<&str>,
    resumed: bool,
) -> String {
    let id = finished.session_id;
    let refused = refused_status(err);
    let mut hint = match (refused, key) {
        (Some(status), Some(key)) => format!(
            "the model's server refused the key (HTTP {status}): check the key in {key}, then \
             `pod resume {id}` retries"
        ),
        (Some(status), None) => format!(
            "the model's server refused the key (HTTP {status}): check the profile's key \
             (api_key_env), then `pod resume {id}` retries"
        ),
        (None, _) => {
            format!("the session is saved; `pod resume {id}` retries from where it stopped")
        }
    };
    if !resumed && finished.requests == 0 && finished.session_usage.prompt_tokens == 0 {
        hint.push_str(&format!(
            "; nothing was answered yet: `pod rm {id}` drops the session instead"
        ));
    }
    hint
}

/// The HTTP status of a refused key (401, 403), when the provider's
/// answer failed the turn.
fn refused_status(err: &pod::PodError) -> Option<u16> {
    match err {
        pod::PodError::Turn(pod_worker::WorkerError::Provider(pod_llm::ProviderError::Http {
            status: status @ (401 | 403),
            ..
        })) => Some(*status),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pod_worker::Limit;

    fn progress(completed: usize, total: usize) -> Progress {
        Progress { completed, total }
    }

    #[test]
    fn a_limit_or_a_stall_stops_and_until_done_stops_on_an_unfinished_plan() {
        let limit = TurnEndReason::Limit(Limit::TurnRequests(5));
        let stopped = stop_of(&limit, false, progress(3, 3)).unwrap();
        assert_eq!(stopped.limit, Some(Limit::TurnRequests(5)));
        assert_eq!(
            stopped.message,
            "stopped by the per-turn budget of 5 model requests"
        );
        let stalled = stop_of(&TurnEndReason::Stalled, true, progress(2, 3)).unwrap();
        assert!(stalled.message.contains("without progress"), "{stalled:?}");
        assert!(stop_of(&TurnEndReason::MaxTokens, true, progress(2, 3)).is_some());
        assert!(stop_of(&TurnEndReason::EndTurn, true, progress(3, 3)).is_none());
        assert!(stop_of(&TurnEndReason::EndTurn, false, progress(2, 3)).is_none());
    }
}
