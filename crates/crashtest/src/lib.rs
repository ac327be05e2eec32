//! Proof harnesses for pod.
//!
//! - **Crash injection** ([`harness`]): runs the real `pod` binary on a long
//!   scripted session in a temporary `POD_HOME`, kills it with SIGKILL at
//!   seeded random moments, resumes it until the plan is complete, and after
//!   every kill checks that the log parses (a torn tail excepted), that the
//!   history is valid, that nothing the process acknowledged as committed is
//!   missing ([`ack`] defines "acknowledged"), and that the todos equal the
//!   last accepted `todo_write` ([`oracle`]). The `pod-crash` binary runs it;
//!   `crates/cli/tests/all/crash.rs` runs a bounded number in CI.
//! - **Fleet mode** ([`fleet`]): sessions queued in PostgreSQL, several
//!   `pod serve` workers killed (SIGKILL) and paused past their lease
//!   (SIGSTOP) at random until every session is complete; `pod-crash
//!   --fleet --store URL` runs it.
//!
//! This crate drives `pod` as a child process and reads its log with the
//! `pod` crate's own parser and replay; it must not reach into the Pod's
//! internals, or the harness would share the bugs it looks for.
//!
//! ```no_run
//! use pod_crashtest::harness::{run, CrashConfig};
//! let report = run(&CrashConfig::new("target/debug/pod", 30, 42)).expect("no violation");
//! println!("{report}");
//! ```
#![deny(missing_docs)]

pub mod ack;
pub mod check;
pub mod fleet;
pub mod fuzz;
pub mod harness;
pub mod mutate;
pub mod oracle;
pub mod process;
pub mod rng;
pub mod script;
pub mod tree;
