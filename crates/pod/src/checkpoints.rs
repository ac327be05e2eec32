//! Checkpoints as an interceptor: the workspace's files are snapshotted
//! ([`pod_checkpoint`]) before and after each call that may change them,
//! and each snapshot is a [`CheckpointRecord`] in the log with its call,
//! so `pod diff` and `pod rewind` can tell what each step changed.
//!
//! It sits after the approval interceptor: a call that does not run gets
//! no checkpoint. Only a root session takes them: a subagent's changes fall
//! between its `task` call's two checkpoints in its parent. A failure (no
//! `git`, a full disk) is said once and turns checkpoints off for the
//! rest of the Pod's life; the calls run regardless.

use crate::events::{EventBus, PodEvent};
use crate::log::{CheckpointPhase, CheckpointRecord, LogRecord};
use crate::store::LogWriter;
use async_trait::async_trait;
use chrono::Utc;

use pod_worker::{Interceptor, PostToolAction, PreToolAction, ToolCallInfo, ToolResultInfo};

impl Drop for Checkpoints {
    fn drop(&mut self) {
        // A snapshot still being taken dies with the Pod (its git is
        // killed; the index lock it leaves is cleared by the next one).
        if let Some(warming) = self.warming.take() {
            warming.abort();
        }
    }
}

/// The call id and tool of the checkpoint a rewind gives its fork: the
/// files it was given, not a step of the session.
pub const REWIND: &str = "rewind";

/// Where the shadow object store lives in pod's home.
pub const STORE_DIR: &str = "checkpoints.git";

/// The index file of a session's checkpoints, in its directory.
pub const INDEX_FILE: &str = "checkpoint.index";

/// Whether a call of `tool` may change the workspace: the file tools,
/// `bash`, a subagent, and any MCP tool (`SERVER__TOOL`).
pub fn may_change_files(tool: &str) -> bool {
    matches!(tool, "write_file" | "edit_file" | "bash" | "task") || tool.contains("__")
}

/// Takes the checkpoints.
pub(crate) struct Checkpoints {
    shadow: std::sync::Arc<Shadow>,
    log: LogWriter,
    events: EventBus,
    off: bool,
    // The session's index made ready while its first request is out
    // (`Shadow::warm`): on a large workspace a first snapshot hashes
    // every file, seconds that would otherwise fall on the first call.
    warming: Option<tokio::task::JoinHandle<()>>,
    warmed: bool,
    // The tree of the session's first checkpoint, once there is one:
    // what its work started from (the verifier's grader is shown the diff).
    first: FirstTree,
}

/// The tree of a session's first checkpoint, shared by whoever needs to
/// know what the session started from.
pub(crate) type FirstTree = std::sync::Arc<std::sync::OnceLock<String>>;

impl Checkpoints {
    pub(crate) fn new(shadow: Shadow, log: LogWriter, events: EventBus, first: FirstTree) -> Self {
        Self {
            shadow: std::sync::Arc::new(shadow),
            log,
            events,
            off: false,
            warming: None,
            warmed: false,
            first,
        }
    }

    /// Makes the session's index ready in the background, when its first
    /// request is about to go out (a prompt refused before that costs
    /// nothing): a copy of the workspace's seed when another session left
    /// one, else a first snapshot.
    fn warm(&mut self) {
        if self.warming.as_ref().is_some_and(|task| task.is_finished()) {
            self.warming = None;
        }
        if self.warmed || self.off {
            return;
        }
        self.warmed = true;
        let shadow = self.shadow.clone();
        // Boxed: the handle is kept until a call may change files, which
        // in a read-only session is never, and a finished task's memory is
        // held as long as its handle; boxed, what is held is a pointer's
        // worth, not the whole warm-up's state (2.7 KB).
        self.warming = Some(tokio::spawn(Box::pin(async move {
            // A failure shows again, and is said, at the first call.
            match shadow.warm().await {
                Ok(how) => tracing::debug!(?how, "workspace index ready"),
                Err(err) => tracing::debug!(%err, "first workspace snapshot"),
            }
        })));
    }

    async fn take(&mut self, call_id: &str, tool: &str, phase: CheckpointPhase) {
        if self.off || !may_change_files(tool) {
            return;
        }
        // One snapshot at a time: they share the session's index.
        if let Some(warming) = self.warming.take() {
            let _ = warming.await;
        }
        let record = match self.shadow.snapshot().await {
            Ok(tree) => CheckpointRecord {
                tree: {
                    let _ = self.first.set(tree.clone());
                    tree
                },
                call_id: call_id.to_string(),
                tool: tool.to_string(),
                phase,
                skipped: self.shadow.skipped().await,
                unindexed: self.shadow.unindexed().await,
                at: Utc::now(),
            },
            Err(err) => return self.give_up(&err.to_string()),
        };
        if let Err(err) = self.log.append(&LogRecord::Checkpoint(record), false).await {
            self.give_up(&pod_llm::error_chain(&err));
        }
    }

    fn give_up(&mut self, why: &str) {
        tracing::warn!(error = %why, "checkpoints off for this session");
        self.events.send(PodEvent::Error {
            message: format!("checkpoints are off for the rest of this run: {why}"),
        });
        self.off = true;
    }
}

#[async_trait]
impl Interceptor for Checkpoints {
    async fn pre_llm_request(
        &mut self,
        _request: &mut std::sync::Arc<Vec<pod_llm::Item>>,
    ) -> pod_worker::PreRequestAction {
        self.warm();
        pod_worker::PreRequestAction::Continue
    }

    async fn pre_tool_call(&mut self, call: &mut ToolCallInfo) -> PreToolAction {
        self.take(&call.call_id, &call.name, CheckpointPhase::Before)
            .await;
        PreToolAction::Continue
    }

