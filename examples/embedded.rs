//! A Pod embedded in a program: a custom stateful tool, a custom interceptor,
//! and a session that is killed mid-turn and resumed with its state intact.
//!
//! The tool, `record_expense`, keeps an expense ledger as session state. It
//! never writes the ledger itself: it reads it back in its result, and the
//! ledger's [`ToolState`] applies the call once the result is committed to
//! the log. On resume the Pod replays the log into a fresh ledger, so the
//! program stores nothing of its own. The interceptor, a spending cap, skips
//! any expense that would take the total over the cap; the model reads why.
//!
//! The model is scripted (no network, no API key), so the run is the same
//! every time:
//!
//! ```text
//! cargo run --example embedded -- run /tmp/ledger-home
//! #   … prints "waiting" once the model sits in a slow tool: kill it now
//! #   (Ctrl-C, or kill -9), then:
//! cargo run --example embedded -- resume /tmp/ledger-home ID
//! ```
//!
//! `tests/e2e/embedding.rs` runs exactly this with a SIGKILL in between.

use pod::{
    async_trait, CommittedCall, Interceptor, Pod, PodConfig, PodEvent, PodHome, PreToolAction,
    ScriptStep, ScriptedProvider, Tool, ToolCallInfo, ToolContext, ToolOutput, ToolRegistry,
    ToolState,
};
use serde_json::{json, Value};
use std::io::Write;
use std::sync::{Arc, Mutex};

/// Spending above this many cents is refused by the interceptor.
const CAP_CENTS: u64 = 10_000;

/// One ledger line.
#[derive(Clone, Debug, serde::Deserialize)]
struct Expense {
    item: String,
    cents: u64,
}

/// The ledger: the tool's session state.
#[derive(Default)]
struct Ledger(Mutex<Vec<Expense>>);

impl Ledger {
    fn lines(&self) -> Vec<Expense> {
        self.0.lock().map(|l| l.clone()).unwrap_or_default()
    }

    fn total(&self) -> u64 {
        self.lines().iter().map(|e| e.cents).sum()
    }
}

impl ToolState for Ledger {
    fn apply(&self, call: &CommittedCall<'_>) {
        // A refused, skipped or interrupted call recorded nothing.
        if call.is_error {
            return;
        }
        if let (Ok(expense), Ok(mut lines)) = (
            serde_json::from_str::<Expense>(call.arguments),
            self.0.lock(),
        ) {
            lines.push(expense);
        }
    }

    fn clear(&self) {
        if let Ok(mut lines) = self.0.lock() {
            lines.clear();
        }
    }
}

/// Records an expense in the ledger.
struct RecordExpense(Arc<Ledger>);

#[async_trait]
impl Tool for RecordExpense {
    type Args = Expense;

    fn name(&self) -> &str {
        "record_expense"
    }

    fn description(&self) -> String {
        "Records an expense (an item and its price in cents) in the ledger.".into()
    }

    fn parameters(&self) -> Arc<Value> {
        Arc::new(json!({
            "type": "object",
            "properties": {"item": {"type": "string"}, "cents": {"type": "integer", "minimum": 1}},
            "required": ["item", "cents"]
        }))
    }

    fn state(&self) -> Option<Arc<dyn ToolState>> {
        Some(self.0.clone())
    }

    async fn call(&self, args: Expense, _ctx: ToolContext) -> ToolOutput {
        if args.cents == 0 {
            return ToolOutput::error("cents must be at least 1");
        }
        ToolOutput::ok(format!(
            "Recorded {} ({} cents). Ledger total: {} cents.",
            args.item,
            args.cents,
            self.0.total() + args.cents
        ))
    }
}

/// Stands in for slow work (a build, a download): waits until cancelled.
struct SlowWork;

#[async_trait]
impl Tool for SlowWork {
    type Args = Value;

    fn name(&self) -> &str {
        "slow_work"
    }

    fn description(&self) -> String {
        "Does slow work.".into()
    }

    fn parameters(&self) -> Arc<Value> {
        Arc::new(json!({"type": "object"}))
    }

    async fn call(&self, _args: Value, ctx: ToolContext) -> ToolOutput {
        ctx.cancel.cancelled().await;
        ToolOutput::error("stopped: the turn was cancelled")
    }
}

/// Skips an expense that would take the ledger over the cap.
struct SpendingCap(Arc<Ledger>);

