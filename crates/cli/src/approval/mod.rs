//! Who answers when a tool call asks (the policy itself is resolved by
//! `pod-launch`). When stdin and stderr are terminals (and the output is
//! not `--json`), `ask` prompts on stderr ([`terminal`]); otherwise there is
//! no approver and the Pod refuses `ask` tools with a message naming
//! `--yes`/`--allow`.

pub mod prompt;
pub mod terminal;

use std::io::IsTerminal;

/// Gives `config` the terminal approver when the session is interactive;
/// returns the questions for the drive loop (`None`: `ask` tools are refused).
pub fn attach(config: &mut pod::PodConfig, json: bool) -> terminal::Asks {
    if !interactive(json) {
        return None;
    }
    let (approver, asks) = terminal::channel();
    config.approver = Some(std::sync::Arc::new(approver));
    Some(asks)
}

/// Whether `ask` can prompt: stdin and stderr are terminals and stdout is
/// not a `--json` stream (a script reading it cannot answer).
pub fn interactive(json: bool) -> bool {
    !json && std::io::stdin().is_terminal() && std::io::stderr().is_terminal()
}
