//! Notifications of a session: the `[notify]` table (a profile's `notify`
//! table over it), and the task that turns the session's events into
//! [`pod_notify::Event`]s: a question waits, a run stops at a budget, fails
//! or finishes. Every front end gets them, since every session starts here.

use crate::error::LaunchError;
use pod::{PodEvent, PodHandle, TurnEndReason};
use pod_notify::{Event, Kind, Notifier, NotifyConfig, Outbox};
use std::path::PathBuf;
use tokio::sync::broadcast::error::RecvError;
use uuid::Uuid;

/// The `[notify]` table with the profile's `notify` table over it.
pub fn resolve(
    file: &pod_providers::ConfigFile,
    profile: Option<&toml::Value>,
) -> Result<NotifyConfig, LaunchError> {
    let parse = |value: Option<&toml::Value>, what: &str| -> Result<NotifyConfig, LaunchError> {
        match value {
            Some(value) => value
                .clone()
                .try_into()
                .map_err(|source| LaunchError::Table {
                    what: what.into(),
                    path: file.path.display().to_string(),
                    source: Box::new(source),
                }),
            None => Ok(NotifyConfig::default()),
        }
    };
    let top = parse(file.notify.as_ref(), "[notify] table")?;
    let profile = parse(profile, "notify table of the profile")?;
    Ok(top.merged(profile))
}

/// The notifier of `config`, delivering through `outbox`; `None` when it
/// sends nothing.
pub fn notifier(config: &NotifyConfig, outbox: &Outbox) -> Result<Option<Notifier>, LaunchError> {
    Notifier::new(config, outbox, |name| std::env::var(name).ok()).map_err(|err| {
        LaunchError::settings(
            err.to_string(),
            "fix the [notify] table of the config file (docs/configuration.md#notify)",
        )
    })
}

/// What a session's events are about.
struct About {
    pub session: Uuid,
    pub workspace: PathBuf,
    /// The task's title, when known before the first prompt (a resume).
    pub title: Option<String>,
    /// Who answers its questions (the approver's `via`).
    pub answered_via: Option<String>,
    /// Whether the run's last verification round passed, when one ran.
    pub verified: Option<bool>,
}

/// The start hook that watches a session for `notifier`; `title` when it
/// is known before the first prompt (a resume).
pub(crate) fn hook(notifier: Notifier, title: Option<String>) -> pod::StartHook {
    std::sync::Arc::new(move |handle: &PodHandle, config: &pod::PodConfig| {
        watch(
            handle,
            notifier.clone(),
            About {
                session: handle.session_id(),
                workspace: config.workspace.clone(),
                title: title.clone(),
                answered_via: config.approver.as_ref().map(|a| a.answerer().via),
                verified: None,
            },
        );
    })
}

/// Sends `handle`'s events through `notifier` until the session's events
/// end.
fn watch(handle: &PodHandle, notifier: Notifier, about: About) {
    let mut events = handle.subscribe();
    tokio::spawn(async move {
        let mut about = about;
        loop {
            let event = match events.recv().await {
                Ok(event) => event,
                // A burst of streamed text overran the buffer: the events
                // that matter here are rare; go on with the next ones.
                Err(RecvError::Lagged(_)) => continue,
                Err(RecvError::Closed) => return,
            };
            if let (
                PodEvent::TurnStarted {
                    prompt: Some(prompt),
                },
                None,
            ) = (&event, &about.title)
            {
                about.title = Some(crate::sessions::title_of(prompt));
            }
            match &event {
                PodEvent::TurnStarted { .. } => about.verified = None,
                PodEvent::Verified { record } => about.verified = Some(record.passed),
                _ => {}
            }
            if let Some(event) = event_of(&event, &about) {
                notifier.send(event);
            }
        }
    });
}