#[async_trait]
impl Interceptor for SpendingCap {
    async fn pre_tool_call(&mut self, call: &mut ToolCallInfo) -> PreToolAction {
        if call.name != "record_expense" {
            return PreToolAction::Continue;
        }
        let Ok(expense) = serde_json::from_str::<Expense>(&call.arguments) else {
            // Malformed: the tool itself says so.
            return PreToolAction::Continue;
        };
        let total = self.0.total();
        if total + expense.cents > CAP_CENTS {
            return PreToolAction::Skip(format!(
                "Refused by the spending cap: {} would take the ledger from {total} to {} cents \
                 (cap {CAP_CENTS}).",
                expense.item,
                total + expense.cents
            ));
        }
        PreToolAction::Continue
    }
}

/// The Pod's configuration: the model, the two tools (sharing one ledger) and
/// the interceptor. The workspace tools are off: this agent only keeps books.
fn config(home: &str, steps: Vec<ScriptStep>) -> (PodConfig, Arc<Ledger>) {
    let ledger = Arc::new(Ledger::default());
    let model = Arc::new(ScriptedProvider::from_steps(steps));
    let mut config = PodConfig::new(PodHome::new(home), std::env::temp_dir(), model);
    config.workspace_tools = false;
    let mut tools = ToolRegistry::new();
    tools
        .register(RecordExpense(ledger.clone()))
        .register(SlowWork);
    config.tools = tools;
    let cap = ledger.clone();
    config.interceptors.push(Arc::new(move || {
        Box::new(SpendingCap(cap.clone())) as Box<dyn Interceptor>
    }));
    (config, ledger)
}

fn expense(item: &str, cents: u64) -> Value {
    json!({"item": item, "cents": cents})
}

/// Prints what the Pod does, one line per finished call.
fn print_events(pod: &pod::PodHandle) {
    let mut events = pod.subscribe();
    tokio::spawn(async move {
        while let Ok(event) = events.recv().await {
            match event {
                PodEvent::ToolCallStarted { name, .. } if name == "slow_work" => say("waiting"),
                PodEvent::ToolCallFinished { name, content, .. } => {
                    say(&format!("{name}: {content}"))
                }
                _ => {}
            }
        }
    });
}

fn say(line: &str) {
    let mut out = std::io::stdout().lock();
    // Flushed at once: a test reads these lines while the process runs.
    let _ = writeln!(out, "{line}");
    let _ = out.flush();
}

fn print_ledger(ledger: &Ledger) {
    for line in ledger.lines() {
        say(&format!("ledger: {} {}", line.item, line.cents));
    }
    say(&format!("total: {}", ledger.total()));
}

async fn run(home: &str) -> Result<(), pod::PodError> {
    let (config, ledger) = config(
        home,
        vec![
            ScriptStep::tool_call("record_expense", expense("laptop", 8_000))
                .and_call("record_expense", expense("monitor", 3_000)),
            ScriptStep::tool_call("record_expense", expense("cable", 500)),
            ScriptStep::tool_call("slow_work", json!({})),
            ScriptStep::text("unreachable: the process is killed in slow_work"),
        ],
    );
    let pod = Pod::spawn(config).await?;
    say(&format!("session {}", pod.session_id()));
    print_events(&pod);
    pod.prompt("Record this month's purchases.").await?;
    print_ledger(&ledger);
    pod.shutdown().await
}

async fn resume(home: &str, id: uuid::Uuid) -> Result<(), pod::PodError> {
    let (config, ledger) = config(
        home,
        vec![
            ScriptStep::tool_call("record_expense", expense("mouse", 1_000)),
            ScriptStep::text("The ledger is up to date."),
        ],
    );
    let pod = Pod::resume(id, config).await?;
    // The ledger is back before the first prompt, rebuilt from the log.
    say("resumed");
    print_ledger(&ledger);
    print_events(&pod);
    pod.prompt("Also record the mouse.").await?;
    print_ledger(&ledger);
    pod.shutdown().await
}

fn usage(problem: &str) -> ! {
    eprintln!("error: {problem}\nusage: embedded run HOME | embedded resume HOME SESSION_ID");
    std::process::exit(2);
}

#[tokio::main]
async fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let result = match args.iter().map(String::as_str).collect::<Vec<_>>()[..] {
        ["run", home] => run(home).await,
        ["resume", home, id] => match id.parse() {
            Ok(id) => resume(home, id).await,
            Err(err) => usage(&format!("{id} is not a session id: {err}")),
        },
        _ => usage("expected a command"),
    };
    if let Err(err) = result {
        eprintln!("error: {err}");
        std::process::exit(1);
    }
}
