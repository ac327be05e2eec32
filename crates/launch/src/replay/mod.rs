//! Replaying a recorded session through today's runtime, with no model and
//! no network: what a change to pod, a prompt, a hook, a config or the
//! workspace does to real sessions.
//!
//! The recording's answers (its assistant items, in order) become the
//! script of a scripted model ([`script`]); a fresh Pod is started with the
//! session's recorded [`Launch`](crate::Launch), in a scratch copy of the
//! workspace as it was when the session started (exported from the first
//! checkpoint, or copied from a directory given), with a scratch home and
//! store, so nothing is written among the user's sessions. Runs start as the
//! recording's did: each prompt in turn, or a continuation where the
//! recording went on without one ([`runs`]). Questions are answered as
//! they were; a call a crash cut short gets the result its resume gave it.
//! Then the replay's log is compared with the recording's, record by
//! record ([`normalise`], [`compare`]): the first difference is reported
//! with its item number, both records and a short diff. A subagent's log is
//! compared under its parent's.
//!
//! A replay never reaches further than its scratch workspace ([`confine`]):
//! the recording's sandbox is narrowed to at most `workspace-write` with no
//! network (a wider recorded policy is reported, never applied), only the
//! hooks its command line names run, the user's `POD_HOME` is out of reach,
//! and the recording's stdio MCP servers, started again ([`servers`]), run
//! under the same sandbox;
//! what is not replayed: MCP servers over HTTP (their calls fail as unknown
//! tools), notifications, and the model's failures (a recording's provider
//! errors and retries leave no answer to play).

mod approver;
mod compare;
mod confine;
mod driver;
mod limits;
mod normalise;
mod runs;
mod script;
mod servers;
mod workspace;

pub use compare::Divergence;
pub use driver::replay;

use crate::error::LaunchError;
use pod::log::{LogRecord, SessionHeader};
use pod::{PodConfig, SessionStore};
use serde::Serialize;
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use uuid::Uuid;

/// One recorded session's log.
#[derive(Debug, Clone)]
pub struct Recorded {
    /// Its header.
    pub header: SessionHeader,
    /// Its records after the header, up to any damage.
    pub records: Vec<LogRecord>,
    /// Whether its last line was torn or a line was damaged: the log ends
    /// before the session did.
    pub torn: bool,
}

/// The sessions of a store, as replay reads them.
#[derive(Debug)]
pub struct Corpus {
    /// Its top-level sessions, oldest first, each with its subagents.
    pub sessions: Vec<Recording>,
    /// The sessions whose logs cannot be read, and why.
    pub unreadable: Vec<(Uuid, LaunchError)>,
}

/// A recorded session with its subagents' sessions (children,
/// grandchildren, …), as replay needs them.
#[derive(Debug, Clone)]
pub struct Recording {
    /// The session.
    pub root: Recorded,
    /// Its subagents' sessions, oldest first.
    pub children: Vec<Recorded>,
}

impl Recording {
    /// Session `id` of `store`, with its subagents.
    pub async fn read(store: &dyn SessionStore, id: Uuid) -> Result<Self, LaunchError> {
        let root = read_one(store, id).await?;
        let mut all = Vec::new();
        for other in store
            .list()
            .await
            .map_err(|err| LaunchError::pod("cannot list the sessions", err))?
        {
            if other != id {
                // A session that cannot be read is nobody's subagent here.
                if let Ok(recorded) = read_one(store, other).await {
                    all.push(recorded);
                }
            }
        }
        Ok(Self {
            children: descendants(&root, all),
            root,
        })
    }

    /// Every top-level session of `store`, each with its subagents, oldest
    /// first, and the logs that cannot be read.
    pub async fn read_all(store: &dyn SessionStore) -> Result<Corpus, LaunchError> {
        let mut read = Vec::new();
        let mut unreadable = Vec::new();
        for id in store
            .list()
            .await
            .map_err(|err| LaunchError::pod("cannot list the sessions", err))?
        {
            match read_one(store, id).await {
                Ok(recorded) => read.push(recorded),
                Err(err) => unreadable.push((id, err)),
            }
        }
        let (roots, others): (Vec<_>, Vec<_>) =
            read.into_iter().partition(|r| r.header.parent.is_none());
        let mut sessions: Vec<Self> = roots
            .into_iter()
            .map(|root| Self {
                children: descendants(&root, others.clone()),
                root,
            })
            .collect();
        sessions.sort_by_key(|r| r.root.header.created_at);
        Ok(Corpus {
            sessions,
            unreadable,
        })
    }