    async fn post_tool_call(&mut self, result: &mut ToolResultInfo) -> PostToolAction {
        self.take(&result.call_id, &result.name, CheckpointPhase::After)
            .await;
        PostToolAction::Continue
    }
}

pub use pod_checkpoint::{worktree, Change, CheckpointError, Shadow, SIZE_LIMIT};

/// Makes a worktree of the repository `workspace` is in, at `path` on
/// branch `branch` ([`worktree::add`]): nothing the repository configures
/// runs, and each git it takes may write only in the repository's git
/// directory and the new worktree (the kernel's sandbox, where it has one).
pub async fn make_worktree(
    home: &crate::PodHome,
    workspace: &std::path::Path,
    path: &std::path::Path,
    branch: &str,
) -> Result<worktree::Worktree, CheckpointError> {
    let store = home.path().join(STORE_DIR);
    worktree::add(workspace, path, branch, &store, &confine_git).await
}

/// The confinement of pod's own git in a repository: writes beneath
/// `writable` only, no network.
fn confine_git(
    command: &mut tokio::process::Command,
    writable: &[std::path::PathBuf],
) -> std::io::Result<()> {
    pod_tools::Sandbox::writing_only(writable)
        .confine(command)
        .map_err(std::io::Error::other)
}

/// The checkpoints of session `id` (in pod's `home`) of `workspace`.
pub fn shadow(home: &crate::PodHome, id: uuid::Uuid, workspace: std::path::PathBuf) -> Shadow {
    Shadow::new(
        home.path().join(STORE_DIR),
        home.session_dir(id).join(INDEX_FILE),
        workspace,
    )
}

/// A session's checkpoints in log order, each with the number of history
/// items before it (the numbers `pod show` and `pod fork --at` use).
#[derive(Debug, Default)]
pub struct Timeline {
    points: Vec<(usize, CheckpointRecord)>,
}

impl Timeline {
    /// The checkpoints of `records`.
    pub fn of(records: &[LogRecord]) -> Self {
        let mut items = 0;
        let mut points = Vec::new();
        for record in records {
            match record {
                LogRecord::Item(_) => items += 1,
                LogRecord::Checkpoint(checkpoint) => points.push((items, checkpoint.clone())),
                _ => {}
            }
        }
        Self { points }
    }

    /// The files left out of any snapshot for their size.
    pub fn skipped(&self) -> Vec<String> {
        let mut all: Vec<String> = self
            .points
            .iter()
            .flat_map(|(_, c)| c.skipped.iter().cloned())
            .collect();
        all.sort();
        all.dedup();
        all
    }

    /// The paths left out of any snapshot because git cannot store their
    /// names.
    pub fn unindexed(&self) -> Vec<String> {
        let mut all: Vec<String> = self
            .points
            .iter()
            .flat_map(|(_, c)| c.unindexed.iter().cloned())
            .collect();
        all.sort();
        all.dedup();
        all
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.points.is_empty()
    }

    /// The workspace's files as they were after the first `n` items: the
    /// snapshot before the first call that ran after them, or, when none
    /// did, the one after the last call. `None` without checkpoints.
    pub fn after_items(&self, n: usize) -> Option<&str> {
        self.points
            .iter()
            .find(|(items, c)| *items >= n && c.phase == CheckpointPhase::Before)
            .or_else(|| self.last_after())
            .map(|(_, c)| c.tree.as_str())
    }

    /// The files as the session's last call left them; `None` when the
    /// last checkpoint is a call's "before" (the process died while it
    /// ran: what it changed is not known) or there are none.
    pub fn last_state(&self) -> Option<&str> {
        match self.points.last() {
            Some((_, c)) if c.phase == CheckpointPhase::After => Some(c.tree.as_str()),
            _ => None,
        }
    }

    fn last_after(&self) -> Option<&(usize, CheckpointRecord)> {
        self.points
            .iter()
            .rev()
            .find(|(_, c)| c.phase == CheckpointPhase::After)
    }

    /// Where the files changed between two of the session's calls, after
    /// the first `n` items, by someone else: each call's "after" and the
    /// next call's "before" that differ, as (after, before) trees.
    pub fn gaps_after(&self, n: usize) -> Vec<(&str, &str)> {
        self.points
            .windows(2)
            .filter(|pair| pair[1].0 >= n)
            .filter(|pair| {
                pair[0].1.phase == CheckpointPhase::After
                    && pair[1].1.phase == CheckpointPhase::Before
                    && pair[0].1.tree != pair[1].1.tree
            })
            .map(|pair| (pair[0].1.tree.as_str(), pair[1].1.tree.as_str()))
            .collect()
    }
}

/// Forks session `source` at `at` items (as [`crate::fork_session`]) for a
/// workspace whose files are now `tree` (in `workspace`, or the source's
/// when `None`): the fork's log ends with that checkpoint, so its own
/// diffs and rewinds start from the files it was given.
pub async fn fork_with_files(
    store: &dyn crate::SessionStore,
    source: uuid::Uuid,
    at: usize,
    tree: &str,
    workspace: Option<std::path::PathBuf>,
) -> Result<uuid::Uuid, crate::PodError> {
    let id = crate::fork_session_in(store, source, Some(at), workspace).await?;
    let opened = store.open(id, crate::Durability::Turn).await?;
    let record = CheckpointRecord {
        call_id: REWIND.into(),
        tool: REWIND.into(),
        phase: CheckpointPhase::After,
        tree: tree.to_string(),
        skipped: Vec::new(),
        unindexed: Vec::new(),
        at: Utc::now(),
    };
    opened
        .writer
        .append(&LogRecord::Checkpoint(record), true)
        .await?;
    opened.writer.shutdown().await?;
    Ok(id)
}
