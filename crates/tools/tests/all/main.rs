//! Integration tests of pod-tools, built as one binary.

mod harness;

mod todo_concurrency;
mod todo_readback;
mod todo_replace;
mod todo_validation;
mod workspace_bash;
mod workspace_confine;
mod workspace_edit;
mod workspace_read;
mod workspace_sandbox;
mod workspace_schemas;
mod workspace_search;
mod workspace_support;
mod workspace_tracker;
