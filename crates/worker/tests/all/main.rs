//! Integration tests of pod-worker, built as one binary.

mod call_ids;
mod concurrency;
mod hooks;
mod invariant;
mod observer;
mod registry;
mod stack;
mod support;
mod tool_state;
