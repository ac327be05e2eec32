//! One reader per watched session, shared by all its watchers (issue 31).
//!
//! The first watcher of a session starts its tail: a task that reads the
//! records the session gains (`read_since` from where it stopped: in a log
//! file, only the bytes appended since, a line still being written left
//! for the next read),
//! keeps what a watcher is sent besides records (the plan and the log's
//! open question, followed record by record, never replayed from the
//! whole log; the status; the approvals) and publishes each change as a
//! [`Frame`] on one broadcast channel, which every watcher of the session
//! reads. Its watchers cost the store one reader however many they are,
//! and the tail ends when the last of them leaves (at once: the watcher's
//! stream tells it when the connection drops it), or the server stops, or
//! the store fails (then every stream of the session ends, as each used to
//! on its own; browsers reconnect).
//!
//! Rejected: a read per watcher (what each stream did before: 50 tabs on
//! one session were 50 readers of the same bytes), and watching the file
//! for changes (inotify): Linux only, blind to the PostgreSQL store and
//! to another machine's writes, and a poll of one stat per session is
//! already cheap once there is one reader.
//!
//! It polls the store's stat every [`POLL`] and reads only when the log
//! may have changed: when the stat changed, or while the log was written
//! too lately for an equal stat to prove that nothing followed (a file's
//! modification time moves in clock ticks: see [`SAME_TICK`]). A finished
//! session costs one stat per poll.
//!
//! A watcher that falls [`FRAMES`] frames behind is not waited for: its
//! receiver lags, and it catches up from the store by sequence number (as
//! a reconnecting one does). The tail keeps no record once published.

use crate::runner::{Delta, PendingApproval};
use crate::state::{with_live, Shared as Server};
use chrono::{DateTime, Utc};
use parking_lot::Mutex;
use pod::log::{LogCursor, LogRecord};
use pod::questions::FollowedQuestions;
use pod::replay::TodoReplay;
use pod::{CancellationToken, PodError, SessionStat, TodoItem};
use serde_json::json;
use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::broadcast;
use uuid::Uuid;

/// How often a tail looks at the store: a record reaches watchers at most
/// this late (as `pod show --follow`).
const POLL: Duration = Duration::from_millis(250);

/// How long after a log's last write an unchanged stat still does not
/// prove it was not written again: records written within one tick of the
/// file's clock leave its modification time equal (a few milliseconds on
/// ext4; the margin also covers file systems with coarser times and the
/// clock's own coarseness). The PostgreSQL store's time is its last
/// record's, which every append moves.
const SAME_TICK: Duration = Duration::from_secs(2);

/// Frames a tail keeps for its slowest watcher: a poll's records and the
/// text streamed meanwhile fit many times over. A watcher further behind
/// reads from the store instead, so this (times a frame's size) is the
/// most a watched session holds, whatever its watchers do.
const FRAMES: usize = 256;

/// The tails of the sessions being watched.
#[derive(Clone, Default)]
pub struct Tails {
    // Short critical sections (a lookup, an insert, a removal), never held
    // across an await. A tail's removal and a watcher's subscription both
    // hold it, so a watcher never joins a tail that is ending.
    tails: Arc<Mutex<HashMap<Uuid, Arc<Tail>>>>,
    // Tails' tasks running, and session streams open: what watching
    // costs, for `GET /api/server` (and the tests that check a tail ends
    // with its last watcher).
    readers: Arc<AtomicUsize>,
    watchers: Arc<AtomicUsize>,
    // Times a watcher fell too far behind and caught up from the store.
    resyncs: Arc<AtomicUsize>,
}

/// Counts one of something (a reader, a watcher) while it lives.
pub struct Counted(Arc<AtomicUsize>);

impl Counted {
    pub fn new(count: &Arc<AtomicUsize>) -> Self {
        count.fetch_add(1, Ordering::Relaxed);
        Self(Arc::clone(count))
    }
}

impl Drop for Counted {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

/// One event for a session's watchers, serialized once for all of them.
#[derive(Clone, Debug)]
pub struct Frame {
    /// The event's name (`record`, `todos`, `status`, `approvals`, `delta`).
    pub name: &'static str,
    /// A record's sequence number (its event id); `None` for state.
    pub seq: Option<usize>,
    /// The event's data (JSON).
    pub data: Arc<str>,
}

impl Frame {
    fn new(name: &'static str, data: &serde_json::Value) -> Self {
        Self {
            name,
            seq: None,
            data: data.to_string().into(),
        }
    }

