//! Integration tests of pod-providers against a loopback HTTP server; one
//! binary so the workspace links once.

mod anthropic;
mod openai;
mod pod_faults;
mod retry;
mod server;
mod support;
mod wire;
mod worker_e2e;
