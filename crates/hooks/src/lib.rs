//! Hooks: commands an operator runs at points of an agent's work, read from
//! the `"hooks"` object of a Claude Code settings file, so a script written
//! for Claude Code runs under pod unchanged.
//!
//! This crate knows the format and the contract, nothing of a session:
//! [`Hooks`] says which commands match an event (and a tool), [`run`] runs
//! one with its JSON input under a timeout and an output cap, and
//! [`Verdict`] reads what the commands of one event decided (exit code 2,
//! or JSON on stdout). `pod` compiles them into its interceptor stack and
//! records their decisions in the session log.

mod aliases;
mod outcome;
mod run;
mod settings;

pub use aliases::{claude_name, pod_name, to_claude_input, to_pod_input};
pub use outcome::{Permission, Verdict};
pub use run::{run, Ran, RunLimits};
pub use settings::{HookCommand, HookEvent, Hooks, OnError, SettingsError};
