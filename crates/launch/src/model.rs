//! Which model answers: flags over the chosen profile of the config file
//! (or over what a resumed session recorded), lowered to one raw provider
//! config and resolved once (by pod-providers).

use crate::error::LaunchError;
use crate::flags::ModelFlags;
use pod_llm::{Provider, Script, ScriptedProvider};
use pod_providers::{
    build_provider, ConfigError, ConfigFile, ProviderConfig, ProviderKind, RawProviderConfig,
};
use std::sync::Arc;

/// The model settings of a run, before they are resolved.
#[derive(Debug, Clone, PartialEq)]
pub struct Choice {
    /// Flags laid over the profile (or over the resumed session's record).
    pub raw: RawProviderConfig,
    /// The profile they came from, if any.
    pub profile: Option<String>,
}

/// Chooses the model settings: the flags over `--profile NAME`; with
/// `--provider` (or `--script` alone) over nothing; otherwise over what the
/// resumed session recorded (its provider settings and profile), or else
/// over the file's default profile.
pub fn choose(
    args: &ModelFlags,
    file: &ConfigFile,
    recorded: Option<(&RawProviderConfig, Option<&String>)>,
) -> Result<Choice, LaunchError> {
    let script = match &args.script {
        Some(path) => Some(std::path::absolute(path).map_err(|err| {
            LaunchError::settings(
                format!("cannot resolve the script path {}: {err}", path.display()),
                "give the script's path relative to the current directory, or absolute",
            )
        })?),
        None => None,
    };
    let flags = RawProviderConfig {
        kind: match (args.provider, &script) {
            (Some(kind), _) => Some(kind),
            // A script alone says which model it is.
            (None, Some(_)) if args.profile.is_none() => Some(ProviderKind::Scripted),
            (None, _) => None,
        },
        base_url: args.base_url.clone(),
        model: args.model.clone(),
        script,
        ..RawProviderConfig::default()
    };
    let fresh = args.provider.is_some() || (args.script.is_some() && args.profile.is_none());
    let profile_of = |name: Option<&str>| {
        file.profile(name).map_err(|source| LaunchError::Config {
            context: "cannot read the profile".into(),
            source,
        })
    };
    let (base, profile) = match (&args.profile, recorded) {
        (Some(name), _) => (profile_of(Some(name))?, Some(name.clone())),
        (None, _) if fresh => (RawProviderConfig::default(), None),
        (None, Some((provider, profile))) => (provider.clone(), profile.cloned()),
        (None, None) => (profile_of(None)?, file.default_profile.clone()),
    };
    Ok(Choice {
        raw: base.merge(flags),
        profile,
    })
}

/// The providers a Pod is started with.
pub struct Model {
    /// Answers turns.
    pub provider: Arc<dyn Provider>,
    /// Answers compaction requests, when the model has its own for that.
    pub compactor: Option<Arc<dyn Provider>>,
    // Kept to move the script on after a resume.
    scripted: Option<ScriptedProvider>,
}

impl Model {
    /// Builds the providers the settings describe.
    pub fn from_choice(choice: &Choice) -> Result<Self, LaunchError> {
        let config =
            match choice.raw.resolve() {
                Ok(config) => config,
                Err(ConfigError::MissingKind) => {
                    return Err(LaunchError::settings(
                        "no model chosen",
                        "pass --profile NAME (README: \"A real model\"), or --provider scripted \
                     --script FILE.json, or set default_profile in the config file; `pod demo` \
                     needs none",
                    ))
                }
                Err(ConfigError::MissingScript) => return Err(LaunchError::settings(
                    "--provider scripted needs --script FILE.json",
                    "docs/guide.md's \"Scripted model\" section describes the file; `pod demo` \
                     runs one",
                )),
                Err(source) => {
                    return Err(LaunchError::Config {
                        context: "cannot configure the model".into(),
                        source,
                    })
                }
            };
        match &config {
            ProviderConfig::Scripted { script } => Ok(Self::from_script(
                Script::load(script).map_err(LaunchError::Script)?,
            )),
            _ => Ok(Self {
                provider: build_provider(&config).map_err(LaunchError::Provider)?,
                compactor: None,
                scripted: None,
            }),
        }
    }

    /// A scripted model playing `script`; its `compaction` steps answer
    /// compaction requests.
    pub fn from_script(script: Script) -> Self {
        // Nothing reads its requests back (tests that do build their own):
        // keeping each one would also keep every version of the history,
        // memory quadratic in the session's length.
        let provider = ScriptedProvider::new(script).without_recording();
        Self {
            compactor: Some(Arc::new(provider.compactor().without_recording())),
            // Counted like any model (its requests' times and failures).
            provider: Arc::new(pod_providers::Metered::new(Arc::new(provider.clone()))),
            scripted: Some(provider),
        }
    }

    /// A resumed session has `assistant_items` answers in its log: a
    /// scripted model continues with the step after the last one answered.
    /// Other models need nothing.
    pub fn resume_at(&self, assistant_items: usize) {
        if let Some(scripted) = &self.scripted {
            scripted.skip_to(assistant_items);
        }
    }
}

/// The config file (`$POD_CONFIG`, else `$XDG_CONFIG_HOME/pod/config.toml`);
/// empty when the default one does not exist, or when there is no config
/// directory and no profile was named. A file `POD_CONFIG` names must exist
/// (`/dev/null` is none).
pub fn config_file(args: &ModelFlags) -> Result<ConfigFile, LaunchError> {
    if let Some(named) = ConfigFile::named_path().filter(|path| !path.exists()) {
        return Err(LaunchError::settings(
            format!(
                "{} names {}, which does not exist",
                pod_providers::CONFIG_ENV,
                named.display()
            ),
            format!(
                "unset {} for the default config file, or set it to /dev/null for none",
                pod_providers::CONFIG_ENV
            ),
        ));
    }
    let file =
        match ConfigFile::default_path() {
            Some(path) => ConfigFile::load(&path).map_err(|source| LaunchError::Config {
                context: "cannot read the config file".into(),
                source,
            })?,
            None if args.profile.is_some() => return Err(LaunchError::settings(
                "cannot find the config file for --profile: neither XDG_CONFIG_HOME nor HOME is \
                 set",
                "set XDG_CONFIG_HOME or HOME",
            )),
            None => ConfigFile::default(),
        };
    if let (Some(name), false) = (&args.profile, file.exists()) {
        return Err(LaunchError::settings(
            format!(
                "--profile {name}: there is no config file at {}",
                file.path.display()
            ),
            "create it with a [profiles.NAME] table (README: \"A real model\"); \
             XDG_CONFIG_HOME moves it",
        ));
    }
    Ok(file)
}

#[cfg(test)]
mod tests {
    use super::*;
    use pod_llm::{ProviderRequest, ScriptStep};

    #[tokio::test]
    async fn a_scripted_model_keeps_no_requests() {
        let model = Model::from_script(Script {
            steps: vec![ScriptStep::text("one"), ScriptStep::text("two")],
            ..Script::default()
        });
        let request = ProviderRequest {
            system_prompt: "".into(),
            history: Arc::new(vec![pod_llm::Item::user("go")]),
            tools: Vec::new().into(),
            cache_key: None,
            history_id: None,
        };
        for _ in 0..2 {
            let _answer = model.provider.stream(&request).await.unwrap();
        }
        let scripted = model.scripted.as_ref().unwrap();
        // It played both steps, and kept none of the requests (each would
        // hold a version of the history).
        assert!(scripted.requests().is_empty());
        assert!(
            model.provider.stream(&request).await.is_err(),
            "the script is over"
        );
    }
}
