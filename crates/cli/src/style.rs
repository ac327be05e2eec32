//! Colours, only when the output is a terminal.

use std::io::IsTerminal;

/// How to decorate text: plain unless writing to a terminal.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Style {
    /// Whether ANSI colours (and cursor movement) may be used.
    pub ansi: bool,
}

impl Style {
    /// Plain text, for pipes, files and snapshots.
    #[cfg(test)]
    pub const PLAIN: Style = Style { ansi: false };

    /// Colours when stdout is a terminal and `NO_COLOR` is unset.
    pub fn for_stdout() -> Self {
        Self {
            ansi: std::io::stdout().is_terminal() && std::env::var_os("NO_COLOR").is_none(),
        }
    }

    /// Colours when stderr is a terminal and `NO_COLOR` is unset.
    pub fn for_stderr() -> Self {
        Self {
            ansi: std::io::stderr().is_terminal() && std::env::var_os("NO_COLOR").is_none(),
        }
    }

    fn paint(self, code: &str, text: &str) -> String {
        if self.ansi {
            format!("\x1b[{code}m{text}\x1b[0m")
        } else {
            text.to_string()
        }
    }

    /// Emphasis.
    pub fn bold(self, text: &str) -> String {
        self.paint("1", text)
    }

    /// Secondary information.
    pub fn dim(self, text: &str) -> String {
        self.paint("2", text)
    }

    /// Success, completed items.
    pub fn green(self, text: &str) -> String {
        self.paint("32", text)
    }

    /// The item in progress, warnings.
    pub fn yellow(self, text: &str) -> String {
        self.paint("1;33", text)
    }

    /// Errors.
    pub fn red(self, text: &str) -> String {
        self.paint("1;31", text)
    }

    /// Runtime messages (reminders, notifications, compactions).
    pub fn cyan(self, text: &str) -> String {
        self.paint("36", text)
    }
}
