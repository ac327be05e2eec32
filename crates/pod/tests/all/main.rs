//! Integration tests of the Pod, linked as one binary.

mod actor;
mod reminders;
mod resume;
mod support;