    /// Record `seq` of the log.
    pub fn record(seq: usize, record: &LogRecord) -> Self {
        Self {
            seq: Some(seq),
            ..Self::new("record", &json!({ "seq": seq, "record": record }))
        }
    }

    fn todos(todos: &[TodoItem]) -> Self {
        Self::new("todos", &json!({ "todos": todos }))
    }

    fn delta(delta: &Delta) -> Self {
        Self::new("delta", &json!({ "kind": delta.kind, "text": delta.text }))
    }
}

/// A watcher's start: where the tail is, the state to send after the
/// records up to there, and the frames that follow.
pub struct Subscription {
    /// The last sequence number the tail published.
    pub seq: usize,
    /// The plan, and the status and approvals once known, as of `seq`.
    pub state: Vec<Frame>,
    /// Every frame published after `seq`.
    pub frames: broadcast::Receiver<Frame>,
    /// Every record up to `seq`, when this subscription started the tail
    /// (read anyway: the watcher need not read them again).
    pub records: Option<Vec<LogRecord>>,
}

struct Tail {
    // What a new watcher starts from, with the channel's sender: taken and
    // changed under one lock, so a watcher's start and its receiver are
    // taken between two publications and it gets every frame once.
    shared: Mutex<Shared>,
    // Cancelled when the tail is removed: its task ends at once.
    stop: CancellationToken,
}

struct Shared {
    seq: usize,
    todos: Frame,
    status: Option<Frame>,
    approvals: Option<Frame>,
    frames: broadcast::Sender<Frame>,
}

impl Tail {
    fn subscribe(&self, records: Option<Vec<LogRecord>>) -> Subscription {
        let shared = self.shared.lock();
        let state = std::iter::once(&shared.todos)
            .chain(&shared.status)
            .chain(&shared.approvals)
            .cloned()
            .collect();
        Subscription {
            seq: shared.seq,
            state,
            frames: shared.frames.subscribe(),
            records,
        }
    }

    /// Publishes `frames` (records, then the plan if it changed) in order.
    fn publish_records(&self, frames: Vec<Frame>, todos: Option<Frame>) {
        let mut shared = self.shared.lock();
        for frame in frames {
            shared.seq = frame.seq.unwrap_or(shared.seq);
            // No receiver is not an error: the last watcher that left
            // ends the tail (`Tails::release`), its next poll at the latest.
            let _ = shared.frames.send(frame);
        }
        if let Some(todos) = todos {
            shared.todos = todos.clone();
            let _ = shared.frames.send(todos);
        }
    }

    /// Publishes a piece of streamed text (not kept: a new watcher gets
    /// the record it ends up in).
    fn publish_delta(&self, delta: &Delta) {
        let _ = self.shared.lock().frames.send(Frame::delta(delta));
    }

    /// Publishes a state (`slot`: the status, or the approvals), kept for
    /// new watchers.
    fn publish_state(&self, frame: Frame, slot: fn(&mut Shared) -> &mut Option<Frame>) {
        let mut shared = self.shared.lock();
        *slot(&mut shared) = Some(frame.clone());
        let _ = shared.frames.send(frame);
    }

    fn watched(&self) -> bool {
        self.shared.lock().frames.receiver_count() > 0
    }
}

impl Tails {
    /// Joins session `id`'s tail, starting it if nobody watches the
    /// session yet (which reads its log once).
    pub async fn subscribe(&self, app: &Server, id: Uuid) -> Result<Subscription, PodError> {
        if let Some(tail) = self.tails.lock().get(&id) {
            return Ok(tail.subscribe(None));
        }
        let (tail, reader, records) = start(app, id).await?;
        let mut tails = self.tails.lock();
        // Another watcher started one meanwhile: join it, drop this one.
        if let Some(tail) = tails.get(&id) {
            return Ok(tail.subscribe(None));
        }
        let tail = Arc::new(tail);
        tails.insert(id, Arc::clone(&tail));
        let subscription = tail.subscribe(Some(records));
        drop(tails);
        let running = Counted::new(&self.readers);
        tokio::spawn(run(app.clone(), self.clone(), tail, reader, running));
        Ok(subscription)
    }

