//! `pod submit`: sessions queued for the fleet, one or a file of them.
//!
//! A submitted session is a header recording how to run it (the `launch`
//! `pod run` records) and the task as its first user item, queued; a
//! `pod serve` worker claims it and runs it as `pod resume` would with no
//! flags, in until-done mode. `--from FILE` queues one per line, all in one
//! transaction: a line is a task, or a JSON object with "task" and any of
//! `pod submit`'s flags by their long names, laid over the command line's.

use super::Place;
use crate::cli::{Cli, Command, RunArgs, SubmitArgs};
use crate::error::{Failure, Outcome};
use anyhow::{bail, Context, Result};
use clap::Parser;
use pod::log::{LogRecord, SessionHeader};
use pod::Item;
use serde_json::Value;
use std::collections::HashMap;
use std::ffi::OsString;
use std::io::Read;
use std::path::{Path, PathBuf};
use uuid::Uuid;

/// Queues the session (or `--from`'s sessions) and prints the ids, one per
/// line.
pub async fn run(args: SubmitArgs, place: Place) -> Result<Outcome> {
    let store = super::serve::fleet(&place, "submit")?;
    let json = args.run.drive.json;
    let sessions = match &args.from {
        None => {
            let task = super::run::task(args.run.task.as_deref(), args.run.task_file.as_deref())?;
            vec![Template::new(&args.run, &place).await?.session(task)]
        }
        Some(file) => from_file(file, &place).await?,
    };
    store
        .submit_many(&sessions)
        .await
        .context(match sessions.len() {
            1 => "cannot queue the session".to_string(),
            n => format!("cannot queue the {n} sessions (none was queued)"),
        })?;
    let mut out = String::new();
    for (header, _) in &sessions {
        let id = header.session_id;
        out.push_str(&match json {
            true => format!("{}\n", serde_json::json!({ "session_id": id })),
            false => format!("{id}\n"),
        });
    }
    crate::output::print(&out)?;
    Ok(Outcome::Done)
}

/// What every session submitted with the same flags shares.
#[derive(Clone)]
pub(super) struct Template {
    model_name: String,
    workspace: PathBuf,
    launch: Option<pod::log::LaunchJson>,
    // Recorded before the task, so every worker that runs it holds them.
    limits: pod::SessionBudget,
}

impl Template {
    /// The settings `args` give, resolved without the API key: the worker
    /// that runs the session reads it from its own environment.
    pub(super) async fn new(args: &RunArgs, place: &Place) -> Result<Self> {
        let workspace = super::run::workspace(args.workspace.as_deref())?;
        // A fleet runs every session until its plan is done.
        let mut plan = place
            .launcher()
            .plan(&args.session.flags(true), workspace.clone())?;
        let workspace = match args.worktree {
            true => plan.use_worktree().await?.workspace,
            false => workspace,
        };
        let model_name = plan.model_name()?;
        // The servers are started by the worker; their settings are
        // recorded here (the config file's and --mcp-config's, no env
        // values).
        Ok(Self {
            model_name,
            workspace,
            launch: plan.record()?.to_json(),
            limits: plan.settings.session_budget,
        })
    }

    /// A new session of these settings doing `task`.
    /// The limits its sessions record before their task.
    pub(super) fn limits(&self) -> pod::SessionBudget {
        self.limits
    }

    pub(super) fn session(&self, task: String) -> (SessionHeader, Vec<LogRecord>) {
        let mut header = SessionHeader::new(
            Uuid::new_v4(),
            self.model_name.clone(),
            self.workspace.clone(),
        );
        header.launch = self.launch.clone();
        let mut records = Vec::with_capacity(2);
        if self.limits.is_set() {
            records.push(LogRecord::Limits(pod::log::LimitsRecord::now(
                self.limits,
                "cli",
            )));
        }
        records.push(LogRecord::Item(Item::user(task)));
        (header, records)
    }
}

