//! What "done" means for a session: the operator's checks (`--verify`,
//! `[goal] verify`) and, optionally, a grader (`--grader PROFILE --rubric
//! …`), resolved once from the flags, the session's record, the profile's
//! `goal` table and the file's `[goal]` table, in that order, then recorded
//! with the session so a resume, a fleet takeover and a replay verify the
//! same way.
//!
//! ```toml
//! [goal]
//! verify = ["cargo test", "ruff check ."]  # run in order when a run would end
//! timeout_secs = 600                      # each check's limit
//! max_rounds = 3                          # failed rounds before "unverified"
//! grader = "reviewer"                     # a profile; asked when every check passed
//! rubric = "Every public function has a test."   # or rubric_file = "rubric.md"
//!
//! [goal.checks]                           # named checks an API client may ask for
//! test = "cargo test"
//! ```

use crate::error::LaunchError;
pub use crate::flags::GoalFlags;
use crate::flags::ModelFlags;
use crate::model::{self, Model};
use pod::verify::{Check, Grader, VerifyConfig, DEFAULT_CHECK_TIMEOUT, DEFAULT_MAX_ROUNDS};
use pod_providers::ConfigFile;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

/// One `[goal]` table (the file's, or a profile's `goal`): every key
/// optional, so layers can merge.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GoalTable {
    /// Commands run in order when a run would end.
    pub verify: Option<Vec<String>>,
    /// Each check's time limit.
    #[serde(alias = "timeout")]
    pub timeout_secs: Option<u64>,
    /// Failed rounds in a row before the run stops unverified.
    pub max_rounds: Option<u32>,
    /// A profile whose model grades the work once the checks pass.
    pub grader: Option<String>,
    /// What the grader judges against.
    pub rubric: Option<String>,
    /// The rubric, from a file (relative to the config file).
    pub rubric_file: Option<PathBuf>,
    /// Checks by name: what an API client may name (never a command).
    pub checks: Option<BTreeMap<String, String>>,
}

/// What a session records of its goal.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RecordedGoal {
    /// The checks.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub checks: Vec<RecordedCheck>,
    /// Each check's time limit.
    pub timeout_secs: u64,
    /// Failed rounds in a row before the run stops unverified.
    pub max_rounds: u32,
    /// The grader's profile.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grader: Option<String>,
    /// The rubric's text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rubric: Option<String>,
}

/// A recorded check.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RecordedCheck {
    /// Its name, when it was named.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Its command line.
    pub command: String,
}

impl RecordedGoal {
    /// Whether it verifies anything.
    pub fn is_set(&self) -> bool {
        !self.checks.is_empty() || self.grader.is_some()
    }
}

/// The session's goal: the flags over the record over the profile's table
/// over the file's.
pub(crate) fn resolve(
    file: &ConfigFile,
    profile: Option<&toml::Value>,
    recorded: Option<&RecordedGoal>,
    flags: &GoalFlags,
) -> Result<Option<RecordedGoal>, LaunchError> {
    let file_table = parse(file.goal.as_ref(), "[goal]", file)?;
    let profile_table = parse(profile, "the profile's goal table", file)?;
    let named = named_checks(&file_table, &profile_table);
    let mut goal = match recorded {
        Some(recorded) => recorded.clone(),
        None => {
            let mut goal = RecordedGoal {
                timeout_secs: DEFAULT_CHECK_TIMEOUT.as_secs(),
                max_rounds: DEFAULT_MAX_ROUNDS,
                ..RecordedGoal::default()
            };
            for table in [&file_table, &profile_table] {
                apply(&mut goal, table, file)?;
            }
            goal
        }
    };
    if !flags.verify.is_empty() {
        goal.checks = flags
            .verify
            .iter()
            .map(|command| RecordedCheck {
                name: None,
                command: command.clone(),
            })
            .collect();
    }
    if !flags.checks.is_empty() {
        goal.checks = flags
            .checks
            .iter()
            .map(|name| match named.get(name) {
                Some(command) => Ok(RecordedCheck {
                    name: Some(name.clone()),
                    command: command.clone(),
                }),
                None => Err(unknown_check(name, &named)),
            })
            .collect::<Result<_, _>>()?;
    }
    if let Some(n) = flags.max_rounds {
        goal.max_rounds = n;
    }
    if let Some(grader) = &flags.grader {
        goal.grader = Some(grader.clone());
    }
    if let Some(rubric) = &flags.rubric {
        goal.rubric = Some(rubric.clone());
    }
    check(&goal)?;
    Ok(goal.is_set().then_some(goal))
}

