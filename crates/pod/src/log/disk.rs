//! A full (or failing) disk under the file store pauses a session's
//! appends instead of failing its turn: the writer cuts the partial line
//! off, waits, and writes the record again once there is room, as a fleet
//! waits for its database. Said once per process each way, not once per
//! session: the disk is one thing.

use parking_lot::Mutex;
use std::io;
use std::path::Path;
use std::time::{Duration, Instant};

/// The first wait; each next one doubles, up to [`MAX_WAIT`].
const FIRST_WAIT: Duration = Duration::from_millis(200);
/// The longest wait between two attempts: someone freeing space is not
/// kept waiting long for the sessions to notice.
const MAX_WAIT: Duration = Duration::from_secs(5);

/// Since when this process's session logs cannot be written (the disk is
/// shared by all its sessions).
static PAUSED_SINCE: Mutex<Option<Instant>> = Mutex::new(None);

/// Whether a failed write is the disk's condition, worth waiting out: no
/// space (`ENOSPC`), a quota (`EDQUOT`), or an I/O error (`EIO`: a device
/// or network filesystem that may come back). A failed `fsync` is not
/// asked here: after one, the kernel may have dropped the unwritten pages,
/// so a later one that succeeds proves nothing; it fails the turn.
pub(crate) fn is_waitable(err: &io::Error) -> bool {
    matches!(
        err.kind(),
        io::ErrorKind::StorageFull | io::ErrorKind::QuotaExceeded
    ) || err.raw_os_error() == Some(EIO)
}

/// `EIO` on every Unix pod runs on.
const EIO: i32 = 5;

/// The waits of one append that found the disk full.
pub(crate) struct Waiting {
    next: Duration,
}

impl Waiting {
    /// Starts waiting after `err` writing `path`.
    pub(crate) fn begin(path: &Path, err: &io::Error) -> Self {
        let mut paused = PAUSED_SINCE.lock();
        if paused.is_none() {
            *paused = Some(Instant::now());
            PAUSED.store(true, std::sync::atomic::Ordering::Relaxed);
            tracing::error!(
                path = %path.display(),
                error = %err,
                "cannot write the session log ({err}): sessions pause until it can be written \
                 (free space on its disk); nothing is lost"
            );
        }
        Self { next: FIRST_WAIT }
    }

    /// Waits before the next attempt (with up to a quarter more, so the
    /// sessions of a process do not all try at the same instant).
    pub(crate) async fn wait(&mut self) {
        let jitter = self
            .next
            .mul_f64(f64::from(uuid::Uuid::new_v4().as_u128() as u8) / 1024.0);
        tokio::time::sleep(self.next + jitter).await;
        self.next = (self.next * 2).min(MAX_WAIT);
    }
}

/// An append went through: if the process's logs were paused, they are
/// not any more.
pub(crate) fn written() {
    // Checked without the lock first: this runs on every append.
    if PAUSED.load(std::sync::atomic::Ordering::Relaxed) {
        back();
    }
}

/// Whether [`PAUSED_SINCE`] is set, readable without its lock.
static PAUSED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

fn back() {
    if let Some(since) = PAUSED_SINCE.lock().take() {
        PAUSED.store(false, std::sync::atomic::Ordering::Relaxed);
        tracing::warn!(
            after_secs = since.elapsed().as_secs_f64(),
            "the session log can be written again after {:.1}s; sessions continue",
            since.elapsed().as_secs_f64()
        );
    }
}
