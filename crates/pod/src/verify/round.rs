//! A session's verifier: its checks, where their results go, and how many
//! rounds failed since the last prompt, taken up from the log on resume.

use super::{reminder, tail, Round, VerifyConfig, OUTPUT_TAIL_BYTES};
use crate::error::PodError;
use crate::events::{EventBus, PodEvent};
use crate::log::{CheckRecord, LogRecord, VerifyRecord};
use crate::store::LogWriter;
use parking_lot::Mutex;
use pod_checkpoint::Shadow;
use pod_llm::{Item, ItemKind, SystemKind};
use pod_tools::workspace::bash::{run_command, CommandError};
use pod_tools::{TodoStore, Workspace};
use tokio_util::sync::CancellationToken;
use tracing::Instrument;
use uuid::Uuid;

/// Bytes of each output stream a check keeps while it runs (head and
/// tail); the record keeps [`OUTPUT_TAIL_BYTES`] of the end.
const RUN_OUTPUT_BYTES: usize = 64 * 1024;

/// What continuing the session must do before its first request.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Resume {
    /// Nothing: the model goes on.
    Nothing,
    /// Its last answer was never verified (a crash cut the round): run
    /// the checks on it first.
    Check {
        /// The answer.
        answer: Uuid,
    },
    /// Its last round failed but the model was never told (a crash came
    /// between the record and the reminder): tell it first.
    Remind(String),
}

struct State {
    /// Failed rounds in a row since the last prompt.
    failed: u32,
    /// What the session's next continuation does first.
    resume: Resume,
    /// A reminder to commit before the next request.
    pending: Option<String>,
    /// The task, for the grader: the last prompt's text.
    task: String,
}

/// Runs a session's rounds.
pub(crate) struct Verifier {
    config: VerifyConfig,
    workspace: Workspace,
    // The session's checkpoints and its first snapshot (once taken): the
    // grader is shown what the session changed.
    changes: Option<(Shadow, crate::checkpoints::FirstTree)>,
    log: LogWriter,
    events: EventBus,
    todos: TodoStore,
    // Read and written between awaits, never across one.
    state: Mutex<State>,
}

/// Where a verifier's results go and what it reads.
pub(crate) struct VerifierParts {
    pub workspace: Workspace,
    pub changes: Option<(Shadow, crate::checkpoints::FirstTree)>,
    pub log: LogWriter,
    pub events: EventBus,
    pub todos: TodoStore,
}

impl Verifier {
    /// A verifier taking up where `recorded` (the session's rounds) and
    /// `history` (its active context) left it.
    pub(crate) fn new(
        config: VerifyConfig,
        parts: VerifierParts,
        recorded: &[VerifyRecord],
        history: &[Item],
    ) -> Self {
        let state = taken_up(&config, recorded, history);
        Self {
            config,
            workspace: parts.workspace,
            changes: parts.changes,
            log: parts.log,
            events: parts.events,
            todos: parts.todos,
            state: Mutex::new(state),
        }
    }

    /// Whether the plan (if any) lets the run end: no unfinished todo.
    pub(crate) fn plan_complete(&self) -> bool {
        !pod_tools::has_unfinished(&self.todos.snapshot())
    }

    /// A run starts: a new prompt starts a new series of rounds.
    pub(crate) fn run_started(&self, prompt: Option<&Item>, history: &[Item]) {
        let mut state = self.state.lock();
        match prompt {
            Some(prompt) => {
                state.failed = 0;
                state.resume = Resume::Nothing;
                state.pending = None;
                state.task = user_text(prompt).unwrap_or_default();
            }
            None if state.task.is_empty() => {
                state.task = last_prompt(history).unwrap_or_default();
            }
            None => {}
        }
    }

    /// What a continuation must do first, once: taken, it is done.
    pub(crate) fn take_resume(&self) -> Resume {
        std::mem::replace(&mut self.state.lock().resume, Resume::Nothing)
    }

    /// Commits `reminder` before the next request.
    pub(crate) fn remind(&self, reminder: String) {
        self.state.lock().pending = Some(reminder);
    }

    /// The reminder to commit before the next request, if any.
    pub(crate) fn take_pending(&self) -> Option<String> {
        self.state.lock().pending.take()
    }

