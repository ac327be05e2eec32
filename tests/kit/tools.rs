//! Small tools for tests: each does one observable thing.

use async_trait::async_trait;
use parking_lot::Mutex;
use pod_worker::{CommittedCall, Tool, ToolContext, ToolOutput, ToolState};
use serde::Deserialize;
use serde_json::{json, Value};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use tokio::sync::Notify;

/// `{"text": …}`.
#[derive(Deserialize)]
pub struct TextArgs {
    /// The text.
    pub text: String,
}

/// Echoes its text; counts its runs.
#[derive(Default, Clone)]
pub struct Echo {
    /// How many calls ran.
    pub runs: Arc<AtomicUsize>,
    /// Whether calls may run beside other concurrency-safe calls.
    pub concurrent: bool,
}

impl Echo {
    /// An echo whose calls run side by side (as a benchmark's would).
    pub fn concurrent() -> Self {
        Self {
            concurrent: true,
            ..Self::default()
        }
    }
}

#[async_trait]
impl Tool for Echo {
    type Args = TextArgs;
    fn name(&self) -> &str {
        "echo"
    }
    fn description(&self) -> String {
        "Echoes its text.".into()
    }
    fn parameters(&self) -> Arc<Value> {
        Arc::new(
            json!({"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}),
        )
    }
    fn concurrency_safe(&self) -> bool {
        self.concurrent
    }
    async fn call(&self, args: TextArgs, _ctx: ToolContext) -> ToolOutput {
        self.runs.fetch_add(1, Ordering::SeqCst);
        ToolOutput::ok(args.text)
    }
}

/// Runs until its call is cancelled; tells the test when it has started.
/// With `stubborn`, it ignores cancellation and must be dropped.
#[derive(Clone)]
pub struct Slow {
    /// Notified when a call starts.
    pub started: Arc<Notify>,
    /// Ignores cancellation (its name is then `stubborn`, else `slow`).
    pub stubborn: bool,
    /// Set when the running call's future is dropped.
    pub dropped: Arc<AtomicBool>,
}

impl Slow {
    /// A `slow` tool, or a `stubborn` one.
    pub fn new(stubborn: bool) -> Self {
        Self {
            started: Arc::new(Notify::new()),
            stubborn,
            dropped: Arc::new(AtomicBool::new(false)),
        }
    }
}

struct SetOnDrop(Arc<AtomicBool>);

impl Drop for SetOnDrop {
    fn drop(&mut self) {
        self.0.store(true, Ordering::SeqCst);
    }
}

#[async_trait]
impl Tool for Slow {
    type Args = Value;
    fn name(&self) -> &str {
        if self.stubborn {
            "stubborn"
        } else {
            "slow"
        }
    }
    fn description(&self) -> String {
        "Runs until cancelled.".into()
    }
    fn parameters(&self) -> Arc<Value> {
        Arc::new(json!({"type": "object"}))
    }
    async fn call(&self, _args: Value, ctx: ToolContext) -> ToolOutput {
        let _guard = SetOnDrop(self.dropped.clone());
        self.started.notify_one();
        if self.stubborn {
            std::future::pending::<()>().await;
        }
        ctx.cancel.cancelled().await;
        ToolOutput::error("slow: stopped because the turn was cancelled")
    }
}

/// Waits until the turn is cancelled (named `wait_for_cancel`).
pub struct WaitForCancel;

#[async_trait]
impl Tool for WaitForCancel {
    type Args = Value;
    fn name(&self) -> &str {
        "wait_for_cancel"
    }
    fn description(&self) -> String {
        "Waits until the turn is cancelled.".into()
    }
    fn parameters(&self) -> Arc<Value> {
        Arc::new(json!({"type": "object"}))
    }
    async fn call(&self, _args: Value, ctx: ToolContext) -> ToolOutput {
        ctx.cancel.cancelled().await;
        ToolOutput::error("stopped: the turn was cancelled")
    }
}

/// Panics with its text.
pub struct Panics;

#[async_trait]
impl Tool for Panics {
    type Args = TextArgs;
    fn name(&self) -> &str {
        "panics"
    }
    fn description(&self) -> String {
        "Always panics.".into()
    }
    fn parameters(&self) -> Arc<Value> {
        Arc::new(json!({"type": "object"}))
    }
    async fn call(&self, args: TextArgs, _ctx: ToolContext) -> ToolOutput {
        panic!("{}", args.text)
    }
}

/// `{"yields": n}`.
#[derive(Deserialize)]
pub struct GaugeArgs {
    /// How often to yield before finishing, so calls can finish out of order.
    pub yields: usize,
}

/// Shared record of a [`Gauge`] tool: how many calls ran at once, and in
/// which order they finished.
#[derive(Default)]
pub struct GaugeState {
    /// Calls running now.
    pub running: AtomicUsize,
    /// The most that ever ran at once.
    pub max_running: AtomicUsize,
    /// Call ids in the order they finished.
    pub finished: Mutex<Vec<String>>,
}

/// A tool that measures how many of its calls overlap.
#[derive(Clone)]
pub struct Gauge {
    /// Its name.
    pub name: &'static str,
    /// Whether it is concurrency-safe.
    pub safe: bool,
    /// What it measured.
    pub state: Arc<GaugeState>,
}

#[async_trait]
impl Tool for Gauge {
    type Args = GaugeArgs;
    fn name(&self) -> &str {
        self.name
    }
    fn description(&self) -> String {
        "Measures concurrency.".into()
    }
    fn parameters(&self) -> Arc<Value> {
        Arc::new(json!({"type": "object", "properties": {"yields": {"type": "integer"}}}))
    }
    fn concurrency_safe(&self) -> bool {
        self.safe
    }
    async fn call(&self, args: GaugeArgs, ctx: ToolContext) -> ToolOutput {
        let now = self.state.running.fetch_add(1, Ordering::SeqCst) + 1;
        self.state.max_running.fetch_max(now, Ordering::SeqCst);
        // Yielding lets the worker poll the other calls of the batch.
        for _ in 0..args.yields {
            tokio::task::yield_now().await;
        }
        self.state.running.fetch_sub(1, Ordering::SeqCst);
        self.state.finished.lock().push(ctx.call_id.clone());
        ToolOutput::ok(format!("{} done", ctx.call_id))
    }
}

/// Adds `n` to a running total and refuses negative numbers: the smallest
/// tool with session state. The total changes when a result is committed
/// and is rebuilt by replay, like any [`ToolState`].
#[derive(Clone, Default)]
pub struct Tally(pub Arc<TallyState>);

/// [`Tally`]'s state.
#[derive(Default)]
pub struct TallyState {
    total: Mutex<i64>,
    compactions: AtomicUsize,
}

impl TallyState {
    /// The committed total.
    pub fn total(&self) -> i64 {
        *self.total.lock()
    }

    /// How many compactions it was told of.
    pub fn compactions(&self) -> usize {
        self.compactions.load(Ordering::SeqCst)
    }
}

/// `{"n": …}`.
#[derive(Deserialize)]
pub struct TallyArgs {
    /// What to add.
    pub n: i64,
}

impl ToolState for TallyState {
    fn apply(&self, call: &CommittedCall<'_>) {
        if call.is_error {
            return;
        }
        if let Ok(args) = serde_json::from_str::<TallyArgs>(call.arguments) {
            *self.total.lock() += args.n;
        }
    }
    fn compacted(&self) {
        self.compactions.fetch_add(1, Ordering::SeqCst);
    }
    fn clear(&self) {
        *self.total.lock() = 0;
    }
}

#[async_trait]
impl Tool for Tally {
    type Args = TallyArgs;
    fn name(&self) -> &str {
        "tally"
    }
    fn description(&self) -> String {
        "Adds n to the total.".into()
    }
    fn parameters(&self) -> Arc<Value> {
        Arc::new(
            json!({"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}),
        )
    }
    fn state(&self) -> Option<Arc<dyn ToolState>> {
        Some(self.0.clone())
    }
    async fn call(&self, args: TallyArgs, _ctx: ToolContext) -> ToolOutput {
        if args.n < 0 {
            return ToolOutput::error("n must not be negative");
        }
        // Reads the state, never writes it.
        ToolOutput::ok(format!("total will be {}", self.0.total() + args.n))
    }
}

/// A tool (named `rendezvous`) whose calls return only once `parties` of
/// them are running at the same time: a run that never reaches that many
/// at once never returns, so it proves calls overlap (put a timeout around
/// the test's turn).
#[derive(Clone)]
pub struct Rendezvous {
    barrier: Arc<tokio::sync::Barrier>,
}

impl Rendezvous {
    /// Calls meet in groups of `parties`.
    pub fn new(parties: usize) -> Self {
        Self {
            barrier: Arc::new(tokio::sync::Barrier::new(parties)),
        }
    }
}

#[async_trait]
impl Tool for Rendezvous {
    type Args = Value;
    fn name(&self) -> &str {
        "rendezvous"
    }
    fn description(&self) -> String {
        "Waits until the other parties arrive.".into()
    }
    fn parameters(&self) -> Arc<Value> {
        Arc::new(json!({"type": "object"}))
    }
    fn concurrency_safe(&self) -> bool {
        true
    }
    async fn call(&self, _args: Value, ctx: ToolContext) -> ToolOutput {
        tokio::select! {
            _ = self.barrier.wait() => ToolOutput::ok("everyone arrived"),
            _ = ctx.cancel.cancelled() => ToolOutput::error("cancelled while waiting"),
        }
    }
}
