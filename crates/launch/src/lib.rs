//! One way to start a session, shared by every front end (`pod run` and
//! `pod resume`, `pod acp`, the HTTP API, the fleet worker, `pod submit`).
//!
//! A front end parses what it was given into [`Flags`]; the [`Launcher`]
//! lays them over the config file (`$XDG_CONFIG_HOME/pod/config.toml`) and,
//! on resume, over the session's [`Launch`] record, once: the model and its
//! profile, approvals, the sandbox, budgets, subagents and MCP servers;
//! and what the system prompt is made of ([`prompt`]: `AGENTS.md` files,
//! a replacement prompt, agent definitions, skills), read once and recorded.
//! It writes the [`pod::PodConfig`] once, records the launch once, and
//! starts the Pod. Adding a session setting touches this crate and the
//! front ends' parsing, nothing else.
//!
//! It also reads sessions without opening them ([`sessions`]): their
//! status, plan and usage, for listings and resumes. It computes when a
//! schedule fires ([`timing`], for the fleet's PostgreSQL schedules and the
//! file store's alike) and keeps and fires the file store's schedules
//! ([`schedules`]: a single `pod serve` without a fleet), starting their
//! sessions the way a fleet worker starts a submitted one.
//!
//! It must not know how a front end talks to people: no command line, no
//! terminal, no HTTP. Errors are [`LaunchError`]s carrying a hint where the
//! user can act.
//!
//! ```no_run
//! # async fn example() -> Result<(), pod_launch::LaunchError> {
//! use pod_launch::{Flags, Launcher, Options, Place};
//! let home = pod::PodHome::new("/tmp/pod-home");
//! let store: pod::Store = std::sync::Arc::new(pod::FileStore::new(home.clone()));
//! let launcher = Launcher::new(Place { home, store });
//! let mut flags = Flags::default();
//! flags.model.profile = Some("claude".into());
//! let plan = launcher.plan(&flags, "/work/project".into())?;
//! let session = plan.prepare(Options::default()).await?.start().await?;
//! session.handle.prompt("Fix the failing test").await.ok();
//! # Ok(()) }
//! ```

#![deny(missing_docs)]

mod approval;
pub mod budget;
mod error;
mod flags;
pub mod goal;
mod hooks;
mod launcher;
pub mod limits;
mod mcp;
mod model;
pub mod notify;
pub mod prompt;
mod record;
pub mod replay;
mod sandbox;
pub mod schedules;
pub mod sessions;
mod settings;
mod subagents;
pub mod timing;
pub mod verified;

pub use approval::KNOWN_TOOLS;
pub use budget::BudgetTable;
pub use error::LaunchError;
pub use flags::{BudgetFlags, Flags, ModelFlags, SandboxFlags};
pub use launcher::{Launcher, Meter, Options, Place, Plan, Prepared, Session};
pub use model::{Choice, Model};
pub use prompt::{RecordedAgent, RecordedPrompt, RecordedText};
pub use record::{Launch, RecordedApproval, RecordedHooks, RecordedWorktree};
pub use settings::Resolved;
