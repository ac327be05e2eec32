//! The TOML config file with named provider profiles.
//!
//! ```toml
//! default_profile = "claude"
//!
//! [profiles.claude]
//! kind = "anthropic"
//! model = "claude-sonnet-4-5"
//! context_window = 200000
//!
//! [profiles.ollama]
//! kind = "openai"
//! base_url = "http://127.0.0.1:11434/v1"
//! model = "qwen3"
//! ```

use super::{ConfigError, RawProviderConfig};
use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The environment variable naming the config file in place of the
/// default one; `/dev/null` runs without a config file.
pub const CONFIG_ENV: &str = "POD_CONFIG";

/// The parsed config file.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConfigFile {
    /// Where it was read from (empty for a default config).
    #[serde(skip)]
    pub path: PathBuf,
    /// The profile used when none is named.
    #[serde(default)]
    pub default_profile: Option<String>,
    /// Profiles by name.
    #[serde(default)]
    pub profiles: BTreeMap<String, RawProviderConfig>,
    /// The `[approval]` table (which tools run, ask or are refused), kept
    /// as parsed: its meaning belongs to the `pod` crate's `ApprovalPolicy`,
    /// which this crate must not know. Front ends deserialize it.
    #[serde(default)]
    pub approval: Option<toml::Value>,
    /// The `[budget]` table (limits of a run), kept as parsed for front
    /// ends, like `approval`.
    #[serde(default)]
    pub budget: Option<toml::Value>,
    /// The `[sandbox]` table (`mode`, `network`), kept as parsed for front
    /// ends, like `approval`.
    #[serde(default)]
    pub sandbox: Option<toml::Value>,
    /// The `[mcp_servers.NAME]` tables (MCP servers every session
    /// attaches), kept as parsed for front ends, like `approval`.
    #[serde(default)]
    pub mcp_servers: Option<toml::Value>,
    /// The `[subagents]` table (their limits), kept as parsed for front
    /// ends, like `approval`.
    #[serde(default)]
    pub subagents: Option<toml::Value>,
    /// The `[http]` table (`pod serve --http`'s workspace roots and
    /// limits), kept as parsed for front ends, like `approval`.
    #[serde(default)]
    pub http: Option<toml::Value>,
    /// The `[notify]` table (where notifications go), kept as parsed for
    /// front ends, like `approval`.
    #[serde(default)]
    pub notify: Option<toml::Value>,
    /// The `[goal]` table (the operator's checks, a grader and its rubric:
    /// what "done" means), kept as parsed for front ends, like `approval`.
    #[serde(default)]
    pub goal: Option<toml::Value>,
    /// The `[triggers.NAME]` tables (webhooks that start sessions, for
    /// `pod serve --http`), kept as parsed for front ends.
    #[serde(default)]
    pub triggers: Option<toml::Value>,
    /// The `[agent]` table (project instructions, a system prompt, agent
    /// definitions and skills: what a session's prompt is made of), kept as
    /// parsed for front ends, like `approval`.
    #[serde(default)]
    pub agent: Option<toml::Value>,
    /// `hooks_file`: a Claude Code settings JSON file whose `"hooks"` run
    /// in every session (relative to this file's directory).
    #[serde(default)]
    pub hooks_file: Option<PathBuf>,
    /// `workspace_hooks = true`: sessions also run the hooks of their
    /// workspace's `.claude/settings.json` (and `settings.local.json`) and
    /// `.pod/settings.json`.
    #[serde(default)]
    pub workspace_hooks: Option<bool>,
    /// `checkpoints = false`: sessions take no snapshots of their
    /// workspace (no `pod diff`, no `pod rewind`); on by default.
    #[serde(default)]
    pub checkpoints: Option<bool>,
    /// The `[limits.PROFILE]` tables (what every session of a profile may
    /// spend together per minute, hour or day, in a whole store), kept as
    /// parsed for front ends, like `approval`.
    #[serde(default)]
    pub limits: Option<toml::Value>,
    /// The `[telemetry]` table (where traces go: `otlp_endpoint`,
    /// `otlp_headers`, `service_name`), kept as parsed for front ends; the
    /// standard `OTEL_*` environment variables win over it.
    #[serde(default)]
    pub telemetry: Option<toml::Value>,
}