/// The notification of a session event, if it makes one.
fn event_of(event: &PodEvent, about: &About) -> Option<Event> {
    let made = |kind: Kind| {
        let mut made = Event::new(kind, about.session, about.workspace.clone());
        made.title = about.title.clone();
        made.verified = about.verified;
        made
    };
    match event {
        PodEvent::QuestionAsked { question } => {
            Some(question_event(made(Kind::Question), question, about))
        }
        PodEvent::Subagent { inner, .. } => match inner.as_ref() {
            // A subagent's question waits for its parent's approver.
            PodEvent::QuestionAsked { question } => {
                Some(question_event(made(Kind::Question), question, about))
            }
            _ => None,
        },
        PodEvent::TurnEnded { reason, .. } => {
            let (kind, why) = match reason {
                TurnEndReason::EndTurn => match about.verified {
                    Some(true) => (
                        Kind::Finished,
                        "the model finished its answer, and the checks passed (verified)"
                            .to_string(),
                    ),
                    _ => (Kind::Finished, "the model finished its answer".to_string()),
                },
                TurnEndReason::Limit(limit) => (Kind::Stopped, limit.stop_line()),
                TurnEndReason::Stalled => (
                    Kind::Stopped,
                    "stopped: it made no progress on its unfinished plan".to_string(),
                ),
                TurnEndReason::GoalUnmet(why) => (Kind::Unverified, format!("unverified: {why}")),
                TurnEndReason::Aborted(why) => (Kind::Failed, why.clone()),
                TurnEndReason::Refusal => {
                    (Kind::Failed, "the provider refused the answer".to_string())
                }
                TurnEndReason::MaxTokens => (
                    Kind::Failed,
                    "the answer was cut at the model's output limit".to_string(),
                ),
                // The person did it, a question waits (its own event),
                // or the run goes on.
                _ => return None,
            };
            let mut event = made(kind);
            event.reason = Some(why);
            if let TurnEndReason::Limit(limit) = reason {
                event.stopped_by = Some(limit.kind().to_string());
            }
            Some(event)
        }
        PodEvent::TurnFailed { message } => {
            let mut event = made(Kind::Failed);
            event.reason = Some(message.clone());
            Some(event)
        }
        PodEvent::TurnStarted { .. } => Some(made(Kind::Started)),
        PodEvent::Verified { record } => {
            let mut event = made(Kind::Evaluated);
            event.reason = Some(format!(
                "verification round {}: {}",
                record.round,
                match record.passed {
                    true => "passed",
                    false => "failed",
                }
            ));
            Some(event)
        }
        _ => None,
    }
}

fn question_event(mut event: Event, question: &pod::log::QuestionRecord, about: &About) -> Event {
    event.question = serde_json::to_value(QuestionView::of(question)).ok();
    event.answer_with = Some(match about.answered_via.as_deref() {
        Some("terminal") => "at the terminal where pod runs this session".to_string(),
        Some("acp") => "in the editor that runs this session (pod acp)".to_string(),
        _ => format!(
            "pod approve {} {} allow|deny, or the dashboard",
            about.session, question.request.call_id
        ),
    });
    event
}

/// A question as notifications show it (no arguments: they may be long
/// or hold what the webhook's receiver should not see; the summary says
/// what the call does).
#[derive(serde::Serialize)]
struct QuestionView<'a> {
    id: Uuid,
    call_id: &'a str,
    tool: &'a str,
    summary: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    subagent: Option<&'a str>,
    asked_at: chrono::DateTime<chrono::Utc>,
    #[serde(skip_serializing_if = "Option::is_none")]
    expires_at: Option<chrono::DateTime<chrono::Utc>>,
}

impl<'a> QuestionView<'a> {
    fn of(question: &'a pod::log::QuestionRecord) -> Self {
        Self {
            id: question.id,
            call_id: &question.request.call_id,
            tool: &question.request.tool,
            summary: &question.request.summary,
            subagent: question
                .request
                .subagent
                .as_ref()
                .map(|s| s.description.as_str()),
            asked_at: question.asked_at,
            expires_at: question.expires_at,
        }
    }
}
