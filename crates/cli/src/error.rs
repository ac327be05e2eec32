//! Exit codes and how errors reach the user: one line, the place in a file
//! when the error has one, then a hint.

use crate::style::Style;
use std::fmt;
use std::process::ExitCode;

/// The command did what it was asked.
pub const EXIT_OK: u8 = 0;
/// Something failed.
pub const EXIT_ERROR: u8 = 1;
/// A run stopped with work left: a budget, `--max-turns` or the loop guard
/// ended it, or `--until-done` ended with todos unfinished.
pub const EXIT_STOPPED: u8 = 3;
/// `pod replay`: a session replayed otherwise than its log holds.
pub const EXIT_DIVERGED: u8 = 4;
/// The run ended but the operator's checks (`--verify`) kept failing: the
/// work is not verified.
pub const EXIT_UNVERIFIED: u8 = 5;
/// The user interrupted it: Ctrl-C, or end of input at a prompt (128 +
/// SIGINT, as shells report it).
pub const EXIT_INTERRUPTED: u8 = 130;
/// Stdout was closed while a run was reporting (128 + SIGPIPE, as shells
/// report a process a closed pipe killed).
pub const EXIT_OUTPUT_CLOSED: u8 = 141;

/// How a command ended when it did not fail.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Finished.
    Done,
    /// Stopped by Ctrl-C or end of input; the session can be resumed.
    Interrupted,
    /// A run stopped with work left; the session can be resumed.
    Stopped,
    /// Stdout was closed; the run was cancelled and can be resumed.
    OutputClosed,
    /// A replay went otherwise than its recording.
    Diverged,
    /// The run ended with its work not verified (`--verify` checks kept
    /// failing); the session can be resumed.
    Unverified,
}

impl From<Outcome> for ExitCode {
    fn from(outcome: Outcome) -> Self {
        ExitCode::from(match outcome {
            Outcome::Done => EXIT_OK,
            Outcome::Interrupted => EXIT_INTERRUPTED,
            Outcome::Stopped => EXIT_STOPPED,
            Outcome::OutputClosed => EXIT_OUTPUT_CLOSED,
            Outcome::Diverged => EXIT_DIVERGED,
            Outcome::Unverified => EXIT_UNVERIFIED,
        })
    }
}

/// An error the user can act on: what went wrong and what to do instead.
#[derive(Debug)]
pub struct Failure {
    message: String,
    hint: String,
}