/// The checks the config names: the file's, then the profile's over them.
pub fn named_checks(file: &GoalTable, profile: &GoalTable) -> BTreeMap<String, String> {
    let mut named = file.checks.clone().unwrap_or_default();
    named.extend(profile.checks.clone().unwrap_or_default());
    named
}

/// The error for a check name the config does not have.
pub fn unknown_check(name: &str, named: &BTreeMap<String, String>) -> LaunchError {
    let known = match named.is_empty() {
        true => "the config names none ([goal.checks] NAME = \"command\")".to_string(),
        false => format!(
            "the config names {}",
            named.keys().cloned().collect::<Vec<_>>().join(", ")
        ),
    };
    LaunchError::settings(
        format!("no check named `{name}`"),
        format!("name a check of [goal.checks]: {known}"),
    )
}

/// Parses a goal table the config file kept as TOML.
pub fn parse(
    value: Option<&toml::Value>,
    what: &str,
    file: &ConfigFile,
) -> Result<GoalTable, LaunchError> {
    match value {
        Some(value) => value
            .clone()
            .try_into()
            .map_err(|source| LaunchError::Table {
                what: what.into(),
                path: file.path.display().to_string(),
                source: Box::new(source),
            }),
        None => Ok(GoalTable::default()),
    }
}

fn apply(goal: &mut RecordedGoal, table: &GoalTable, file: &ConfigFile) -> Result<(), LaunchError> {
    if let Some(verify) = &table.verify {
        goal.checks = verify
            .iter()
            .map(|command| RecordedCheck {
                name: None,
                command: command.clone(),
            })
            .collect();
    }
    if let Some(secs) = table.timeout_secs {
        goal.timeout_secs = secs;
    }
    if let Some(n) = table.max_rounds {
        goal.max_rounds = n;
    }
    if let Some(grader) = &table.grader {
        goal.grader = Some(grader.clone());
    }
    if let Some(rubric) = &table.rubric {
        goal.rubric = Some(rubric.clone());
    }
    if let Some(path) = &table.rubric_file {
        let path = file
            .path
            .parent()
            .unwrap_or(std::path::Path::new(""))
            .join(path);
        goal.rubric = Some(std::fs::read_to_string(&path).map_err(|err| {
            LaunchError::settings(
                format!("cannot read the rubric file {}: {err}", path.display()),
                "rubric_file is read relative to the config file's directory",
            )
        })?);
    }
    Ok(())
}

fn check(goal: &RecordedGoal) -> Result<(), LaunchError> {
    if goal.max_rounds == 0 {
        return Err(LaunchError::settings(
            "max_rounds (--max-verify) must be at least 1",
            "set it to 1 or more, or leave it out for the default (3)",
        ));
    }
    if goal.timeout_secs == 0 {
        return Err(LaunchError::settings(
            "the checks' timeout_secs must be at least 1",
            "set [goal] timeout_secs to 1 or more, or leave it out for the default (600)",
        ));
    }
    if let Some(check) = goal.checks.iter().find(|c| c.command.trim().is_empty()) {
        return Err(LaunchError::settings(
            format!(
                "an empty check command{}",
                check
                    .name
                    .as_ref()
                    .map(|n| format!(" (`{n}`)"))
                    .unwrap_or_default()
            ),
            "give each check a command line, e.g. --verify \"cargo test\"",
        ));
    }
    if goal.grader.is_some() && goal.rubric.as_deref().is_none_or(|r| r.trim().is_empty()) {
        return Err(LaunchError::settings(
            "a grader needs a rubric",
            "pass --rubric FILE|TEXT, or set [goal] rubric (or rubric_file)",
        ));
    }
    Ok(())
}

/// The Pod's verification for `goal`: its checks, and its grader's model
/// built from the grader's profile of `file`.
pub(crate) fn verify_config(
    goal: Option<&RecordedGoal>,
    file: &ConfigFile,
) -> Result<Option<VerifyConfig>, LaunchError> {
    let Some(goal) = goal.filter(|g| g.is_set()) else {
        return Ok(None);
    };
    let grader = match &goal.grader {
        Some(profile) => {
            let flags = ModelFlags {
                profile: Some(profile.clone()),
                ..ModelFlags::default()
            };
            let choice = model::choose(&flags, file, None)?;
            let model = Model::from_choice(&choice).map_err(|err| {
                LaunchError::settings(
                    format!("the grader's profile `{profile}` cannot be used: {err}"),
                    "name a profile of the config file whose model and key are set",
                )
            })?;
            Some(Grader {
                provider: model.provider,
                profile: profile.clone(),
                rubric: goal.rubric.clone().unwrap_or_default(),
                prices: choice.raw.prices,
            })
        }
        None => None,
    };
    Ok(Some(VerifyConfig {
        checks: goal
            .checks
            .iter()
            .map(|c| Check {
                name: c.name.clone(),
                command: c.command.clone(),
            })
            .collect(),
        timeout: Duration::from_secs(goal.timeout_secs),
        max_rounds: goal.max_rounds,
        grader,
    }))
}

