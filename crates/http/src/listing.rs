//! One reader of the session list, shared by every `/api/events` stream
//! (issue 31).
//!
//! Each stream used to list the store every second on its own: summaries
//! come from a cache, but a pass still stats every session and serializes
//! every row (1,000 sessions: about 2 % of a core per stream, every
//! dashboard tab one stream). Now the first stream starts the listing: a
//! task that makes that pass once a second and publishes a [`Board`]: each
//! row's JSON with the version at which it last changed, and the
//! approvals, likewise. Each stream sends what changed since the version
//! it last sent, and `removed` for the rows it sent that are gone; a
//! stream that falls behind sends the latest board, nothing in between, so
//! nothing waits in memory for it. The task ends when the last stream
//! leaves (at once: the stream tells it when its connection drops it), or
//! the server stops.

use crate::state::{logged_questions, with_live, Row, Shared};
use crate::tail::Counted;
use parking_lot::Mutex;
use pod::CancellationToken;
use serde_json::json;
use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;
use uuid::Uuid;

/// How often the list is read.
const POLL: Duration = Duration::from_secs(1);

/// The shared reader of the session list.
#[derive(Clone, Default)]
pub struct Listing {
    // The board's sender while the task runs. A stream's subscription and
    // the task's end both hold it, so a stream never joins a task that is
    // ending; short sections, never held across an await.
    board: Arc<Mutex<Option<Running>>>,
    // The task while it runs (0 or 1), and the streams open: for `GET
    // /api/server`, and the tests that check it ends with its last stream.
    readers: Arc<AtomicUsize>,
    watchers: Arc<AtomicUsize>,
}

/// The running task's board and what ends it.
struct Running {
    sender: watch::Sender<Arc<Board>>,
    stop: CancellationToken,
}

/// The list as its streams send it.
#[derive(Default)]
pub struct Board {
    /// False until the first pass is done.
    pub ready: bool,
    /// The latest version of anything on the board.
    pub version: u64,
    /// Every session's row, most recently updated first.
    pub rows: Vec<BoardRow>,
    /// The ids of `rows`.
    pub ids: HashSet<Uuid>,
    /// The `approvals` event's data and the version it changed at.
    pub approvals: (u64, Arc<str>),
}

/// One session's row.
pub struct BoardRow {
    /// The session.
    pub id: Uuid,
    /// The version at which its row last changed.
    pub version: u64,
    /// The `session` event's data.
    pub data: Arc<str>,
}

impl Listing {
    /// The board, starting the task if no stream reads it yet.
    pub fn subscribe(&self, app: &Shared) -> watch::Receiver<Arc<Board>> {
        let mut board = self.board.lock();
        if let Some(running) = board.as_ref() {
            return running.sender.subscribe();
        }
        let (sender, receiver) = watch::channel(Arc::new(Board::default()));
        let stop = CancellationToken::new();
        *board = Some(Running {
            sender: sender.clone(),
            stop: stop.clone(),
        });
        let counted = Counted::new(&self.readers);
        tokio::spawn(run(app.clone(), self.clone(), sender, stop, counted));
        receiver
    }

    /// Counts a stream of the list while the result lives.
    pub fn watcher(&self) -> Counted {
        Counted::new(&self.watchers)
    }

    /// Says a stream left (its receiver dropped): the task ends now if it
    /// was the last.
    pub fn release(&self) {
        let mut board = self.board.lock();
        if board
            .as_ref()
            .is_some_and(|running| running.sender.receiver_count() == 0)
        {
            if let Some(running) = board.take() {
                running.stop.cancel();
            }
        }
    }

    /// Readers of the list running (0 or 1).
    pub fn readers(&self) -> usize {
        self.readers.load(Ordering::Relaxed)
    }

    /// Streams of the list open.
    pub fn watchers(&self) -> usize {
        self.watchers.load(Ordering::Relaxed)
    }

