//! Subagents' settings: the `[subagents]` table of the config file over
//! the defaults, and the model a profile names for them
//! (`subagent_model`).
//!
//! ```toml
//! [subagents]
//! enabled = true        # offer the `task` tool
//! max_depth = 2         # children and grandchildren
//! max_parallel = 4      # children of one session at once
//! max_per_run = 16      # children one run may start
//!
//! [profiles.claude]
//! subagent_model = "claude-haiku-4-5"   # same provider and key, another model
//! ```

use crate::error::LaunchError;
use crate::model::{Choice, Model};
use pod::SubagentConfig;
use pod_providers::ConfigFile;
use serde::Deserialize;

/// The `[subagents]` table: every key optional.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
struct SubagentTable {
    enabled: Option<bool>,
    max_depth: Option<u32>,
    max_parallel: Option<usize>,
    max_per_run: Option<u32>,
}

/// The limits the config file sets (no model yet: see [`with_model`]).
pub fn resolve(file: &ConfigFile) -> Result<SubagentConfig, LaunchError> {
    let table: SubagentTable = match &file.subagents {
        Some(value) => value
            .clone()
            .try_into()
            .map_err(|source| LaunchError::Table {
                what: "[subagents] table".into(),
                path: file.path.display().to_string(),
                source: Box::new(source),
            })?,
        None => SubagentTable::default(),
    };
    let mut config = SubagentConfig::default();
    if let Some(enabled) = table.enabled {
        config.enabled = enabled;
    }
    if let Some(depth) = table.max_depth {
        config.max_depth = depth;
    }
    if let Some(parallel) = table.max_parallel {
        if parallel == 0 {
            return Err(LaunchError::settings(
                "[subagents] max_parallel must be at least 1",
                "set max_parallel to 1 or more, or enabled = false to offer no subagents",
            ));
        }
        config.max_parallel = parallel;
    }
    if let Some(per_run) = table.max_per_run {
        config.max_per_run = per_run;
    }
    Ok(config)
}

/// `config` with the model the chosen profile names for subagents, built
/// like the main one (same provider, key and settings).
pub fn with_model(
    mut config: SubagentConfig,
    choice: &Choice,
) -> Result<SubagentConfig, LaunchError> {
    if let Some(model) = &choice.raw.subagent_model {
        let mut raw = choice.raw.clone();
        raw.model = Some(model.clone());
        raw.subagent_model = None;
        let child = Model::from_choice(&Choice {
            raw,
            profile: choice.profile.clone(),
        })?;
        config.provider = Some(child.provider);
    }
    Ok(config)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(text: &str) -> ConfigFile {
        toml::from_str(text).expect("valid config")
    }

    #[test]
    fn the_table_sets_the_limits_over_the_defaults() {
        let config = resolve(&file("[subagents]\nmax_parallel = 2\nenabled = false\n")).unwrap();
        assert!(!config.enabled);
        assert_eq!(config.max_parallel, 2);
        assert_eq!(config.max_depth, pod::subagents::DEFAULT_MAX_DEPTH);
        assert_eq!(
            resolve(&file("")).unwrap().max_per_run,
            pod::subagents::DEFAULT_MAX_PER_RUN
        );
    }

    #[test]
    fn a_profiles_subagent_model_is_the_childrens_with_the_same_provider() {
        let file = file(
            "[profiles.p]\nkind = \"openai\"\nbase_url = \"http://127.0.0.1:9/v1\"\n\
             model = \"big\"\nsubagent_model = \"small\"\n\
             # Any variable that is set stands in for the key.\napi_key_env = \"PATH\"\n",
        );
        let choice = Choice {
            raw: file.profile(Some("p")).unwrap(),
            profile: Some("p".into()),
        };
        let config = with_model(resolve(&file).unwrap(), &choice).unwrap();
        let provider = config.provider.expect("a model for subagents");
        assert_eq!(provider.model_name(), "small");
        // Without the key the main model needs too, it is refused the same way.
        let mut keyless = choice.clone();
        keyless.raw.api_key_env = Some("POD_TEST_NO_SUCH_VARIABLE".into());
        assert!(with_model(SubagentConfig::default(), &keyless).is_err());
        // No subagent_model: the parent's model.
        keyless.raw.subagent_model = None;
        assert!(with_model(SubagentConfig::default(), &keyless)
            .unwrap()
            .provider
            .is_none());
    }

    #[test]
    fn bad_tables_are_refused_with_the_reason() {
        let err = resolve(&file("[subagents]\nmax_parallel = 0\n")).unwrap_err();
        assert!(err.to_string().contains("max_parallel must be at least 1"));
        let err = resolve(&file("[subagents]\nparallel = 3\n")).unwrap_err();
        let cause = std::error::Error::source(&err).unwrap().to_string();
        assert!(cause.contains("unknown field"), "{cause}");
    }
}
