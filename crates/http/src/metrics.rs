//! `GET /metrics`: the server's counters in the Prometheus text format
//! (version 0.0.4), for the scraper an operator already runs.
//!
//! Counted from the events of every session this process runs (started
//! through the API, or claimed by its fleet worker), and its subagents';
//! gauges are read at scrape time from the session list and the questions
//! waiting. Labels are bounded: a tool's name, an outcome, a token kind, a
//! status, a turn's end; never a session id.

use parking_lot::Mutex;
use pod::PodEvent;
use pod_llm::{Prices, Usage};
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};

/// The counters.
#[derive(Default)]
pub struct Metrics {
    responses: AtomicU64,
    retries: AtomicU64,
    input: AtomicU64,
    output: AtomicU64,
    cache_read: AtomicU64,
    cache_write: AtomicU64,
    // Millionths of the currency the profiles' prices are in.
    cost_micros: AtomicU64,
    compactions: AtomicU64,
    // (tool, "ok" | "error") -> calls.
    tool_calls: Mutex<BTreeMap<(String, &'static str), u64>>,
    // How turns ended -> turns.
    turns: Mutex<BTreeMap<String, u64>>,
    questions: AtomicU64,
    // Verification rounds that passed and that failed (`--verify`).
    verified: AtomicU64,
    unverified: AtomicU64,
}

/// What the scrape reads besides the counters.
pub struct Gauges {
    /// Sessions by status.
    pub sessions: BTreeMap<String, u64>,
    /// Questions waiting for a person.
    pub approvals_waiting: u64,
    /// How long the oldest has waited, in seconds.
    pub oldest_approval_seconds: f64,
    /// Sessions running in this process.
    pub live: u64,
}

impl Metrics {
    /// Counts one event of a session priced at `prices` (if known).
    pub fn observe(&self, event: &PodEvent, prices: Option<&Prices>) {
        match event {
            PodEvent::Usage { usage } => self.usage(usage, prices),
            PodEvent::RequestRetried { .. } => {
                self.retries.fetch_add(1, Ordering::Relaxed);
            }
            PodEvent::ToolCallFinished { name, is_error, .. } => {
                let outcome = if *is_error { "error" } else { "ok" };
                *self
                    .tool_calls
                    .lock()
                    .entry((name.clone(), outcome))
                    .or_default() += 1;
            }
            PodEvent::TurnEnded { reason, .. } => {
                *self.turns.lock().entry(reason_label(reason)).or_default() += 1;
            }
            PodEvent::TurnFailed { .. } => {
                *self.turns.lock().entry("failed".into()).or_default() += 1;
            }
            PodEvent::Compacted { .. } => {
                self.compactions.fetch_add(1, Ordering::Relaxed);
            }
            PodEvent::QuestionAsked { .. } => {
                self.questions.fetch_add(1, Ordering::Relaxed);
            }
            PodEvent::Verified { record } => {
                let counter = match record.passed {
                    true => &self.verified,
                    false => &self.unverified,
                };
                counter.fetch_add(1, Ordering::Relaxed);
            }
            // A subagent's work is this process's too.
            PodEvent::Subagent { inner, .. } => self.observe(inner, prices),
            _ => {}
        }
    }

    fn usage(&self, usage: &Usage, prices: Option<&Prices>) {
        self.responses.fetch_add(1, Ordering::Relaxed);
        self.input.fetch_add(usage.fresh_input(), Ordering::Relaxed);
        self.output
            .fetch_add(usage.completion_tokens, Ordering::Relaxed);
        self.cache_read
            .fetch_add(usage.cache_read_tokens, Ordering::Relaxed);
        self.cache_write
            .fetch_add(usage.cache_write_tokens, Ordering::Relaxed);
        if let Some(prices) = prices {
            let micros = (prices.cost(usage) * 1_000_000.0).round();
            if micros.is_finite() && micros > 0.0 {
                self.cost_micros.fetch_add(micros as u64, Ordering::Relaxed);
            }
        }
    }

