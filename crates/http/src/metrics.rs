//! `GET /metrics`: the server's counters in the Prometheus text format
//! (version 0.0.4), for the scraper an operator already runs.
//!
//! Counted from the events of every session this process runs (started
//! through the API, or claimed by its fleet worker), and its subagents';
//! gauges are read at scrape time from the session list and the questions
//! waiting; the model requests' times and failures are the providers'
//! own counts ([`pod_providers::metered`]). Labels are bounded: a model
//! and a profile (from the operator's config; past 64 pairs, `other`), a
//! tool's name, an outcome, a token kind, a failure's kind, a status, a
//! turn's end; never a session id.

use parking_lot::Mutex;
use pod::PodEvent;
use pod_launch::Meter;
use pod_llm::Usage;
use pod_providers::metered::{Histogram, ModelStats};
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};

/// The counters.
#[derive(Default)]
pub struct Metrics {
    // (model, profile) -> what its responses used and cost.
    spend: Mutex<BTreeMap<(String, String), Spend>>,
    // Model -> requests whose stream broke midway and were sent again.
    retries: Mutex<BTreeMap<String, u64>>,
    compactions: AtomicU64,
    // (tool, "ok" | "error") -> calls.
    tool_calls: Mutex<BTreeMap<(String, &'static str), u64>>,
    // How turns ended -> turns.
    turns: Mutex<BTreeMap<String, u64>>,
    questions: AtomicU64,
    // Verification rounds that passed and that failed (`--verify`).
    verified: AtomicU64,
    unverified: AtomicU64,
    // The kind of limit (`money`, `requests`, `tokens`, `wall_time`, …)
    // -> runs it stopped.
    budget_stops: Mutex<BTreeMap<&'static str, u64>>,
    // Runs the loop guards stopped (repeated calls, cycles, text, failures).
    loop_stops: AtomicU64,
}

/// Pairs of model and profile counted apart at most (the rest count as
/// `other`): both come from the operator's config, so this only keeps the
/// label set bounded whatever it holds.
const MAX_PAIRS: usize = 64;

/// The responses of one model and profile.
#[derive(Default)]
struct Spend {
    responses: u64,
    input: u64,
    output: u64,
    cache_read: u64,
    cache_write: u64,
    // Millionths of the currency the profile's prices are in.
    cost_micros: u64,
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
    /// Counts one event of a session counted under `meter`.
    pub fn observe(&self, event: &PodEvent, meter: &Meter) {
        match event {
            PodEvent::Usage { usage } => self.usage(usage, meter),
            PodEvent::RequestRetried { .. } => {
                *self.retries.lock().entry(meter.model.clone()).or_default() += 1;
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
                if let pod::TurnEndReason::Limit(limit) = reason {
                    self.stopped(limit);
                }
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
            // (Counted under the parent's model and profile.)
            PodEvent::Subagent { inner, .. } => self.observe(inner, meter),
            _ => {}
        }
    }

    fn stopped(&self, limit: &pod::Limit) {
        match limit.kind() {
            "loop" => {
                self.loop_stops.fetch_add(1, Ordering::Relaxed);
            }
            kind => *self.budget_stops.lock().entry(kind).or_default() += 1,
        }
    }

    fn usage(&self, usage: &Usage, meter: &Meter) {
        let mut spend = self.spend.lock();
        let mut key = (meter.model.clone(), meter.profile.clone());
        if !spend.contains_key(&key) && spend.len() >= MAX_PAIRS {
            key = ("other".into(), "other".into());
        }
        let spend = spend.entry(key).or_default();
        spend.responses += 1;
        spend.input += usage.fresh_input();
        spend.output += usage.completion_tokens;
        spend.cache_read += usage.cache_read_tokens;
        spend.cache_write += usage.cache_write_tokens;
        if let Some(prices) = &meter.prices {
            let micros = (prices.cost(usage) * 1_000_000.0).round();
            if micros.is_finite() && micros > 0.0 {
                spend.cost_micros += micros as u64;
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
        let budget_stops: Vec<Sample> = self
            .budget_stops
            .lock()
            .iter()
            .map(|(kind, n)| (vec![("reason", (*kind).to_string())], *n as f64))
            .collect();
        let stats = pod::stats::snapshot();
        let models = pod_providers::metered::snapshot();
        let (mut responses, mut tokens, mut cost) = (Vec::new(), Vec::new(), Vec::new());
        for ((model, profile), spend) in self.spend.lock().iter() {
            let pair = || vec![("model", model.clone()), ("profile", profile.clone())];
            responses.push((pair(), spend.responses as f64));
            for (kind, n) in [
                ("input", spend.input),
                ("output", spend.output),
                ("cache_read", spend.cache_read),
                ("cache_write", spend.cache_write),
            ] {
                let mut labels = pair();
                labels.push(("kind", kind.into()));
                tokens.push((labels, n as f64));
            }
            cost.push((pair(), spend.cost_micros as f64 / 1_000_000.0));
        }
        // Both kinds of retry: a stream broken midway (the session's
        // event), and an attempt that failed before anything streamed (the
        // provider's own, which no session sees).
        let mut retries = self.retries.lock().clone();
        let mut failures = Vec::new();
        for (model, counts) in &models {
            *retries.entry(model.clone()).or_default() += counts.retries;
            for (kind, n) in &counts.failures {
                failures.push((
                    vec![("model", model.clone()), ("kind", (*kind).to_string())],
                    *n as f64,
                ));
            }
        }
        let retries = retries
            .into_iter()
            .map(|(model, n)| (vec![("model", model)], n as f64))
            .collect();
        vec![
            Family::new(
                "pod_model_responses_total",
                "Model responses received (each with its usage), by model and profile.",
                responses,
            ),
            Family::new(
                "pod_model_retries_total",
                "Model requests sent again: after an attempt failed, or after its stream broke midway.",
                retries,
            ),
            Family::new(
                "pod_model_request_failures_total",
                "Failed model request attempts (retried or not) by model and kind: rate_limited, http_4xx, http_5xx, api, unreachable, out_of_files, transport, idle_timeout, malformed, scripted.",
                failures,
            ),
            Family::new(
                "pod_tokens_total",
                "Tokens by model, profile and kind: input (not from the cache), output, cache_read, cache_write.",
                tokens,
            ),
            Family::new(
                "pod_cost_total",
                "What the model responses cost at the profiles' prices, by model and profile (sessions without prices count nothing).",
                cost,
            ),
            Family::new("pod_tool_calls_total", "Tool calls by tool and outcome.", tools),
            Family::new("pod_turns_total", "Turns by how they ended.", turns),
            Family::new(
                "pod_budget_stops_total",
                "Runs a limit stopped, by the kind of limit: money, requests, tokens, wall_time, turn_requests, continuations, and a profile's shared limits per window: profile_per_minute, profile_per_hour, profile_per_day.",
                budget_stops,
            ),
            Family::new(
                "pod_loop_stops_total",
                "Runs the loop guards stopped (the same call, a short cycle or the same text repeated after a reminder; the same call failing the same way).",
                vec![(vec![], load(&self.loop_stops))],
            ),
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
            Family::new(
                "pod_schedule_fires_total",
                "Schedules' fire times acted on by this process's fleet worker: started a session, skipped (the last one still ran), or missed (passed while no worker ran; catch-up runs only the latest).",
                vec![
                    (vec![("outcome", "started".into())], stats.schedule_started as f64),
                    (vec![("outcome", "skipped".into())], stats.schedule_skipped as f64),
                    (vec![("outcome", "missed".into())], stats.schedule_missed as f64),
                ],
            ),
            Family::new(
                "pod_trigger_deliveries_total",
                "Webhook deliveries to /api/triggers by outcome: started a session, duplicate (an earlier delivery of the same id started it), refused.",
                vec![
                    (vec![("outcome", "started".into())], stats.trigger_started as f64),
                    (vec![("outcome", "duplicate".into())], stats.trigger_duplicate as f64),
                    (vec![("outcome", "refused".into())], stats.trigger_refused as f64),
                ],
            ),
            Family::new(
                "pod_store_outages_total",
                "Times the session store's database became unreachable (its sessions paused until it was back).",
                vec![(vec![], stats.outages as f64)],
            ),
            Family::new(
                "pod_store_outage_seconds_total",
                "How long the outages that ended lasted, together.",
                vec![(vec![], stats.outage_seconds)],
            ),
            Family::new(
                "pod_fleet_released_total",
                "Sessions this process's fleet worker gave back to the queue because their model connection found no file descriptor (none failed for it).",
                vec![(vec![], stats.fleet_released as f64)],
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
        if stats.fleet_capacity > 0 {
            // Admitted (running here) against waiting in the store for this
            // worker or another.
            let queued = gauges.sessions.get("queued").copied().unwrap_or(0);
            gauge(
                &mut out,
                "pod_fleet_sessions",
                "Fleet sessions this worker runs (running) and fleet sessions queued in the store for any worker (queued).",
                &[
                    (vec![("state", "running".into())], stats.fleet_running as f64),
                    (vec![("state", "queued".into())], queued as f64),
                ],
            );
            gauge(
                &mut out,
                "pod_fleet_capacity",
                "The most sessions this worker runs at once: --workers, clamped to what its open-file limit serves.",
                &[(vec![], stats.fleet_capacity as f64)],
            );
        }
        gauge(
            &mut out,
            "pod_store_up",
            "1 while the session store's database can be reached, 0 during an outage (sessions pause).",
            &[(vec![], if stats.stores_down > 0 { 0.0 } else { 1.0 })],
        );
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
        let models = pod_providers::metered::snapshot();
        let times: [(&str, &str, Pick); 2] = [
            (
                "pod_model_request_seconds",
                "From sending a model request to the end of its answer, by model (answers that ended whole).",
                |m| &m.request,
            ),
            (
                "pod_model_first_event_seconds",
                "From sending a model request to the first event of its answer (time to first token), by model.",
                |m| &m.first_event,
            ),
        ];
        for (name, help, pick) in times {
            let _ = writeln!(out, "# HELP {name} {help}");
            let _ = writeln!(out, "# TYPE {name} histogram");
            for (model, counts) in &models {
                let histogram = pick(counts);
                let model = escape(model);
                for (bound, n) in histogram.cumulative() {
                    let _ = writeln!(out, "{name}_bucket{{model=\"{model}\",le=\"{bound}\"}} {n}");
                }
                let count = histogram.count;
                let _ = writeln!(
                    out,
                    "{name}_bucket{{model=\"{model}\",le=\"+Inf\"}} {count}"
                );
                let _ = writeln!(out, "{name}_sum{{model=\"{model}\"}} {}", histogram.sum);
                let _ = writeln!(out, "{name}_count{{model=\"{model}\"}} {count}");
            }
        }
        out
    }
}

/// Which histogram of a model's counts a family shows.
type Pick = fn(&ModelStats) -> &Histogram;

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
            &Meter::default(),
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

    #[test]
    fn budget_and_loop_stops_are_counted_by_reason() {
        let metrics = Metrics::default();
        let ended = |limit: pod::Limit| PodEvent::TurnEnded {
            reason: pod::TurnEndReason::Limit(limit),
            usage: Usage::default(),
            requests: 1,
        };
        let money = pod::Limit::SessionCost {
            max: pod_llm::Cost::from_amount(2.0),
            spent: pod_llm::Cost::from_amount(2.0),
        };
        metrics.observe(&ended(money), &Meter::default());
        metrics.observe(
            &ended(pod::Limit::RunCost(pod_llm::Cost::from_amount(1.0))),
            &Meter::default(),
        );
        metrics.observe(
            &ended(pod::Limit::Loop {
                what: "bash".into(),
                times: 7,
            }),
            &Meter::default(),
        );
        let text = metrics.render(&Gauges {
            sessions: BTreeMap::new(),
            approvals_waiting: 0,
            oldest_approval_seconds: 0.0,
            live: 0,
        });
        assert!(
            text.contains("pod_budget_stops_total{reason=\"money\"} 2\n"),
            "{text}"
        );
        assert!(text.contains("pod_loop_stops_total 1\n"), "{text}");
    }
}