/// The sessions of `--from FILE`, one per line (blank lines and lines
/// starting with `#` skipped); a bad line is an error naming it, and
/// nothing is queued.
async fn from_file(file: &Path, place: &Place) -> Result<Vec<(SessionHeader, Vec<LogRecord>)>> {
    let text = match file.as_os_str() == "-" {
        true => {
            let mut text = String::new();
            std::io::stdin()
                .read_to_string(&mut text)
                .context("cannot read the tasks from stdin")?;
            text
        }
        false => std::fs::read_to_string(file)
            .with_context(|| format!("cannot read {}", file.display()))?,
    };
    let base = argv_without_from();
    // Lines with the same flags share their resolved settings; a worktree
    // is made per session, so those are resolved line by line.
    let mut templates: HashMap<Vec<String>, Template> = HashMap::new();
    let mut sessions = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let at = format!("{}:{}", file.display(), n + 1);
        let (flags, task) = line_args(line).map_err(|why| {
            Failure::new(
                format!("{at}: {why}"),
                "a line is a task, or a JSON object with \"task\" and pod submit's flags by their long names",
            )
        })?;
        // A line whose flags an earlier line had, with its task as text:
        // the command line those flags make was parsed and resolved then,
        // and a task is any text (not `-`, which reads stdin), so only
        // the task is new. Parsing the whole command line again per line
        // was most of the time 100,000 lines took (BENCHMARKS.md 21).
        if let (Some(task), Some(template)) = (&task, templates.get(&flags)) {
            if task.as_str() != "-" {
                let task = super::run::task(Some(task), None).with_context(|| at.clone())?;
                sessions.push(template.session(task));
                continue;
            }
        }
        let mut argv = base.clone();
        argv.extend(flags.iter().map(OsString::from));
        if let Some(task) = &task {
            argv.extend(["--".into(), OsString::from(task)]);
        }
        let args = match Cli::try_parse_from(argv) {
            Ok(Cli {
                command: Command::Submit(args),
                ..
            }) => args.run,
            Ok(_) => bail!("{at}: not a submission"),
            Err(err) => {
                let first = err.to_string();
                let first = first.lines().next().unwrap_or_default();
                bail!(Failure::new(
                    format!("{at}: {}", first.trim_start_matches("error: ")),
                    "its flags are pod submit's (see pod submit --help)"
                ))
            }
        };
        let task = super::run::task(args.task.as_deref(), args.task_file.as_deref())
            .with_context(|| at.clone())?;
        let template = match (args.worktree, templates.get(&flags)) {
            (false, Some(template)) => template.clone(),
            _ => {
                let template = Template::new(&args, place)
                    .await
                    .with_context(|| at.clone())?;
                if !args.worktree {
                    templates.insert(flags, template.clone());
                }
                template
            }
        };
        sessions.push(template.session(task));
    }
    if sessions.is_empty() {
        bail!(Failure::new(
            format!("{} holds no task", file.display()),
            "write one task per line"
        ));
    }
    Ok(sessions)
}

/// This process's arguments without `--from FILE`.
fn argv_without_from() -> Vec<OsString> {
    let mut argv = Vec::new();
    let mut args = std::env::args_os();
    while let Some(arg) = args.next() {
        if arg == "--from" {
            args.next();
            continue;
        }
        if arg.to_string_lossy().starts_with("--from=") {
            continue;
        }
        argv.push(arg);
    }
    argv
}

/// A line's flags and task: a plain line is the task; a JSON object's
/// "task" is, and its other keys are flags (`"max_cost": "2"` is
/// `--max-cost 2`, `"yes": true` is `--yes`, a list repeats the flag).
fn line_args(line: &str) -> Result<(Vec<String>, Option<String>), String> {
    if !line.starts_with('{') {
        return Ok((Vec::new(), Some(line.to_string())));
    }
    let object: serde_json::Map<String, Value> =
        serde_json::from_str(line).map_err(|err| format!("not a JSON object: {err}"))?;
    let mut flags = Vec::new();
    let mut task = None;
    for (key, value) in object {
        if key == "task" {
            match value {
                Value::String(text) => task = Some(text),
                _ => return Err("\"task\" must be a string".into()),
            }
            continue;
        }
        if key == "from" {
            return Err("\"from\" cannot be given on a line".into());
        }
        let flag = format!("--{}", key.replace('_', "-"));
        let values = match value {
            Value::Array(values) => values,
            value => vec![value],
        };
        for value in values {
            match value {
                Value::Bool(true) => flags.push(flag.clone()),
                Value::Bool(false) | Value::Null => {}
                Value::String(text) => flags.extend([flag.clone(), text]),
                Value::Number(n) => flags.extend([flag.clone(), n.to_string()]),
                _ => {
                    return Err(format!(
                        "\"{key}\" must be a string, number, boolean or list"
                    ))
                }
            }
        }
    }
    if task.is_none() && !flags.iter().any(|f| f == "--task-file") {
        return Err("no \"task\"".into());
    }
    Ok((flags, task))
}

#[cfg(test)]
mod tests {
    use super::line_args;

    #[test]
    fn a_line_is_a_task_or_an_object_of_flags() {
        assert_eq!(
            line_args("Fix the tests").unwrap(),
            (vec![], Some("Fix the tests".into()))
        );
        let (flags, task) = line_args(
            r#"{"task": "t", "workspace": "/w", "yes": true, "sandbox": false, "max_turns": 3, "allow": ["bash", "edit"]}"#,
        )
        .unwrap();
        assert_eq!(task.as_deref(), Some("t"));
        let mut pairs: Vec<String> = flags;
        pairs.sort();
        let mut expected: Vec<String> = [
            "--workspace",
            "/w",
            "--yes",
            "--max-turns",
            "3",
            "--allow",
            "bash",
            "--allow",
            "edit",
        ]
        .map(String::from)
        .to_vec();
        expected.sort();
        assert_eq!(pairs, expected);
        assert!(line_args(r#"{"workspace": "/w"}"#)
            .unwrap_err()
            .contains("no \"task\""));
        assert!(line_args(r#"{"task": 3}"#).is_err());
        assert!(line_args("{not json")
            .unwrap_err()
            .contains("not a JSON object"));
        assert!(line_args(r#"{"task": "t", "from": "x"}"#).is_err());
    }
}