impl Failure {
    /// A failure with a hint.
    pub fn new(message: impl Into<String>, hint: impl Into<String>) -> Self {
        Self {
            message: message.into(),
            hint: hint.into(),
        }
    }
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Failure {}

/// Prints `error: <cause chain in one line>` and a hint on stderr.
pub fn report(err: &anyhow::Error) -> ExitCode {
    // The reader went away (`pod show ID | head`): nothing more to say.
    if is_broken_pipe(err) {
        return ExitCode::SUCCESS;
    }
    let style = Style::for_stderr();
    // Causes may quote a provider's or a server's answer: shown, not obeyed.
    let message = crate::render::safe::line(&cause_chain(err).replace('\n', " ")).into_owned();
    let mut text = format!("{} {message}\n", style.red("error:"));
    if let Some(place) = place_of(err) {
        text.push_str(&place);
    }
    if let Some(hint) = hint_for(err) {
        text.push_str(&format!("{} {hint}\n", style.bold("hint:")));
    }
    // A closed stderr loses the message, the exit code still tells.
    let _ = crate::output::eprint(&text);
    ExitCode::from(EXIT_ERROR)
}

/// Where in a file the error is, when a cause knows (a config file that
/// does not parse): `  --> FILE:LINE:COLUMN` and the parser's lines with a
/// caret under the fault, as it gives them, made safe for a terminal.
fn place_of(err: &anyhow::Error) -> Option<String> {
    err.chain().find_map(|cause| {
        let pod_providers::ConfigError::Parse {
            path,
            line_column,
            snippet,
            ..
        } = cause.downcast_ref::<pod_providers::ConfigError>()?
        else {
            return None;
        };
        let at = line_column
            .map(|(line, column)| format!(":{line}:{column}"))
            .unwrap_or_default();
        let lines = format!("  --> {}{at}\n{snippet}", path.display());
        Some(format!("{}\n", crate::render::safe::text(lines.trim_end())))
    })
}

/// Whether `err` is (caused by) a write to a closed pipe.
pub fn is_broken_pipe(err: &anyhow::Error) -> bool {
    err.chain().any(|cause| {
        cause
            .downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
    })
}

/// The error and its causes on one line, each said once.
fn cause_chain(err: &anyhow::Error) -> String {
    pod_llm::error_chain(err.as_ref())
}

fn hint_for(err: &anyhow::Error) -> Option<String> {
    // A Failure given as context is only found by anyhow's own downcast.
    if let Some(failure) = err.downcast_ref::<Failure>() {
        return Some(failure.hint.clone());
    }
    for cause in err.chain() {
        if let Some(failure) = cause.downcast_ref::<Failure>() {
            return Some(failure.hint.clone());
        }
        if let Some(hint) = cause
            .downcast_ref::<pod_launch::LaunchError>()
            .and_then(pod_launch::LaunchError::hint)
        {
            return Some(hint.to_string());
        }
        if let Some(hint) = cause
            .downcast_ref::<pod_http::ServeError>()
            .and_then(pod_http::ServeError::hint)
        {
            return Some(hint.to_string());
        }
        if let Some(err) = cause.downcast_ref::<pod::PodError>() {
            return Some(pod_hint(err).to_string());
        }
        if let Some(err) = cause.downcast_ref::<pod_providers::ConfigError>() {
            return Some(config_hint(err));
        }
    }
    None
}

fn pod_hint(err: &pod::PodError) -> &'static str {
    use pod::PodError;
    match err {
        PodError::NoSuchSession { .. } => "run `pod sessions` to list sessions",
        PodError::SessionBusy { .. } => {
            "another `pod` process has this session open: wait for it, or `pod fork` the session"
        }
        PodError::SessionLeased { .. } => {
            "a worker holds the session's lease: wait for it to finish, or for the lease to run out \
             if that worker died (`pod show ID` says who holds it)"
        }
        PodError::LeaseLost { .. } => {
            "another worker took the session over after this one stopped renewing its lease; \
             its log is intact, and `pod show ID` follows it"
        }
        PodError::Store { .. } => "check that the database is up; the session's log is unchanged",
        PodError::CorruptLog { .. } => {
            "the log is damaged in the middle; `pod fork ID` says how many items before the damage it can save"
        }
        PodError::NoHome => "set POD_HOME to a directory for sessions",
        PodError::Turn(_) => {
            "the session is saved; `pod resume` with its id retries from where it stopped"
        }
        _ => "rerun with -v for details",
    }
}

fn config_hint(err: &pod_providers::ConfigError) -> String {
    use pod_providers::ConfigError;
    let file = pod_providers::ConfigFile::default_path()
        .map(|p| p.display().to_string())
        .unwrap_or_else(|| "$XDG_CONFIG_HOME/pod/config.toml".into());
    match err {
        ConfigError::MissingKey(var) => {
            format!("export {var}=... (keys are read from the environment only)")
        }
        ConfigError::Parse { path, .. } => format!(
            "fix {} (docs/configuration.md lists every setting), or run without a config \
             file: POD_CONFIG=/dev/null pod ...",
            path.display()
        ),
        ConfigError::UnknownProfile { .. } => {
            format!("profiles live in {file}; README's \"A real model\" section and docs/models.md show the format")
        }
        ConfigError::MissingModel(_) => "pass --model MODEL or set `model` in the profile".into(),
        _ => format!("check the flags and {file}"),
    }
}