    /// Every counter family with its samples now: what the text
    /// exposition and an OTLP exporter both read.
    pub fn counters(&self) -> Vec<Family> {
        let load = |c: &AtomicU64| c.load(Ordering::Relaxed) as f64;
        let tools: Vec<Sample> = self
            .tool_calls
            .lock()
            .iter()
            .map(|((tool, outcome), n)| {
                (
                    vec![("tool", tool.clone()), ("outcome", (*outcome).to_string())],
                    *n as f64,
                )
            })
            .collect();
        let turns: Vec<Sample> = self
            .turns
            .lock()
            .iter()
            .map(|(reason, n)| (vec![("reason", reason.clone())], *n as f64))
            .collect();
        let stats = pod::stats::snapshot();
        vec![
            Family::new(
                "pod_model_responses_total",
                "Model responses received (each with its usage).",
                vec![(vec![], load(&self.responses))],
            ),
            Family::new(
                "pod_model_retries_total",
                "Model requests whose stream broke and were sent again.",
                vec![(vec![], load(&self.retries))],
            ),
            Family::new(
                "pod_tokens_total",
                "Tokens by kind: input (not from the cache), output, cache_read, cache_write.",
                vec![
                    (vec![("kind", "input".into())], load(&self.input)),
                    (vec![("kind", "output".into())], load(&self.output)),
                    (vec![("kind", "cache_read".into())], load(&self.cache_read)),
                    (vec![("kind", "cache_write".into())], load(&self.cache_write)),
                ],
            ),
            Family::new(
                "pod_cost_total",
                "What the model responses cost at the profiles' prices (sessions without prices count nothing).",
                vec![(vec![], load(&self.cost_micros) / 1_000_000.0)],
            ),
            Family::new("pod_tool_calls_total", "Tool calls by tool and outcome.", tools),
            Family::new("pod_turns_total", "Turns by how they ended.", turns),
            Family::new(
                "pod_compactions_total",
                "Context compactions.",
                vec![(vec![], load(&self.compactions))],
            ),
            Family::new(
                "pod_questions_total",
                "Questions asked to a person (approvals).",
                vec![(vec![], load(&self.questions))],
            ),
            Family::new(
                "pod_verifications_total",
                "Verification rounds (the operator's checks and grader, --verify) by outcome.",
                vec![
                    (vec![("outcome", "passed".into())], load(&self.verified)),
                    (vec![("outcome", "failed".into())], load(&self.unverified)),
                ],
            ),
            Family::new(
                "pod_lease_renewals_total",
                "Fleet lease renewals by outcome (failed: a database error; the next append's fence still holds).",
                vec![
                    (vec![("outcome", "ok".into())], stats.renewals as f64),
                    (vec![("outcome", "failed".into())], stats.renewal_failures as f64),
                ],
            ),
            Family::new(
                "pod_leases_lost_total",
                "Leases of this process that another worker took over.",
                vec![(vec![], stats.leases_lost as f64)],
            ),
            Family::new(
                "pod_lease_takeovers_total",
                "Sessions this process took over from a worker that died (an expired lease).",
                vec![(vec![], stats.takeovers as f64)],
            ),
            Family::new(
                "pod_store_commits_total",
                "Statements that committed session log records to PostgreSQL (group commits: one transaction, one WAL flush, records of many sessions).",
                vec![(vec![], stats.group_commits as f64)],
            ),
            Family::new(
                "pod_store_committed_records_total",
                "Session log records those statements committed.",
                vec![(vec![], stats.group_commit_records as f64)],
            ),
        ]
    }

