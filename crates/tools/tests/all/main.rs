//! Integration tests of pod-tools, built as one binary.

mod harness;
mod session;
mod todo_concurrency;
mod todo_readback;
mod todo_replace;
mod todo_validation;
