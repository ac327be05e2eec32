//! The environment `bash` runs with: the caller's, minus secrets.

use std::ffi::OsString;

/// Variables dropped by name: pod's own provider keys.
const DROPPED: [&str; 3] = ["OPENAI_API_KEY", "ANTHROPIC_API_KEY", "DEEPSEEK_API_KEY"];

/// Variables dropped by suffix (compared upper-case): credentials of any
/// service the user had in their shell.
const DROPPED_SUFFIXES: [&str; 5] = [
    "_API_KEY",
    "_TOKEN",
    "_SECRET",
    "_PASSWORD",
    "_SECRET_ACCESS_KEY",
];

/// Variables dropped by prefix: pod's own settings, which may name keys.
const DROPPED_PREFIXES: [&str; 1] = ["POD_"];

/// Whether a variable is withheld from commands the model runs.
pub fn is_secret(name: &str) -> bool {
    let upper = name.to_ascii_uppercase();
    DROPPED.contains(&upper.as_str())
        || DROPPED_SUFFIXES.iter().any(|s| upper.ends_with(s))
        || DROPPED_PREFIXES.iter().any(|p| upper.starts_with(p))
}

/// `vars` without the secrets (see [`is_secret`]); everything else (PATH,
/// HOME, LANG, TERM, toolchain settings) is kept so commands work as in the
/// user's shell.
pub fn scrub_env(
    vars: impl IntoIterator<Item = (OsString, OsString)>,
) -> Vec<(OsString, OsString)> {
    vars.into_iter()
        .filter(|(name, _)| !is_secret(&name.to_string_lossy()))
        .collect()
}
