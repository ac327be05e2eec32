//! `[limits.PROFILE]`: what every session of a profile may spend together
//! per UTC minute, hour or day, in a whole store (a fleet's workers share
//! them through PostgreSQL; a file store's are the process's). Read from
//! the config file at every start, never recorded: the operator's file
//! decides, and raising a limit there (and starting the workers again)
//! lets the sessions it paused go on.
//!
//! ```toml
//! [limits.claude]
//! money_per_day = 50.0
//! tokens_per_hour = 2000000
//! requests_per_minute = 60
//! ```

use crate::error::LaunchError;
use pod::shared_limits::{Cap, Measure, SharedLimitsConfig, Window, DEFAULT_OUTPUT_ESTIMATE};
use pod_llm::{Cost, Prices};
use serde::Deserialize;
use std::collections::BTreeMap;

/// One profile's `[limits.PROFILE]` table.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LimitsTable {
    /// Money per UTC minute, at the profile's prices.
    pub money_per_minute: Option<Cost>,
    /// Money per UTC hour.
    pub money_per_hour: Option<Cost>,
    /// Money per UTC day.
    pub money_per_day: Option<Cost>,
    /// Tokens (prompt + completion) per UTC minute.
    pub tokens_per_minute: Option<u64>,
    /// Tokens per UTC hour.
    pub tokens_per_hour: Option<u64>,
    /// Tokens per UTC day.
    pub tokens_per_day: Option<u64>,
    /// Model requests per UTC minute.
    pub requests_per_minute: Option<u64>,
    /// Model requests per UTC hour.
    pub requests_per_hour: Option<u64>,
    /// Model requests per UTC day.
    pub requests_per_day: Option<u64>,
    /// The output tokens a request's reservation assumes (its input is
    /// estimated from the request).
    pub reserve_output_tokens: Option<u64>,
}

impl LimitsTable {
    /// Its limits.
    pub fn caps(&self) -> Vec<Cap> {
        let money = |cost: Option<Cost>| cost.map(Cost::micros);
        [
            (Measure::Money, Window::Minute, money(self.money_per_minute)),
            (Measure::Money, Window::Hour, money(self.money_per_hour)),
            (Measure::Money, Window::Day, money(self.money_per_day)),
            (Measure::Tokens, Window::Minute, self.tokens_per_minute),
            (Measure::Tokens, Window::Hour, self.tokens_per_hour),
            (Measure::Tokens, Window::Day, self.tokens_per_day),
            (Measure::Requests, Window::Minute, self.requests_per_minute),
            (Measure::Requests, Window::Hour, self.requests_per_hour),
            (Measure::Requests, Window::Day, self.requests_per_day),
        ]
        .into_iter()
        .filter_map(|(measure, window, max)| {
            max.map(|max| Cap {
                measure,
                window,
                max,
            })
        })
        .collect()
    }
}

/// The config file's `[limits]` tables as they are now, in a form to
/// compare (`None`: none, or a file that cannot be read, whose sessions
/// will say why): what a fleet worker compares to see an operator raise
/// a limit.
pub fn tables_now() -> Option<String> {
    crate::model::config_file(&crate::ModelFlags::default())
        .ok()
        .and_then(|file| file.limits)
        .map(|tables| format!("{tables:?}"))
}

/// The shared limits of a session of `profile` (none without a profile,
/// or when the file sets none for it), at the profile's `prices`.
pub fn resolve(
    file: &pod_providers::ConfigFile,
    profile: Option<&str>,
    prices: Option<Prices>,
) -> Result<Option<SharedLimitsConfig>, LaunchError> {
    let (Some(value), Some(profile)) = (&file.limits, profile) else {
        return Ok(None);
    };
    let tables: BTreeMap<String, LimitsTable> =
        value
            .clone()
            .try_into()
            .map_err(|source| LaunchError::Table {
                what: "[limits]".into(),
                path: file.path.display().to_string(),
                source: Box::new(source),
            })?;
    let Some(table) = tables.get(profile) else {
        return Ok(None);
    };
    let caps = table.caps();
    if prices.is_none() && caps.iter().any(|cap| cap.measure == Measure::Money) {
        return Err(LaunchError::settings(
            format!("[limits.{profile}] sets a money limit, but the profile has no prices"),
            "add prices to the profile, e.g. prices = { input = 3.0, output = 15.0 } (per \
             million tokens), or limit its tokens instead",
        ));
    }
    Ok((!caps.is_empty()).then(|| SharedLimitsConfig {
        profile: profile.to_string(),
        caps,
        prices,
        output_estimate: table
            .reserve_output_tokens
            .unwrap_or(DEFAULT_OUTPUT_ESTIMATE),
        backend: None,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(text: &str) -> pod_providers::ConfigFile {
        pod_providers::ConfigFile::parse(text, std::path::Path::new("config.toml")).unwrap()
    }

    #[test]
    fn a_profiles_table_gives_its_caps_and_others_get_none() {
        let file = file(
            "[profiles.p]\nkind = \"scripted\"\nprices = { input = 1.0 }\n\
             [limits.p]\nmoney_per_day = 2.5\nrequests_per_minute = 60\n",
        );
        let prices = Some(Prices {
            input: 1.0,
            ..Prices::default()
        });
        let limits = resolve(&file, Some("p"), prices).unwrap().unwrap();
        assert_eq!(
            limits.caps,
            [
                Cap {
                    measure: Measure::Money,
                    window: Window::Day,
                    max: 2_500_000
                },
                Cap {
                    measure: Measure::Requests,
                    window: Window::Minute,
                    max: 60
                }
            ]
        );
        assert_eq!(limits.output_estimate, DEFAULT_OUTPUT_ESTIMATE);
        assert!(resolve(&file, Some("q"), prices).unwrap().is_none());
        assert!(resolve(&file, None, prices).unwrap().is_none());
        let refused = resolve(&file, Some("p"), None).unwrap_err().to_string();
        assert!(refused.contains("no prices"), "{refused}");
    }

    #[test]
    fn an_unknown_key_is_refused() {
        let file = file("[limits.p]\nmoney_a_day = 2\n");
        let refused = resolve(&file, Some("p"), None).unwrap_err();
        assert!(
            pod_llm::error_chain(&refused).contains("money_a_day"),
            "{refused}"
        );
    }
}
