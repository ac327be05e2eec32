//! Which model answers: flags over the chosen profile of the config file,
//! lowered to one raw provider config and resolved once (by pod-providers).

use crate::cli::{ModelArgs, ProviderKindArg};
use crate::error::Failure;
use anyhow::{bail, Context, Result};
use pod_llm::{Provider, Script, ScriptedProvider};
use pod_providers::{
    build_provider, ConfigError, ConfigFile, ProviderConfig, ProviderKind, RawProviderConfig,
};
use std::sync::Arc;

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
    /// Resolves the model flags against the config file's profiles.
    pub fn resolve(args: &ModelArgs) -> Result<Self> {
        Self::from_file(args, &config_file(args)?)
    }

    /// Resolves the model flags against the profiles of `file`.
    pub fn from_file(args: &ModelArgs, file: &ConfigFile) -> Result<Self> {
        let flags = RawProviderConfig {
            kind: match (args.provider, &args.script) {
                (Some(kind), _) => Some(kind.into()),
                // A script alone says which model it is.
                (None, Some(_)) if args.profile.is_none() => Some(ProviderKind::Scripted),
                (None, _) => None,
            },
            base_url: args.base_url.clone(),
            model: args.model.clone(),
            script: args.script.clone(),
            ..RawProviderConfig::default()
        };
        let profile = file.profile(args.profile.as_deref())?;
        let config = match profile.merge(flags).resolve() {
            Ok(config) => config,
            Err(ConfigError::MissingKind) => bail!(Failure::new(
                "no model chosen",
                "pass --profile NAME (README: \"Real models\"), or --provider scripted --script \
                 FILE.json, or try `pod demo`"
            )),
            Err(ConfigError::MissingScript) => bail!(Failure::new(
                "--provider scripted needs --script FILE.json",
                "README's \"Scripted model\" section describes the file; `pod demo` runs one"
            )),
            Err(err) => return Err(err).context("cannot configure the model"),
        };
        match &config {
            ProviderConfig::Scripted { script } => Ok(Self::from_script(Script::load(script)?)),
            _ => Ok(Self {
                provider: build_provider(&config)?,
                compactor: None,
                scripted: None,
            }),
        }
    }

    /// A scripted model playing `script`; its `compaction` steps answer
    /// compaction requests.
    pub fn from_script(script: Script) -> Self {
        let provider = ScriptedProvider::new(script);
        Self {
            compactor: Some(Arc::new(provider.compactor())),
            provider: Arc::new(provider.clone()),
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

    /// A Pod config for this model, with the CLI's drive settings and
    /// approval policy (no approver: the caller adds one when it can ask).
    pub fn pod_config(
        &self,
        home: pod::PodHome,
        workspace: std::path::PathBuf,
        drive: &crate::cli::DriveArgs,
        approval: pod::ApprovalPolicy,
    ) -> pod::PodConfig {
        let mut config = pod::PodConfig::new(home, workspace, self.provider.clone());
        config.durability = drive.durability.into();
        config.compact_provider = self.compactor.clone();
        config.until_done = drive.until_done.then_some(drive.max_turns);
        config.approval = approval;
        config
    }
}

/// The config file (`$XDG_CONFIG_HOME/pod/config.toml`); empty when it does
/// not exist, or when there is no config directory and no profile was named.
pub fn config_file(args: &ModelArgs) -> Result<ConfigFile> {
    match ConfigFile::default_path() {
        Some(path) => Ok(ConfigFile::load(&path)?),
        None if args.profile.is_some() => bail!(Failure::new(
            "cannot find the config file for --profile",
            "set XDG_CONFIG_HOME or HOME"
        )),
        None => Ok(ConfigFile::default()),
    }
}

impl From<ProviderKindArg> for ProviderKind {
    fn from(kind: ProviderKindArg) -> Self {
        match kind {
            ProviderKindArg::Scripted => ProviderKind::Scripted,
            ProviderKindArg::Openai => ProviderKind::OpenAi,
            ProviderKindArg::Anthropic => ProviderKind::Anthropic,
        }
    }
}