    /// Runs a round on `answer`: the checks, then the grader, recorded.
    pub(crate) async fn round(
        &self,
        answer: Uuid,
        cancel: &CancellationToken,
    ) -> Result<Round, PodError> {
        let (round, task) = {
            let state = self.state.lock();
            (state.failed + 1, state.task.clone())
        };
        self.events.send(PodEvent::VerifyStarted {
            round,
            checks: self.config.checks.len(),
        });
        let span = tracing::info_span!("verify", pod.verify.round = round);
        let checks = match self.run_checks(cancel).instrument(span.clone()).await {
            Some(checks) => checks,
            None => return Ok(Round::Cancelled),
        };
        let grader = match (&self.config.grader, checks.iter().all(CheckRecord::passed)) {
            (Some(grader), true) => Some(
                super::grader::grade(grader, &task, &checks, self.diff().await, cancel)
                    .instrument(span.clone())
                    .await,
            ),
            _ => None,
        };
        if cancel.is_cancelled() {
            return Ok(Round::Cancelled);
        }
        let passed = checks.iter().all(CheckRecord::passed)
            && grader
                .as_ref()
                .is_none_or(|v| v.passed && v.error.is_none());
        let record = VerifyRecord {
            round,
            answer,
            checks,
            grader,
            passed,
            at: chrono::Utc::now(),
        };
        self.log
            .append(&LogRecord::Verify(record.clone()), true)
            .await?;
        span.in_scope(|| tracing::info!(passed, "verification round"));
        let outcome = self.judge(&record);
        self.events.send(PodEvent::Verified {
            record: Box::new(record),
        });
        Ok(outcome)
    }

    /// What a recorded round means for the run.
    fn judge(&self, record: &VerifyRecord) -> Round {
        let mut state = self.state.lock();
        if record.passed {
            state.failed = 0;
            return Round::Passed;
        }
        state.failed = record.round;
        if let Some(error) = record.grader.as_ref().and_then(|v| v.error.as_ref()) {
            return Round::GaveUp {
                why: format!("the grader could not judge the work: {error}"),
            };
        }
        if record.round >= self.config.max_rounds {
            return Round::GaveUp {
                why: gave_up(record),
            };
        }
        Round::Failed {
            reminder: reminder(record, self.config.max_rounds),
        }
    }

    /// Runs the checks in order, stopping at the first that fails; `None`
    /// when the run was cancelled.
    async fn run_checks(&self, cancel: &CancellationToken) -> Option<Vec<CheckRecord>> {
        let mut done = Vec::with_capacity(self.config.checks.len());
        for check in &self.config.checks {
            let ran = run_command(
                &self.workspace,
                &check.command,
                self.config.timeout,
                RUN_OUTPUT_BYTES,
                cancel,
            )
            .await;
            let record = match ran {
                Ok(run) if run.cancelled => return None,
                Ok(run) => CheckRecord {
                    name: check.name.clone(),
                    command: check.command.clone(),
                    exit_code: run.exit_code,
                    signal: run.signal,
                    timed_out: run.timed_out,
                    error: None,
                    output_tail: tail(&run.output, OUTPUT_TAIL_BYTES),
                    duration_ms: u64::try_from(run.duration.as_millis()).unwrap_or(u64::MAX),
                },
                Err(err) => CheckRecord {
                    name: check.name.clone(),
                    command: check.command.clone(),
                    exit_code: None,
                    signal: None,
                    timed_out: false,
                    error: Some(command_error(&err)),
                    output_tail: String::new(),
                    duration_ms: 0,
                },
            };
            tracing::info!(
                command = %record.command,
                exit_code = ?record.exit_code,
                duration_ms = record.duration_ms,
                "check"
            );
            let passed = record.passed();
            done.push(record);
            if !passed {
                break;
            }
        }
        Some(done)
    }

    /// What the session changed, as a diff, for the grader.
    async fn diff(&self) -> String {
        let Some((shadow, first)) = &self.changes else {
            return "(checkpoints are off for this session: no diff)".to_string();
        };
        let Some(first) = first.get() else {
            return "(no file changed: the session took no checkpoint)".to_string();
        };
        let now = match shadow.snapshot().await {
            Ok(tree) => tree,
            Err(err) => return format!("(no diff: {err})"),
        };
        match shadow.diff(first, &now).await {
            Ok(diff) if diff.is_empty() => "(no file changed)".to_string(),
            Ok(diff) => diff,
            Err(err) => format!("(no diff: {err})"),
        }
    }
}

fn command_error(err: &CommandError) -> String {
    pod_llm::error_chain(err)
}

/// Why a run stops unverified, in words.
pub fn gave_up(record: &VerifyRecord) -> String {
    let rounds = match record.round {
        1 => "1 round".to_string(),
        n => format!("{n} rounds"),
    };
    match record.checks.iter().find(|c| !c.passed()) {
        Some(check) => {
            let how = match (check.exit_code, check.timed_out, &check.error) {
                (_, _, Some(_)) => "could not run".to_string(),
                (_, true, _) => "timed out".to_string(),
                (Some(code), ..) => format!("exit code {code}"),
                (None, ..) => "no exit code".to_string(),
            };
            format!("`{}` still fails ({how}) after {rounds}", check.command)
        }
        None => format!("the grader still judges the work not done after {rounds}"),
    }
}