    /// The exposition text.
    pub fn render(&self, gauges: &Gauges) -> String {
        let mut out = String::new();
        for family in self.counters() {
            counter(&mut out, family.name, family.help, &family.samples);
        }
        let sessions: Vec<_> = gauges
            .sessions
            .iter()
            .map(|(status, n)| (vec![("status", status.clone())], *n as f64))
            .collect();
        gauge(
            &mut out,
            "pod_sessions",
            "Sessions in the store by status.",
            &sessions,
        );
        gauge(
            &mut out,
            "pod_sessions_live",
            "Sessions running in this process.",
            &[(vec![], gauges.live as f64)],
        );
        gauge(
            &mut out,
            "pod_approvals_waiting",
            "Questions waiting for a person's answer.",
            &[(vec![], gauges.approvals_waiting as f64)],
        );
        gauge(
            &mut out,
            "pod_approval_oldest_wait_seconds",
            "How long the oldest waiting question has waited.",
            &[(vec![], gauges.oldest_approval_seconds)],
        );
        let stats = pod::stats::snapshot();
        let name = "pod_log_append_seconds";
        let _ = writeln!(
            out,
            "# HELP {name} How long a session log append took (committed, and synced when asked)."
        );
        let _ = writeln!(out, "# TYPE {name} histogram");
        for (bound, count) in &stats.append_buckets {
            let _ = writeln!(out, "{name}_bucket{{le=\"{bound}\"}} {count}");
        }
        let _ = writeln!(out, "{name}_bucket{{le=\"+Inf\"}} {}", stats.appends);
        let _ = writeln!(out, "{name}_sum {}", stats.append_seconds);
        let _ = writeln!(out, "{name}_count {}", stats.appends);
        out
    }
}

/// One metric family's name, help and samples.
pub struct Family {
    /// Its name (Prometheus style: a counter ends in `_total`).
    pub name: &'static str,
    /// What it counts.
    pub help: &'static str,
    /// Its samples: labels and value.
    pub samples: Vec<Sample>,
}

impl Family {
    fn new(name: &'static str, help: &'static str, samples: Vec<Sample>) -> Self {
        Self {
            name,
            help,
            samples,
        }
    }
}

/// A sample: its labels and its value.
pub type Sample = (Vec<(&'static str, String)>, f64);

fn counter(out: &mut String, name: &str, help: &str, samples: &[Sample]) {
    family(out, name, help, "counter", samples);
}

fn gauge(out: &mut String, name: &str, help: &str, samples: &[Sample]) {
    family(out, name, help, "gauge", samples);
}

fn family(out: &mut String, name: &str, help: &str, kind: &str, samples: &[Sample]) {
    let _ = writeln!(out, "# HELP {name} {help}");
    let _ = writeln!(out, "# TYPE {name} {kind}");
    for (labels, value) in samples {
        let labels: Vec<String> = labels
            .iter()
            .map(|(key, value)| format!("{key}=\"{}\"", escape(value)))
            .collect();
        let labels = match labels.is_empty() {
            true => String::new(),
            false => format!("{{{}}}", labels.join(",")),
        };
        let _ = writeln!(out, "{name}{labels} {value}");
    }
}

/// A label value as the text format wants it.
fn escape(value: &str) -> String {
    value
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

fn reason_label(reason: &pod::TurnEndReason) -> String {
    use pod::TurnEndReason as R;
    match reason {
        R::EndTurn => "end_turn",
        R::Cancelled => "cancelled",
        R::MaxTokens => "max_tokens",
        R::Refusal => "refusal",
        R::Limit(_) => "limit",
        R::Aborted(_) => "aborted",
        R::Paused(_) => "paused",
        R::Parked(_) => "parked",
        R::Yielded(_) => "yielded",
        R::Stalled => "stalled",
        R::GoalUnmet(_) => "unverified",
        R::Rejected(_) => "rejected",
    }
    .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_are_escaped_and_families_typed() {
        let metrics = Metrics::default();
        metrics.observe(
            &PodEvent::ToolCallFinished {
                call_id: "c".into(),
                name: "we\"ird".into(),
                content: String::new(),
                is_error: true,
            },
            None,
        );
        let text = metrics.render(&Gauges {
            sessions: BTreeMap::new(),
            approvals_waiting: 0,
            oldest_approval_seconds: 0.0,
            live: 0,
        });
        assert!(text.contains("# TYPE pod_tool_calls_total counter\n"));
        assert!(
            text.contains("pod_tool_calls_total{tool=\"we\\\"ird\",outcome=\"error\"} 1\n"),
            "{text}"
        );
    }
}
