//! API keys that cannot leak through `Debug`, logs or error messages.

use std::fmt;

/// An API key. Its `Debug` and `Display` print `***`; only
/// [`ApiKey::expose`] gives the key, for the one header that needs it.
#[derive(Clone, PartialEq, Eq)]
pub struct ApiKey(String);

impl ApiKey {
    /// Wraps a key.
    pub fn new(key: impl Into<String>) -> Self {
        Self(key.into())
    }

    /// The key itself. Call only to build an authentication header.
    pub fn expose(&self) -> &str {
        &self.0
    }

    /// `text` with every occurrence of the key replaced by `***`, for
    /// messages that came from a server that might echo what we sent.
    pub fn scrub(&self, text: &str) -> String {
        if self.0.is_empty() {
            text.to_string()
        } else {
            text.replace(&self.0, "***")
        }
    }
}

impl fmt::Debug for ApiKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("***")
    }
}

impl fmt::Display for ApiKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("***")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_never_prints() {
        let key = ApiKey::new("sk-secret");
        assert_eq!(format!("{key:?} {key}"), "*** ***");
        assert_eq!(key.scrub("bad key sk-secret given"), "bad key *** given");
        assert_eq!(key.expose(), "sk-secret");
    }
}
