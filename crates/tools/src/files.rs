//! The open files this process's tool calls may hold at once.
//!
//! A worker running thousands of sessions reckons its open-file limit
//! once: so many descriptors for itself, so many for its sessions' model
//! connections, and a share for the tools its sessions run. Without a
//! gate, a burst of commands past that share would fail with `EMFILE` and
//! the model would read "cannot start bash". With one, a call past the
//! share waits for the calls before it to finish and runs: admission
//! applied to tools.
//!
//! The gate is the process's, like the descriptor table it guards: a
//! worker sets it once, before its sessions run ([`limit`]); a process
//! that never does (the CLI, a single session) has none and its tools
//! never wait here.

use std::sync::OnceLock;
use tokio::sync::{Semaphore, SemaphorePermit};

/// Descriptors a `bash` call holds at its peak: both ends of its stdout and
/// stderr pipes while it spawns, the spawn's own error pipe, stdin's
/// `/dev/null`, the sandbox's ruleset and the child's handle.
pub const BASH_FILES: u32 = 8;

/// Descriptors `list_dir`, `glob` and `grep` hold at their peak: the
/// walk's open directories (it keeps at most ten), an ignore file being
/// read and the file being searched.
pub const WALK_FILES: u32 = 12;

/// Descriptors `read_file`, `write_file` and `edit_file` hold: the file,
/// and a directory while a parent is created.
pub const FILE_FILES: u32 = 2;

struct Gate {
    files: Semaphore,
    total: u32,
}

static GATE: OnceLock<Gate> = OnceLock::new();

/// Lets this process's tool calls hold at most `files` descriptors at once.
/// The first call sets the gate for the life of the process; it returns
/// whether this one did (a later one changes nothing).
pub fn limit(files: u32) -> bool {
    let files = files.max(BASH_FILES.max(WALK_FILES));
    GATE.set(Gate {
        files: Semaphore::new(files as usize),
        total: files,
    })
    .is_ok()
}

/// The gate's size, if this process has one.
pub fn limited() -> Option<u32> {
    GATE.get().map(|gate| gate.total)
}

/// Descriptors tool calls hold now (0 without a gate).
pub fn held() -> u32 {
    GATE.get().map_or(0, |gate| {
        let free = u32::try_from(gate.files.available_permits()).unwrap_or(u32::MAX);
        gate.total.saturating_sub(free)
    })
}

/// Waits until `files` descriptors are free for a call and holds them until
/// the returned guard is dropped; at once, holding nothing, without a gate.
pub(crate) async fn hold(files: u32) -> Option<SemaphorePermit<'static>> {
    let gate = GATE.get()?;
    // The semaphore is never closed, so the acquire only ever waits.
    gate.files.acquire_many(files.min(gate.total)).await.ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    // One test: the gate is the process's, set once.
    #[tokio::test]
    async fn calls_past_the_share_wait_for_those_before_them() {
        assert_eq!(held(), 0);
        assert!(hold(BASH_FILES).await.is_none(), "no gate, nothing held");
        assert!(limit(20));
        assert!(!limit(1_000), "set once");
        assert_eq!(limited(), Some(20));

        let first = hold(BASH_FILES).await;
        let second = hold(BASH_FILES).await;
        let file = hold(FILE_FILES).await;
        assert!(first.is_some() && second.is_some() && file.is_some());
        assert_eq!(held(), 18);
        // A third bash would go past 20: it waits until one ends.
        let third = tokio::spawn(async {
            let permit = hold(BASH_FILES).await;
            (permit.is_some(), held())
        });
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(!third.is_finished());
        // In turn: a file tool asked after it waits behind it, though two
        // are free (a stream of small calls never starves a command).
        let after = tokio::spawn(hold(FILE_FILES));
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(!after.is_finished());
        drop((first, file));
        let (got, held_then) = third.await.unwrap();
        assert!(got);
        // `second`, the third bash, and `after`, served in turn.
        assert_eq!(held_then, 18);
        assert!(after.await.unwrap().is_some());
        // More than the whole gate is asked as the whole gate.
        drop(second);
        assert!(hold(1_000).await.is_some());
    }
}
