//! Integration tests of the Pod, linked as one binary.

mod actor;
mod compaction;
mod properties;
mod reminders;
mod resume;
mod support;
