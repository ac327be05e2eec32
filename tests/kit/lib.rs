//! The test kit the workspace's suites share, so that no suite keeps its own
//! copy of a tool, a history helper or a test server.
//!
//! - [`tools`]: small tools (echo, slow, panicking, concurrency gauge, a
//!   stateful tally).
//! - [`history`]: reading results and shapes out of a history.
//! - [`pod`]: a scripted Pod in a temporary `POD_HOME`, approvers, events.
//! - [`server`] and [`wire`]: a loopback HTTP server that plays scripted
//!   replies byte for byte, and model answers in both wire formats.
//! - [`limits`]: child processes with a lowered open-file limit.
//! - [`model`]: a loopback model server answering many sessions at once,
//!   holding answers back on request and counting those in flight.
//! - [`provider`]: running one request against a real provider.
//! - [`postgres`]: a throwaway PostgreSQL cluster per test.
//! - [`browser`]: headless Chromium over WebDriver, for the dashboard.
//! - [`logs`]: session logs written straight into a `POD_HOME`.
//! - [`webhook`]: a webhook receiver on loopback that checks signatures.
//! - [`poll`]: waiting on another process for a condition, with a guard.
//!
//! Test code: helpers panic with a message instead of returning errors.
#![allow(clippy::unwrap_used, clippy::expect_used)]

pub mod browser;
pub mod h2server;
pub mod history;
pub mod limits;
pub mod logs;
pub mod model;
pub mod pod;
pub mod poll;
pub mod postgres;
pub mod provider;
pub mod server;
pub mod tools;
pub mod webhook;
pub mod wire;

pub use history::{calls_of, result_of, shape};
