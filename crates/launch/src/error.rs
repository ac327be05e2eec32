//! Why a session could not be planned or started, with what the user can do.

use pod::PodError;

/// Why a session could not be planned or started.
#[derive(Debug, thiserror::Error)]
pub enum LaunchError {
    /// A setting is wrong in a way the user can fix.
    #[error("{message}")]
    Settings {
        /// What is wrong.
        message: String,
        /// What to do instead.
        hint: String,
    },
    /// A table of the config file does not parse.
    #[error("invalid {what} in the config file {path}")]
    Table {
        /// Which table (`[budget]`, `the budget table of the profile`).
        what: String,
        /// The file.
        path: String,
        /// What the parser said.
        #[source]
        source: Box<toml::de::Error>,
    },
    /// The config file or a profile.
    #[error("{context}")]
    Config {
        /// What was being done.
        context: String,
        /// The cause.
        #[source]
        source: pod_providers::ConfigError,
    },
    /// A provider could not be built from its settings.
    #[error("cannot configure the model")]
    Provider(#[source] pod_providers::BuildError),
    /// The scripted model's script.
    #[error("cannot load the script")]
    Script(#[source] pod_llm::ScriptError),
    /// An MCP server's configuration.
    #[error("cannot configure the MCP servers")]
    Mcp(#[source] pod_mcp::config::ConfigError),
    /// A session log without its header line.
    #[error("{location}: the session log has no header")]
    NoHeader {
        /// Where the log is.
        location: String,
    },
    /// The session store or the Pod.
    #[error("{context}")]
    Pod {
        /// What was being done.
        context: String,
        /// The cause.
        #[source]
        source: PodError,
    },
}

impl LaunchError {
    /// A setting the user can fix.
    pub fn settings(message: impl Into<String>, hint: impl Into<String>) -> Self {
        Self::Settings {
            message: message.into(),
            hint: hint.into(),
        }
    }

    /// A store or Pod error while doing `context`.
    pub fn pod(context: impl Into<String>, source: PodError) -> Self {
        Self::Pod {
            context: context.into(),
            source,
        }
    }

    /// What the user can do, where this error knows it.
    pub fn hint(&self) -> Option<&str> {
        match self {
            Self::Settings { hint, .. } => Some(hint),
            _ => None,
        }
    }

    /// The Pod error underneath, if any.
    pub fn pod_error(&self) -> Option<&PodError> {
        match self {
            Self::Pod { source, .. } => Some(source),
            _ => None,
        }
    }
}