/// The state the log leaves: failed rounds since the last prompt, and what
/// a continuation must do first.
fn taken_up(config: &VerifyConfig, recorded: &[VerifyRecord], history: &[Item]) -> State {
    let prompt_at = history
        .iter()
        .rposition(|item| matches!(item.kind, ItemKind::User { .. }));
    let since_prompt: std::collections::HashSet<Uuid> = history[prompt_at.map_or(0, |at| at + 1)..]
        .iter()
        .map(|item| item.id)
        .collect();
    let current: Vec<&VerifyRecord> = recorded
        .iter()
        .filter(|r| since_prompt.contains(&r.answer))
        .collect();
    let failed = match current.last() {
        Some(last) if !last.passed => last.round,
        _ => 0,
    };
    let resume = match final_answer(history) {
        Some(answer) => match current.iter().rev().find(|r| r.answer == answer) {
            None => Resume::Check { answer },
            Some(last) if last.passed => Resume::Nothing,
            // It gave up on this answer: a continuation tries again, anew.
            Some(last) if last.round >= config.max_rounds => Resume::Check { answer },
            Some(last) => Resume::Remind(reminder(last, config.max_rounds)),
        },
        None => Resume::Nothing,
    };
    let failed = match &resume {
        Resume::Check { .. } if failed >= config.max_rounds => 0,
        _ => failed,
    };
    State {
        failed,
        resume,
        pending: None,
        task: last_prompt(history).unwrap_or_default(),
    }
}

/// The model's last answer, when the history ends with one (no tool call
/// after it); summaries and carry-overs of a compaction do not count.
pub fn final_answer(history: &[Item]) -> Option<Uuid> {
    let last = history.iter().rev().find(|item| {
        !matches!(
            item.kind,
            ItemKind::System {
                kind: SystemKind::Summary | SystemKind::CarryOver,
                ..
            }
        )
    })?;
    match &last.kind {
        ItemKind::Assistant { tool_calls, .. } if tool_calls.is_empty() => Some(last.id),
        _ => None,
    }
}

fn last_prompt(history: &[Item]) -> Option<String> {
    history.iter().rev().find_map(user_text)
}

fn user_text(item: &Item) -> Option<String> {
    match &item.kind {
        ItemKind::User { text, .. } => Some(text.clone()),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config() -> VerifyConfig {
        VerifyConfig {
            checks: Vec::new(),
            timeout: std::time::Duration::from_secs(1),
            max_rounds: 3,
            grader: None,
        }
    }

    fn record(answer: Uuid, round: u32, passed: bool) -> VerifyRecord {
        VerifyRecord {
            round,
            answer,
            checks: Vec::new(),
            grader: None,
            passed,
            at: chrono::Utc::now(),
        }
    }

    fn answer() -> Item {
        Item::new(ItemKind::Assistant {
            text: "done".into(),
            reasoning: None,
            tool_calls: Vec::new(),
            usage: None,
        })
    }

    #[test]
    fn a_resume_checks_an_unverified_answer_and_reminds_of_an_untold_failure() {
        let (prompt, first, second) = (Item::user("fix it"), answer(), answer());
        let history = vec![prompt.clone(), first.clone()];
        // No record of the last answer: a crash cut its round.
        let state = taken_up(&config(), &[], &history);
        assert_eq!(state.resume, Resume::Check { answer: first.id });
        assert_eq!(state.task, "fix it");
        // Its round failed, the reminder never made it.
        let failed = [record(first.id, 1, false)];
        let state = taken_up(&config(), &failed, &history);
        assert!(matches!(state.resume, Resume::Remind(_)));
        assert_eq!(state.failed, 1);
        // The model was told and answered again: that answer is checked.
        let told = Item::system(SystemKind::Verification, reminder(&failed[0], 3));
        let history = vec![prompt, first.clone(), told, second.clone()];
        let state = taken_up(&config(), &failed, &history);
        assert_eq!(state.resume, Resume::Check { answer: second.id });
        assert_eq!(state.failed, 1);
        // Verified: nothing to do.
        let passed = [record(first.id, 1, false), record(second.id, 2, true)];
        let state = taken_up(&config(), &passed, &history);
        assert_eq!(state.resume, Resume::Nothing);
        assert_eq!(state.failed, 0);
        // Given up: a continuation starts a fresh series.
        let gave_up = [record(first.id, 1, false), record(second.id, 3, false)];
        let state = taken_up(&config(), &gave_up, &history);
        assert_eq!(state.resume, Resume::Check { answer: second.id });
        assert_eq!(state.failed, 0);
        // A new prompt after them: rounds of the old one do not count.
        let history = vec![Item::user("next"), answer()];
        let state = taken_up(&config(), &gave_up, &history);
        assert_eq!(state.failed, 0);
    }
}