    /// Ends the task if no stream reads the board, or `always`.
    fn end(&self, sender: &watch::Sender<Arc<Board>>, always: bool) -> bool {
        let mut board = self.board.lock();
        if !always && sender.receiver_count() > 0 {
            return false;
        }
        if board
            .as_ref()
            .is_some_and(|running| running.sender.same_channel(sender))
        {
            *board = None;
        }
        true
    }
}

/// The rows and approvals as last read, with their versions.
#[derive(Default)]
struct Reader {
    version: u64,
    rows: HashMap<Uuid, (u64, Arc<str>)>,
    approvals: Option<(Vec<Uuid>, u64, Arc<str>)>,
}

/// The listing's task: a pass every [`POLL`] until no stream reads the
/// board (`stop`) or the server stops. `_running` counts it while it runs.
async fn run(
    app: Shared,
    listing: Listing,
    sender: watch::Sender<Arc<Board>>,
    stop: CancellationToken,
    _running: Counted,
) {
    let mut reader = Reader::default();
    loop {
        if listing.end(&sender, false) {
            return;
        }
        let board = tokio::select! {
            board = reader.pass(&app) => board,
            _ = stop.cancelled() => return,
        };
        if let Some(board) = board {
            sender.send_replace(Arc::new(board));
        }
        tokio::select! {
            _ = tokio::time::sleep(POLL) => {}
            _ = stop.cancelled() => return,
            _ = app.stop.cancelled() => {
                listing.end(&sender, true);
                return;
            }
        }
    }
}

impl Reader {
    /// One pass: the new board if anything changed (or it is the first).
    async fn pass(&mut self, app: &Shared) -> Option<Board> {
        let before = self.version;
        let first = self.approvals.is_none();
        let entries = match app.summaries.all(app.store.as_ref()).await {
            Ok(entries) => Some(entries),
            Err(err) => {
                tracing::warn!(err = %format!("{err:#}"), "cannot list sessions");
                None
            }
        };
        let mut rows = Vec::new();
        if let Some(entries) = &entries {
            let mut seen = HashMap::with_capacity(entries.len());
            for entry in entries {
                let id = entry.summary.id;
                let row = Row {
                    live: app.runner.is_live(id),
                    summary: entry.summary.clone(),
                };
                let text = serde_json::to_string(&row).unwrap_or_default();
                let (version, data) = match self.rows.remove(&id) {
                    Some((version, data)) if *data == *text => (version, data),
                    _ => {
                        self.version += 1;
                        (self.version, Arc::from(text))
                    }
                };
                seen.insert(id, (version, Arc::clone(&data)));
                rows.push(BoardRow { id, version, data });
            }
            // What is left was removed.
            if !self.rows.is_empty() {
                self.version += 1;
            }
            self.rows = seen;
        } else {
            // The list could not be read: the rows stay as they were.
            rows = self
                .rows
                .iter()
                .map(|(id, (version, data))| BoardRow {
                    id: *id,
                    version: *version,
                    data: Arc::clone(data),
                })
                .collect();
        }
        let logged = entries.as_deref().map(logged_questions).unwrap_or_default();
        let waiting = with_live(logged, app.runner.approvals(), None);
        let ids: Vec<Uuid> = waiting.iter().map(|a| a.id).collect();
        if self.approvals.as_ref().map(|(known, ..)| known) != Some(&ids) {
            self.version += 1;
            let data = json!({ "approvals": waiting }).to_string();
            self.approvals = Some((ids, self.version, data.into()));
        }
        if self.version == before && !first {
            return None;
        }
        let approvals = self
            .approvals
            .as_ref()
            .map(|(_, version, data)| (*version, Arc::clone(data)))
            .unwrap_or_default();
        Some(Board {
            ready: true,
            version: self.version,
            ids: rows.iter().map(|row| row.id).collect(),
            rows,
            approvals,
        })
    }
}
