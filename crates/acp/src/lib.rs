//! `pod acp`: an [Agent Client Protocol](https://agentclientprotocol.com)
//! server, so editors such as Zed drive Pods and show each Pod's todo list as
//! their native plan.
//!
//! [`serve`] speaks ACP v1 (newline-delimited JSON-RPC 2.0) over any byte
//! stream pair, stdio in production. Each `session/new` spawns a Pod in the
//! client's `cwd`; `session/prompt` runs a turn and streams its
//! [`PodEvent`](pod::PodEvent)s as `session/update` notifications; every
//! todo change becomes a `plan` update; tools the approval policy sets to
//! `ask` are put to the client with `session/request_permission`;
//! `session/load` resumes a Pod from its log and replays the conversation
//! first. The mapping lives in `tickets/acp.md`.
//!
//! This crate translates and nothing more: it must not know how providers
//! are configured nor start a Pod or an MCP server (the caller's
//! [`PodFactory`] starts sessions, `pod acp`'s through pod-launch), nor how
//! turns, logs or tools work inside a Pod. Core crates never see its types.
//!
//! ```
//! use pod::{Pod, PodConfig, PodHome};
//! use pod_acp::{serve, FactoryError, PodFactory, Start, Started};
//! use pod_llm::ScriptedProvider;
//! use std::sync::Arc;
//! use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
//!
//! // `pod acp` starts sessions through pod-launch; this one starts them
//! // on a scripted model.
//! struct Scripted;
//! #[pod::async_trait]
//! impl PodFactory for Scripted {
//!     async fn new_session(&self, start: Start<'_>) -> Result<Started, FactoryError> {
//!         let model = ScriptedProvider::from_steps(vec![]);
//!         let mut config = PodConfig::new(PodHome::from_env()?, start.workspace, Arc::new(model));
//!         config.approver = Some(start.approver);
//!         let handle = Pod::spawn(config).await?;
//!         Ok(Started { handle, mcp: Default::default(), warnings: Vec::new() })
//!     }
//!     async fn resume_session(&self, id: uuid::Uuid, start: Start<'_>) -> Result<Started, FactoryError> {
//!         Err(format!("no session {id} in {}", start.workspace.display()).into())
//!     }
//! }
//!
//! # tokio::runtime::Runtime::new().unwrap().block_on(async {
//! // In production: serve(factory, tokio::io::stdin(), tokio::io::stdout()).
//! let (editor, agent) = tokio::io::duplex(64 * 1024);
//! let (agent_in, agent_out) = tokio::io::split(agent);
//! let server = tokio::spawn(serve(Scripted, agent_in, agent_out));
//! let (editor_in, mut editor_out) = tokio::io::split(editor);
//! editor_out
//!     .write_all(b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\",\"params\":{\"protocolVersion\":1}}\n")
//!     .await?;
//! let answer = BufReader::new(editor_in).lines().next_line().await?.unwrap();
//! assert!(answer.contains(r#""loadSession":true"#));
//! drop(editor_out); // EOF: every Pod is shut down and `serve` returns.
//! server.await.unwrap().unwrap();
//! # Ok::<(), std::io::Error>(()) }).unwrap();
//! ```
#![deny(missing_docs)]

mod control;
mod error;
mod factory;
mod forward;
mod mcp;
mod permission;
mod pipeline;
mod prompt;
mod replay;
mod server;
mod session;
mod sessions;
mod translate;
mod turn;
mod updates;

pub use error::AcpError;
pub use factory::{FactoryError, PodFactory, Start, Started};
pub use server::{serve, AGENT_NAME};