    /// Counts a watcher of a session while the result lives.
    pub fn watcher(&self) -> Counted {
        Counted::new(&self.watchers)
    }

    /// Says a watcher of session `id` left (its receiver dropped): the
    /// tail ends now if it was the last.
    pub fn release(&self, id: Uuid) {
        let mut tails = self.tails.lock();
        if tails.get(&id).is_some_and(|tail| !tail.watched()) {
            if let Some(tail) = tails.remove(&id) {
                tail.stop.cancel();
            }
        }
    }

    /// Tails running (one per watched session).
    pub fn readers(&self) -> usize {
        self.readers.load(Ordering::Relaxed)
    }

    /// Session streams open.
    pub fn watchers(&self) -> usize {
        self.watchers.load(Ordering::Relaxed)
    }

    /// Counts a watcher that fell behind and catches up from the store.
    pub fn resynced(&self) {
        self.resyncs.fetch_add(1, Ordering::Relaxed);
    }

    /// Times a watcher fell behind and caught up from the store.
    pub fn resyncs(&self) -> usize {
        self.resyncs.load(Ordering::Relaxed)
    }

    /// Removes `tail` (session `id`'s) if nobody watches it, or `always`.
    fn end(&self, id: Uuid, tail: &Arc<Tail>, always: bool) -> bool {
        let mut tails = self.tails.lock();
        if !always && tail.watched() {
            return false;
        }
        if tails.get(&id).is_some_and(|t| Arc::ptr_eq(t, tail)) {
            tails.remove(&id);
        }
        tail.stop.cancel();
        true
    }
}

/// What the tail's task knows besides what it published.
struct Reader {
    id: Uuid,
    // Where the log was read to: the last record's sequence number is
    // `cursor.records`.
    cursor: LogCursor,
    plan: TodoReplay,
    // The stat the last read was made under, and when that read started.
    read_stat: SessionStat,
    read_at: DateTime<Utc>,
    deltas: Option<broadcast::Receiver<Delta>>,
    status: Option<serde_json::Value>,
    // The log's questions, as of its records read.
    questions: FollowedQuestions,
    // The questions last published, and whether each was parked: a
    // question asked while its worker still holds the session is parked a
    // moment later, and watchers are told.
    approvals: Option<Vec<(Uuid, bool)>>,
}

/// Reads session `id` for a new tail: the tail (with the plan as of its
/// records), its reader, and the records.
async fn start(app: &Server, id: Uuid) -> Result<(Tail, Reader, Vec<LogRecord>), PodError> {
    // Subscribed before anything is published: a watcher that has seen
    // its first event misses none of the text streamed after it.
    let deltas = app.runner.deltas();
    // The stat before the read: whatever is written after it moves it.
    let read_stat = app.store.stat(id).await?;
    let read_at = Utc::now();
    let contents = app.store.read(id).await?;
    let cursor = contents.cursor();
    let records = contents.records;
    let mut plan = TodoReplay::default();
    let mut questions = FollowedQuestions::default();
    for record in &records {
        plan.observe(record);
        questions.observe(record);
    }
    let tail = Tail {
        shared: Mutex::new(Shared {
            seq: records.len(),
            todos: Frame::todos(&plan.todos()),
            status: None,
            approvals: None,
            frames: broadcast::channel(FRAMES).0,
        }),
        stop: CancellationToken::new(),
    };
    let reader = Reader {
        id,
        cursor,
        plan,
        read_stat,
        read_at,
        deltas: Some(deltas),
        status: None,
        questions,
        approvals: None,
    };
    Ok((tail, reader, records))
}

/// The tail's task: a poll, then text streamed meanwhile until the next,
/// until nobody watches, the server stops or the store fails. `_running`
/// counts it while it runs.
async fn run(app: Server, tails: Tails, tail: Arc<Tail>, mut reader: Reader, _running: Counted) {
    let id = reader.id;
    loop {
        if tails.end(id, &tail, false) {
            return;
        }
        let polled = tokio::select! {
            polled = reader.poll(&app, &tail) => polled,
            _ = tail.stop.cancelled() => return,
        };
        if let Err(err) = polled {
            tracing::debug!(session = %id, err = %pod_llm::error_chain(&err), "session tail ended");
            tails.end(id, &tail, true);
            return;
        }
        let pause = tokio::time::sleep(POLL);
        tokio::pin!(pause);
        loop {
            tokio::select! {
                _ = &mut pause => break,
                _ = tail.stop.cancelled() => return,
                _ = app.stop.cancelled() => {
                    tails.end(id, &tail, true);
                    return;
                }
                delta = next_delta(&mut reader.deltas) => match delta {
                    Ok(delta) if delta.session_id == id && !delta.stale() => {
                        tail.publish_delta(&delta)
                    }
                    Ok(_) | Err(broadcast::error::RecvError::Lagged(_)) => {}
                    // The runner is gone with the server; polling goes on.
                    Err(broadcast::error::RecvError::Closed) => reader.deltas = None,
                },
            }
        }
    }
}

impl Reader {
    async fn poll(&mut self, app: &Server, tail: &Tail) -> Result<(), PodError> {
        // Who holds it first, then the records: once it is not running,
        // everything it committed is in the records read next, and they
        // are published before the status that says it stopped.
        let stat = app.store.stat(self.id).await?;
        let live = app.runner.is_live(self.id);
        let read = self.may_have_changed(&stat);
        if read {
            let read_at = Utc::now();
            let (new, cursor) = app.store.read_since(self.id, self.cursor).await?;
            self.cursor = cursor;
            self.read_stat = stat.clone();
            self.read_at = read_at;
            if !new.is_empty() {
                self.publish_records(tail, new);
            }
        }
        let now = json!({
            "holder": stat.holder,
            "queued": stat.queued,
            "live": live,
        });
        if self.status.as_ref() != Some(&now) {
            tail.publish_state(Frame::new("status", &now), |s| &mut s.status);
            self.status = Some(now);
        }
        // The question the log holds, as the session's summary says it
        // (its first open one; parked unless a process holds the session
        // and asks it itself), from the records read: no read of its own.
        let logged = self
            .questions
            .open()
            .first()
            .map(|question| PendingApproval {
                parked: stat.holder.is_none(),
                ..PendingApproval::parked(self.id, question)
            });
        let waiting = with_live(
            logged.into_iter().collect(),
            app.runner.approvals(),
            Some(self.id),
        );
        let ids: Vec<(Uuid, bool)> = waiting.iter().map(|a| (a.id, a.parked)).collect();
        if self.approvals.as_ref() != Some(&ids) {
            let frame = Frame::new("approvals", &json!({ "approvals": waiting }));
            tail.publish_state(frame, |s| &mut s.approvals);
            self.approvals = Some(ids);
        }
        Ok(())
    }

