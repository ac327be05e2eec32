//! The limits of a run, lowered from the config file, the session's record
//! and the flags to one [`Budget`], resolved once.
//!
//! Precedence (docs/budgets.md says it once for people): defaults, then
//! the file's `[budget]` table, then the profile's `budget` table, then
//! (on resume) what the session recorded, then the flags. The session's
//! limits (`max_cost`, `max_wall`, `max_session_*`) are recorded in its log
//! when it starts and whenever they change (`pod budget`, a resume's
//! flags): a recorded session never reads them from the file again.

use crate::error::LaunchError;
use crate::flags::BudgetFlags;
use pod_worker::Budget;
use serde::Deserialize;

/// One `[budget]` table: every key optional, so layers can merge.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BudgetTable {
    /// Model requests per turn.
    pub max_requests: Option<u32>,
    /// Continuations per run in until-done mode.
    pub max_turns: Option<u32>,
    /// Model requests per run.
    pub max_run_requests: Option<u64>,
    /// Tokens per run.
    pub max_run_tokens: Option<u64>,
    /// Identical failing calls in a row that end a run (0: never).
    pub repeated_failures: Option<u32>,
    /// Model requests over a session's life (the session budget guard).
    pub max_session_requests: Option<u64>,
    /// Tokens over a session's life.
    pub max_session_tokens: Option<u64>,
    /// Money the session and its subagents may spend over its life, at
    /// the profile's prices (recorded).
    pub max_cost: Option<pod_llm::Cost>,
    /// Money one run and its subagents may spend.
    pub max_run_cost: Option<pod_llm::Cost>,
    /// Wall time from the session's creation, as `90m`, `2h`, `1d`
    /// (recorded).
    pub max_wall: Option<String>,
    /// Times the model may repeat itself (the same call, a short cycle of
    /// calls, the same text) before it is reminded; two more and the run
    /// stops. 0 turns the loop guard off.
    pub loop_repeats: Option<u32>,
    /// Tools whose calls the loop guard never counts (a polling tool).
    pub loop_exempt: Option<Vec<String>>,
}

impl BudgetTable {
    /// Parses a table the config file (`file`) kept as TOML; `what` names it
    /// in errors.
    pub fn parse(
        value: Option<&toml::Value>,
        what: &str,
        file: &pod_providers::ConfigFile,
    ) -> Result<Self, LaunchError> {
        match value {
            Some(value) => value
                .clone()
                .try_into()
                .map_err(|source| LaunchError::Table {
                    what: what.into(),
                    path: file.path.display().to_string(),
                    source: Box::new(source),
                }),
            None => Ok(Self::default()),
        }
    }

    /// The flags as a table.
    pub fn from_flags(args: &BudgetFlags) -> Self {
        Self {
            max_requests: args.max_requests,
            max_turns: args.max_turns,
            max_run_requests: args.max_run_requests,
            max_run_tokens: args.max_run_tokens,
            max_cost: args.max_cost,
            max_run_cost: args.max_run_cost,
            ..Self::default()
        }
    }

    /// `budget` with every limit this table sets replaced.
    pub fn apply(&self, mut budget: Budget) -> Result<Budget, LaunchError> {
        if let Some(n) = self.max_requests {
            if n == 0 {
                return Err(LaunchError::settings(
                    "max_requests must be at least 1",
                    "set max_requests to 1 or more, or leave it out for the default (500)",
                ));
            }
            budget.requests_per_turn = n;
        }
        if let Some(n) = self.max_turns {
            budget.continuations = Some(n);
        }
        if let Some(n) = self.max_run_requests {
            budget.requests = Some(n);
        }
        if let Some(n) = self.max_run_tokens {
            budget.tokens = Some(n);
        }
        if let Some(n) = self.repeated_failures {
            budget.repeated_failures = n;
        }
        Ok(budget)
    }
}

/// The session's limits a front end's flags set (the others stay as
/// recorded or configured).
pub fn session_flags(flags: &BudgetFlags) -> pod::SessionBudget {
    pod::SessionBudget {
        cost: flags.max_cost,
        wall_secs: flags.max_wall_secs,
        ..pod::SessionBudget::default()
    }
}

/// The session's limits: the flags over `recorded` (what the session's log
/// recorded last), or for a new session (or one from before limits were
/// recorded) over the profile's `budget` table over the file's `[budget]`.
pub fn session(
    file: &pod_providers::ConfigFile,
    profile: Option<&toml::Value>,
    recorded: Option<pod::SessionBudget>,
    flags: &BudgetFlags,
) -> Result<pod::SessionBudget, LaunchError> {
    let base = match recorded {
        Some(recorded) => recorded,
        None => {
            let top = BudgetTable::parse(file.budget.as_ref(), "[budget] table", file)?;
            let profile = BudgetTable::parse(profile, "budget table of the profile", file)?;
            let wall = match profile.max_wall.as_deref().or(top.max_wall.as_deref()) {
                Some(text) => Some(parse_duration(text).map_err(|why| {
                    LaunchError::settings(
                        format!("max_wall: {why}"),
                        "give it as a number and a unit: 90m, 2h, 1d",
                    )
                })?),
                None => None,
            };
            pod::SessionBudget {
                requests: profile.max_session_requests.or(top.max_session_requests),
                tokens: profile.max_session_tokens.or(top.max_session_tokens),
                cost: profile.max_cost.or(top.max_cost),
                wall_secs: wall,
            }
        }
    };
    Ok(base.overlaid(session_flags(flags)))
}

