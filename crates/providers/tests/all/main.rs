//! Integration tests of pod-providers against a loopback HTTP server; one
//! binary so the workspace links once. A Pod or worker driven through these
//! providers is an end-to-end suite: see the workspace's `tests/e2e`.

mod anthropic;
mod caching;
mod http2;
mod openai;
mod retry;
mod support;