    /// Whether the log may hold records not read yet: its stat changed, or
    /// it was written too shortly before the last read for an equal stat
    /// to say nothing followed.
    fn may_have_changed(&self, stat: &SessionStat) -> bool {
        let margin = chrono::Duration::from_std(SAME_TICK).unwrap_or_default();
        *stat != self.read_stat || stat.updated_at + margin > self.read_at
    }

    fn publish_records(&mut self, tail: &Tail, new: Vec<LogRecord>) {
        // Text streamed before these records goes out before them.
        while let Some(Ok(delta)) = self.deltas.as_mut().map(|d| d.try_recv()) {
            if delta.session_id == self.id && !delta.stale() {
                tail.publish_delta(&delta);
            }
        }
        let mut changes_plan = false;
        let mut frames = Vec::with_capacity(new.len());
        let mut seq = self.cursor.records.saturating_sub(new.len());
        for record in &new {
            changes_plan |= matches!(record, LogRecord::Compaction(_))
                || matches!(record, LogRecord::Item(item) if matches!(item.kind, pod::ItemKind::ToolResult { .. }));
            self.plan.observe(record);
            self.questions.observe(record);
            seq += 1;
            frames.push(Frame::record(seq, record));
        }
        let todos = changes_plan.then(|| Frame::todos(&self.plan.todos()));
        tail.publish_records(frames, todos);
    }
}

/// The next streamed piece, or never once the runner's channel closed.
async fn next_delta(
    deltas: &mut Option<broadcast::Receiver<Delta>>,
) -> Result<Delta, broadcast::error::RecvError> {
    match deltas {
        Some(receiver) => receiver.recv().await,
        None => std::future::pending().await,
    }
}