impl ConfigFile {
    /// Where the config file is: `$POD_CONFIG` when set (`/dev/null` for
    /// none), else `$XDG_CONFIG_HOME/pod/config.toml`, or
    /// `~/.config/pod/config.toml`.
    pub fn default_path() -> Option<PathBuf> {
        if let Some(named) = Self::named_path() {
            return Some(named);
        }
        let base = std::env::var_os("XDG_CONFIG_HOME")
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
            .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".config")))?;
        Some(base.join("pod").join("config.toml"))
    }

    /// The file `$POD_CONFIG` names, when it is set and not empty.
    pub fn named_path() -> Option<PathBuf> {
        std::env::var_os(CONFIG_ENV)
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
    }

    /// Reads and parses `path`; a missing file is an empty config (whose
    /// `path` still names where it was looked for).
    ///
    /// The file is read every time (an edit takes effect for the next
    /// session), but parsed again only when its text changed: a fleet
    /// worker loads it for every session it starts, and parsing it was
    /// about 46,000 instructions each time (callgrind).
    pub fn load(path: &Path) -> Result<Self, ConfigError> {
        match std::fs::read_to_string(path) {
            Ok(text) => Self::parse_cached(text, path),
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => Ok(Self {
                path: path.to_path_buf(),
                ..Self::default()
            }),
            Err(source) => Err(ConfigError::Read {
                path: path.to_path_buf(),
                source,
            }),
        }
    }

    /// [`ConfigFile::parse`], or a copy of the last parse of the same text
    /// from the same path.
    fn parse_cached(text: String, path: &Path) -> Result<Self, ConfigError> {
        use parking_lot::Mutex;
        use std::sync::LazyLock;
        // Held for a compare and a clone, or to replace the entry.
        static LAST: LazyLock<Mutex<Option<(PathBuf, String, ConfigFile)>>> =
            LazyLock::new(Default::default);
        if let Some((last_path, last_text, file)) = LAST.lock().as_ref() {
            if last_path == path && *last_text == text {
                return Ok(file.clone());
            }
        }
        let file = Self::parse(&text, path)?;
        *LAST.lock() = Some((path.to_path_buf(), text, file.clone()));
        Ok(file)
    }

    /// Parses `text` read from `path`, which names it in errors; relative
    /// script and CA file paths are made relative to `path`'s directory, so a profile
    /// means the same from any working directory.
    pub fn parse(text: &str, path: &Path) -> Result<Self, ConfigError> {
        let mut file: Self = toml::from_str(text).map_err(|err| parse_error(&err, text, path))?;
        let dir = path.parent().unwrap_or(Path::new(""));
        for profile in file.profiles.values_mut() {
            for path in [&mut profile.script, &mut profile.ca_file] {
                if let Some(path) = path.as_mut().filter(|p| p.is_relative()) {
                    *path = dir.join(&*path);
                }
            }
        }
        file.path = path.to_path_buf();
        Ok(file)
    }

    /// Whether the file was read (a missing file loads as an empty config).
    pub fn exists(&self) -> bool {
        self.path.is_file()
    }

    /// The profile `name`, or the default profile when `name` is `None`
    /// (empty when the file names none).
    pub fn profile(&self, name: Option<&str>) -> Result<RawProviderConfig, ConfigError> {
        let Some(name) = name.or(self.default_profile.as_deref()) else {
            return Ok(RawProviderConfig::default());
        };
        self.profiles
            .get(name)
            .cloned()
            .ok_or_else(|| ConfigError::UnknownProfile {
                name: name.to_string(),
                path: self.path.clone(),
                known: self.profiles.keys().cloned().collect::<Vec<_>>().join(", "),
            })
    }
}

/// `err` as a [`ConfigError::Parse`]: the place from its span, its message
/// on one line, and its display's lines that show the place (the gutter
/// and the caret), as the parser gives them.
fn parse_error(err: &toml::de::Error, text: &str, path: &Path) -> ConfigError {
    let line_column = err.span().map(|span| {
        let before = &text[..span.start.min(text.len())];
        let line = before.matches('\n').count() + 1;
        let line_start = before.rfind('\n').map_or(0, |at| at + 1);
        (line, before[line_start..].chars().count() + 1)
    });
    let message = err
        .message()
        .lines()
        .map(str::trim)
        .filter(|line| !line.is_empty())
        .collect::<Vec<_>>()
        .join("; ");
    let display = err.to_string();
    // The lines of the place: `  |`, `3 | key = value`, `  |     ^`.
    let snippet: Vec<&str> = display
        .lines()
        .filter(|line| {
            line.split_once('|')
                .is_some_and(|(gutter, _)| gutter.trim().chars().all(|c| c.is_ascii_digit()))
        })
        .collect();
    ConfigError::Parse {
        path: path.to_path_buf(),
        line_column,
        message,
        snippet: match snippet.is_empty() {
            true => display.trim_end().to_string(),
            false => snippet.join("\n"),
        },
    }
}
