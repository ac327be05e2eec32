//! End-to-end tests of the `pod` binary, driven as a child process on the
//! scripted model. Every test gets its own POD_HOME and XDG directories.

mod support;

mod acp;
mod admission;
mod approval;
mod budgets;
mod checklist;
mod crash;
mod ctrl_c;
mod dashboard;
mod demo;
mod errors;
mod escapes;
mod first_steps;
mod fleet;
mod fleet_scale;
mod fork;
mod governor;
mod governor_http;
mod hooks;
mod http;
mod instructions;
mod ledger;
mod managed;
mod mcp;
mod metrics;
mod notify;
mod outage;
mod questions;
mod replay;
mod rewind;
mod run_resume;
mod sandbox;
mod schedules;
mod sessions_show;
mod states;
mod store;
mod subagents;
mod terminal;
mod triggers;
mod trust;
mod until_done;
mod verify;
mod watchers;