/// A run's money limit: the flag, else the profile's `budget` table, else
/// the file's `[budget]` table (a resume uses the recorded one unless the
/// flag is given: `Resolved`).
pub fn max_run_cost(
    file: &pod_providers::ConfigFile,
    profile: Option<&toml::Value>,
    flags: &BudgetFlags,
) -> Result<Option<pod_llm::Cost>, LaunchError> {
    if flags.max_run_cost.is_some() {
        return Ok(flags.max_run_cost);
    }
    let top = BudgetTable::parse(file.budget.as_ref(), "[budget] table", file)?;
    let profile = BudgetTable::parse(profile, "budget table of the profile", file)?;
    Ok(profile.max_run_cost.or(top.max_run_cost))
}

/// The loop guard's settings: the profile's `budget` table over the file's
/// `[budget]`, over the defaults. Read on every start (they judge the
/// model's behaviour, not what the session may spend).
pub fn loop_guard(
    file: &pod_providers::ConfigFile,
    profile: Option<&toml::Value>,
) -> Result<pod::LoopGuardConfig, LaunchError> {
    let top = BudgetTable::parse(file.budget.as_ref(), "[budget] table", file)?;
    let profile = BudgetTable::parse(profile, "budget table of the profile", file)?;
    let defaults = pod::LoopGuardConfig::default();
    Ok(pod::LoopGuardConfig {
        repeats: profile
            .loop_repeats
            .or(top.loop_repeats)
            .unwrap_or(defaults.repeats),
        exempt: profile
            .loop_exempt
            .or(top.loop_exempt)
            .unwrap_or(defaults.exempt),
    })
}

/// `90s`, `15m`, `2h`, `1d` as seconds.
pub fn parse_duration(text: &str) -> Result<u64, String> {
    let text = text.trim();
    let split = text
        .find(|c: char| !c.is_ascii_digit())
        .ok_or_else(|| format!("{text:?} has no unit: use s, m, h or d (e.g. 2h)"))?;
    let (number, unit) = text.split_at(split);
    let number: u64 = number
        .parse()
        .map_err(|_| format!("{text:?} does not start with a number (e.g. 2h)"))?;
    let seconds = match unit {
        "s" => 1,
        "m" => 60,
        "h" => 3_600,
        "d" => 86_400,
        other => return Err(format!("unknown unit {other:?}: use s, m, h or d")),
    };
    match number.checked_mul(seconds) {
        Some(0) => Err(format!("{text:?}: the limit must be more than 0")),
        Some(secs) => Ok(secs),
        None => Err(format!("{text:?} is too long")),
    }
}

/// The run's budget. `recorded`: what the resumed session was started with
/// (it stands in for the file's tables, which applied when it started).
pub fn resolve(
    file: &pod_providers::ConfigFile,
    profile: Option<&toml::Value>,
    recorded: Option<&Budget>,
    flags: &BudgetFlags,
) -> Result<Budget, LaunchError> {
    let base = match recorded {
        Some(budget) => budget.clone(),
        None => {
            let top = BudgetTable::parse(file.budget.as_ref(), "[budget] table", file)?;
            let profile = BudgetTable::parse(profile, "budget table of the profile", file)?;
            profile.apply(top.apply(Budget::default())?)?
        }
    };
    BudgetTable::from_flags(flags).apply(base)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    fn file(text: &str) -> pod_providers::ConfigFile {
        pod_providers::ConfigFile::parse(text, Path::new("config.toml")).unwrap()
    }

    #[test]
    fn layers_apply_in_order() {
        let file = file(
            "[budget]\nmax_requests = 50\nmax_run_tokens = 1000\n\
             [profiles.a]\nkind = \"openai\"\n[profiles.a.budget]\nmax_requests = 70\n",
        );
        let profile = file.profile(Some("a")).unwrap();
        let budget = resolve(
            &file,
            profile.budget.as_ref(),
            None,
            &BudgetFlags::default(),
        )
        .unwrap();
        assert_eq!(budget.requests_per_turn, 70);
        assert_eq!(budget.tokens, Some(1000));
        assert_eq!(budget.continuations, None);

        let flags = BudgetFlags {
            max_turns: Some(3),
            max_run_tokens: Some(5),
            ..BudgetFlags::default()
        };
        let budget = resolve(&file, profile.budget.as_ref(), None, &flags).unwrap();
        assert_eq!(budget.continuations, Some(3));
        assert_eq!(budget.tokens, Some(5));
        assert_eq!(budget.requests_per_turn, 70);
    }

    #[test]
    fn a_recorded_budget_stands_in_for_the_file() {
        let file = file("[budget]\nmax_requests = 50\n");
        let recorded = Budget {
            requests_per_turn: 9,
            ..Budget::default()
        };
        let budget = resolve(&file, None, Some(&recorded), &BudgetFlags::default()).unwrap();
        assert_eq!(budget, recorded);
    }

    #[test]
    fn an_unknown_key_is_an_error() {
        let file = file("[budget]\nmax_request = 50\n");
        let err = resolve(&file, None, None, &BudgetFlags::default()).unwrap_err();
        let chain = format!("{err}: {}", std::error::Error::source(&err).unwrap());
        assert!(chain.contains("max_request"), "{chain}");
    }
}
