//! Integration tests of the Pod, linked as one binary.

mod actor;
mod approval;
mod compaction;
mod properties;
mod questions;
mod reminders;
mod resume;
mod stack;
mod subagents;
mod support;
mod workspace;
