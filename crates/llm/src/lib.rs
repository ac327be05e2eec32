//! The model-facing vocabulary of pod.
//!
//! This crate defines what a conversation is made of ([`Item`], the on-disk
//! history format), how a model is asked for its next step ([`Provider`],
//! [`ProviderRequest`], [`StreamEvent`]) and the providers themselves,
//! starting with the deterministic [`ScriptedProvider`].
//!
//! It must not know about the turn loop, tools' behaviour, sessions or front
//! ends: a provider turns a request into a stream of events and nothing more.
//!
//! ```
//! use pod_llm::{Item, ItemKind};
//! let item = Item::user("hello");
//! let json = serde_json::to_string(&item).unwrap();
//! let back: Item = serde_json::from_str(&json).unwrap();
//! assert_eq!(back, item);
//! assert!(matches!(back.kind, ItemKind::User { .. }));
//! ```
#![deny(missing_docs)]

mod assemble;
mod error_chain;
mod item;
mod prices;
mod provider;
mod scripted;
pub mod tokens;

pub use assemble::{AssembledResponse, ResponseAssembler};
pub use error_chain::error_chain;
pub use item::{
    validate_history, HistoryError, Item, ItemKind, Meta, Reasoning, SystemKind, ToolCall, Usage,
    ITEM_FORMAT_VERSION,
};
pub use prices::{Cost, Prices};
pub use provider::{
    EventStream, FinishReason, HistoryId, Provider, ProviderError, ProviderRequest, StreamEvent,
    ToolSpec,
};
pub use scripted::{
    AgentScript, Script, ScriptError, ScriptFailure, ScriptStep, ScriptedCall, ScriptedProvider,
};