/// The Pod's verification for `goal` in a replay: the same checks, and a
/// grader that answers with `verdicts` (the recording's, in order) instead
/// of asking a model.
pub(crate) fn replayed(goal: Option<&RecordedGoal>, verdicts: &[String]) -> Option<VerifyConfig> {
    let goal = goal.filter(|g| g.is_set())?;
    let steps = verdicts
        .iter()
        .map(|text| pod_llm::ScriptStep {
            text: text.clone(),
            ..pod_llm::ScriptStep::default()
        })
        .collect();
    let grader = goal.grader.as_ref().map(|profile| Grader {
        provider: std::sync::Arc::new(pod_llm::ScriptedProvider::from_steps(steps)),
        profile: profile.clone(),
        rubric: goal.rubric.clone().unwrap_or_default(),
        prices: None,
    });
    Some(VerifyConfig {
        checks: goal
            .checks
            .iter()
            .map(|c| Check {
                name: c.name.clone(),
                command: c.command.clone(),
            })
            .collect(),
        timeout: Duration::from_secs(goal.timeout_secs),
        max_rounds: goal.max_rounds,
        grader,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(toml: &str) -> ConfigFile {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("config.toml");
        std::fs::write(&path, toml).unwrap();
        ConfigFile::load(&path).unwrap()
    }

    #[test]
    fn flags_replace_the_files_checks_and_names_resolve_only_to_named_commands() {
        let file = file(
            "[goal]\nverify = [\"cargo test\"]\nmax_rounds = 2\n[goal.checks]\nlint = \"ruff check .\"\n",
        );
        let goal = resolve(&file, None, None, &GoalFlags::default())
            .unwrap()
            .unwrap();
        assert_eq!(goal.checks[0].command, "cargo test");
        assert_eq!(goal.max_rounds, 2);
        let flags = GoalFlags {
            verify: vec!["make check".into()],
            ..GoalFlags::default()
        };
        let goal = resolve(&file, None, None, &flags).unwrap().unwrap();
        assert_eq!(goal.checks.len(), 1);
        assert_eq!(goal.checks[0].command, "make check");
        let named = GoalFlags {
            checks: vec!["lint".into()],
            ..GoalFlags::default()
        };
        let goal = resolve(&file, None, None, &named).unwrap().unwrap();
        assert_eq!(goal.checks[0].name.as_deref(), Some("lint"));
        let unknown = GoalFlags {
            checks: vec!["rm -rf /".into()],
            ..GoalFlags::default()
        };
        let err = resolve(&file, None, None, &unknown).unwrap_err();
        assert!(err.to_string().contains("no check named"), "{err}");
        assert!(
            err.hint().is_some_and(|h| h.contains("lint")),
            "{:?}",
            err.hint()
        );
        // A recorded goal stands on resume unless flags say otherwise.
        let recorded = RecordedGoal {
            checks: vec![RecordedCheck {
                name: None,
                command: "pytest".into(),
            }],
            timeout_secs: 5,
            max_rounds: 4,
            grader: None,
            rubric: None,
        };
        let goal = resolve(&file, None, Some(&recorded), &GoalFlags::default())
            .unwrap()
            .unwrap();
        assert_eq!(goal, recorded);
        // Nothing set: no goal.
        assert_eq!(
            resolve(&self::file(""), None, None, &GoalFlags::default()).unwrap(),
            None
        );
    }

    #[test]
    fn a_grader_needs_a_rubric_and_rounds_a_positive_count() {
        let file = file("[goal]\ngrader = \"reviewer\"\n");
        let err = resolve(&file, None, None, &GoalFlags::default()).unwrap_err();
        assert!(err.to_string().contains("rubric"), "{err}");
        let zero = GoalFlags {
            verify: vec!["true".into()],
            max_rounds: Some(0),
            ..GoalFlags::default()
        };
        assert!(resolve(&self::file(""), None, None, &zero).is_err());
    }
}