    /// The recorded session's id.
    pub fn id(&self) -> Uuid {
        self.root.header.session_id
    }
}

async fn read_one(store: &dyn SessionStore, id: Uuid) -> Result<Recorded, LaunchError> {
    let contents = store
        .read_before_damage(id)
        .await
        .map_err(|err| LaunchError::pod(format!("cannot read session {id}"), err))?;
    let header = contents.header.ok_or_else(|| LaunchError::NoHeader {
        location: store.log_location(id),
    })?;
    Ok(Recorded {
        header,
        records: contents.records,
        torn: contents.torn_tail.is_some() || contents.damage.is_some(),
    })
}

/// The sessions of `all` descending from `root`, oldest first.
fn descendants(root: &Recorded, all: Vec<Recorded>) -> Vec<Recorded> {
    let parents: HashMap<Uuid, Uuid> = all
        .iter()
        .filter_map(|r| Some((r.header.session_id, r.header.parent.as_ref()?.session_id)))
        .collect();
    let root_id = root.header.session_id;
    let mut found: Vec<Recorded> = all
        .into_iter()
        .filter(|r| {
            let mut at = r.header.session_id;
            // The depth bound guards against a cycle of parent links in
            // damaged or hand-made logs.
            for _ in 0..=parents.len() {
                match parents.get(&at) {
                    Some(parent) if *parent == root_id => return true,
                    Some(parent) => at = *parent,
                    None => return false,
                }
            }
            false
        })
        .collect();
    found.sort_by_key(|r| r.header.created_at);
    found
}

/// A change to the Pod's settings before the replay starts: what a change
/// to pod itself would do (a reminder cadence, a compaction threshold).
pub type Tune = Arc<dyn Fn(&mut PodConfig) + Send + Sync>;

/// What the replay changes, to ask "would this session have gone the
/// same?".
#[derive(Clone, Default)]
pub struct WhatIf {
    /// Replay in a copy of this directory instead of the workspace the
    /// first checkpoint holds.
    pub workspace: Option<PathBuf>,
    /// Read this config file (approval rules, budgets, sandbox) instead
    /// of the default one.
    pub config: Option<PathBuf>,
    /// Run these hooks files instead of the hooks the session recorded.
    pub hooks: Vec<PathBuf>,
    /// `mcpServers` files: each server named like a recorded one replaces
    /// it (another command, the env values a log never holds).
    pub mcp_config: Vec<PathBuf>,
    /// A change to the Pod's settings (embedders and tests).
    pub tune: Option<Tune>,
}

/// Where a divergence is: the session (the recorded id), and for a
/// subagent's, the `task` call that started it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Located {
    /// The recorded session it is in.
    pub session: Uuid,
    /// The parent's `task` call, when it is a subagent's session.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub subagent_of: Option<String>,
    /// The divergence.
    #[serde(flatten)]
    pub divergence: Divergence,
}

/// How a replay went.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Report {
    /// The recorded session.
    pub session: Uuid,
    /// Its task: the first line of its first prompt.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// Records compared (the recording's, its subagents' included).
    pub records: usize,
    /// Of those, equal before the first divergence.
    pub same: usize,
    /// Model answers the recording holds (subagents' included).
    pub answers: usize,
    /// Subagent sessions compared.
    pub subagents: usize,
    /// Whether the recording was cut short (a crash, a torn line): the
    /// replay is compared up to its end.
    pub cut: bool,
    /// Records the replay wrote past the end of a cut recording.
    pub beyond: usize,
    /// The first divergence, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub divergence: Option<Located>,
    /// What of the recording's policy the replay did not apply (a replay
    /// runs with at most its scratch workspace writable, no network, and
    /// only the hooks its command line names).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub narrowed: Vec<String>,
}

impl Report {
    /// Whether the replay did what the recording holds.
    pub fn identical(&self) -> bool {
        self.divergence.is_none()
    }
}

#[cfg(test)]
mod tests;
