//! Integration tests of pod-providers against a loopback HTTP server; one
//! binary so the workspace links once.

mod anthropic;
mod openai;
mod retry;
mod server;
mod support;
mod worker_e2e;
