//! The limits of a run, lowered from the config file, the session's record
//! and the flags to one [`Budget`], resolved once.
//!
//! Precedence: defaults, then the file's `[budget]` table, then the
//! profile's `budget` table, then (on resume) the budget the session
//! recorded, then the flags.

use crate::cli::BudgetArgs;
use anyhow::{Context, Result};
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
}

impl BudgetTable {
    /// Parses a table the config file kept as TOML; `what` names it in errors.
    pub fn parse(value: Option<&toml::Value>, what: &str) -> Result<Self> {
        match value {
            Some(value) => value
                .clone()
                .try_into()
                .with_context(|| format!("invalid {what} in the config file")),
            None => Ok(Self::default()),
        }
    }

    /// The flags as a table.
    pub fn from_flags(args: &BudgetArgs) -> Self {
        Self {
            max_requests: args.max_requests,
            max_turns: args.max_turns,
            max_run_requests: args.max_run_requests,
            max_run_tokens: args.max_run_tokens,
            ..Self::default()
        }
    }

    /// `budget` with every limit this table sets replaced.
    pub fn apply(&self, mut budget: Budget) -> Result<Budget> {
        if let Some(n) = self.max_requests {
            anyhow::ensure!(n > 0, "max_requests must be at least 1");
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

/// The session budget: the file's `[budget]` table, then the profile's.
/// It is read from the config file on every start (not recorded), so a
/// raised cap lets a stopped session go on.
pub fn session(
    file: &pod_providers::ConfigFile,
    profile: Option<&toml::Value>,
) -> Result<pod::SessionBudget> {
    let top = BudgetTable::parse(file.budget.as_ref(), "[budget] table")?;
    let profile = BudgetTable::parse(profile, "budget table of the profile")?;
    Ok(pod::SessionBudget {
        requests: profile.max_session_requests.or(top.max_session_requests),
        tokens: profile.max_session_tokens.or(top.max_session_tokens),
    })
}

/// The run's budget. `recorded`: what the resumed session was started with
/// (it stands in for the file's tables, which applied when it started).
pub fn resolve(
    file: &pod_providers::ConfigFile,
    profile: Option<&toml::Value>,
    recorded: Option<&Budget>,
    flags: &BudgetArgs,
) -> Result<Budget> {
    let base = match recorded {
        Some(budget) => budget.clone(),
        None => {
            let top = BudgetTable::parse(file.budget.as_ref(), "[budget] table")?;
            let profile = BudgetTable::parse(profile, "budget table of the profile")?;
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
        let budget = resolve(&file, profile.budget.as_ref(), None, &BudgetArgs::default()).unwrap();
        assert_eq!(budget.requests_per_turn, 70);
        assert_eq!(budget.tokens, Some(1000));
        assert_eq!(budget.continuations, None);

        let flags = BudgetArgs {
            max_turns: Some(3),
            max_run_tokens: Some(5),
            ..BudgetArgs::default()
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
        let budget = resolve(&file, None, Some(&recorded), &BudgetArgs::default()).unwrap();
        assert_eq!(budget, recorded);
    }

    #[test]
    fn an_unknown_key_is_an_error() {
        let file = file("[budget]\nmax_request = 50\n");
        let err = resolve(&file, None, None, &BudgetArgs::default()).unwrap_err();
        assert!(format!("{err:#}").contains("max_request"), "{err:#}");
    }
}
