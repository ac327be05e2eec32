//! Why the server could not start, with what the operator can do.

/// Why `pod serve --http` could not start.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// Something the operator can fix: what is wrong, and what to do.
    #[error("{message}")]
    Refused {
        /// What is wrong.
        message: String,
        /// What to do instead.
        hint: String,
    },
    /// A file or the listener.
    #[error("{context}")]
    Io {
        /// What was being done.
        context: String,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// The server's own settings (its flags and config file).
    #[error("cannot resolve the server's settings")]
    Settings(#[source] pod_launch::LaunchError),
}

impl ServeError {
    /// What the operator can fix.
    pub fn refused(message: impl Into<String>, hint: impl Into<String>) -> Self {
        Self::Refused {
            message: message.into(),
            hint: hint.into(),
        }
    }

    /// An IO error while doing `context`.
    pub fn io(context: impl Into<String>, source: std::io::Error) -> Self {
        Self::Io {
            context: context.into(),
            source,
        }
    }

    /// What to do, where this error knows it.
    pub fn hint(&self) -> Option<&str> {
        match self {
            Self::Refused { hint, .. } => Some(hint),
            Self::Settings(err) => err.hint(),
            Self::Io { .. } => None,
        }
    }
}
