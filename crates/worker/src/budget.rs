//! Budgets: how much one run may spend before the worker stops it.
//!
//! A *run* is a prompt (or a bare continue) and every continuation an
//! interceptor asks for at turn end (`TurnEndAction::ContinueWithMessages`,
//! which is how until-done mode keeps going). A *turn* is the stretch from
//! the prompt or a continuation to the model's next answer without tool
//! calls. The limits:
//!
//! - `requests_per_turn`: a turn in which the model never stops calling
//!   tools ends after this many requests. Each continuation starts a fresh
//!   count, so a long plan worked through turn by turn never hits it.
//! - `continuations`: how many times a run may be continued.
//! - `requests` / `tokens`: optional caps on the whole run, for unattended
//!   runs that must not spend more than a known amount.
//! - `repeated_failures`: the same tool call (name and arguments) failing
//!   with the same result this many times in a row ends the run: the model
//!   is looping and learns nothing from the error.
//!
//! [`BudgetMeter`] is the run's state. It makes every decision from its own
//! counters, so it is tested without a model; the worker only feeds it.

use serde::{Deserialize, Serialize};

/// Limits of one run. See the module docs for what each one bounds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Budget {
    /// Model requests in one turn.
    pub requests_per_turn: u32,
    /// Continuations of one run; `None`: no limit.
    pub continuations: Option<u32>,
    /// Model requests in the whole run; `None`: no limit.
    pub requests: Option<u64>,
    /// Tokens (prompt + completion, as providers report them) in the whole
    /// run; `None`: no limit.
    pub tokens: Option<u64>,
    /// Identical failing calls in a row that end the run; 0 turns it off.
    pub repeated_failures: u32,
}

/// Default of [`Budget::requests_per_turn`]. Codex and Claude Code put no
/// cap on a turn; this one exists only to end a turn in which the model
/// never stops. 500 requests at 5–20 s each is 40 minutes to 3 hours of one
/// uninterrupted turn, several times more than a turn of real work takes
/// (a 60-item plan at two calls an item is 120), and a run in until-done
/// mode gets a fresh count every continuation.
pub const DEFAULT_REQUESTS_PER_TURN: u32 = 500;

/// Default of [`Budget::repeated_failures`]: after four identical errors in
/// a row the fifth identical call is a loop, not a retry of a flaky step.
pub const DEFAULT_REPEATED_FAILURES: u32 = 5;

impl Default for Budget {
    fn default() -> Self {
        Self {
            requests_per_turn: DEFAULT_REQUESTS_PER_TURN,
            continuations: None,
            requests: None,
            tokens: None,
            repeated_failures: DEFAULT_REPEATED_FAILURES,
        }
    }
}

/// The limit that stopped a run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Limit {
    /// [`Budget::requests_per_turn`] requests in one turn.
    TurnRequests(u32),
    /// [`Budget::continuations`] continuations.
    Continuations(u32),
    /// [`Budget::requests`] requests in the run.
    RunRequests(u64),
    /// [`Budget::tokens`] tokens in the run.
    RunTokens(u64),
    /// Model requests of a whole session, across runs and resumes (a
    /// session budget guard's limit).
    SessionRequests(u64),
    /// Tokens of a whole session, across runs and resumes.
    SessionTokens(u64),
    /// Money a run and its subagents spent together, at the profile's
    /// prices (a cost guard's limit).
    RunCost(pod_llm::Cost),
    /// Money the whole session spent (its runs, its subagents' and its
    /// graders'), across resumes, crashes and takeovers: the session's
    /// recorded money limit.
    SessionCost {
        /// The limit.
        max: pod_llm::Cost,
        /// What the session had spent when it stopped.
        spent: pod_llm::Cost,
    },
    /// The session's recorded wall-time limit, counted from its creation.
    SessionWall {
        /// The limit, in seconds.
        max_secs: u64,
    },
    /// The model repeated itself (the same call, a short cycle of calls,
    /// the same text) after it was reminded that it loops.
    Loop {
        /// What it repeated, for people: `bash "echo pending"`.
        what: String,
        /// How many times in a row.
        times: u32,
    },
    /// A limit shared by every session of a profile in a store (`[limits]`:
    /// money, tokens or requests per minute, hour or day) is reached; the
    /// session waits for the window to roll over or the limit to be raised.
    Shared {
        /// The profile whose limit it is.
        profile: String,
        /// What it counts.
        measure: Measure,
        /// Over which window.
        window: Window,
        /// The limit, in the measure's units (money in millionths).
        max: u64,
        /// What the profile had spent and reserved in the window.
        spent: u64,
    },
    /// The same call failed the same way this many times in a row.
    RepeatedFailure {
        /// The tool called.
        tool: String,
        /// How many times in a row.
        times: u32,
    },
}

impl std::fmt::Display for Limit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Limit::TurnRequests(n) => {
                write!(f, "the per-turn budget of {}", counted(*n, "model request"))
            }
            Limit::Continuations(n) => write!(f, "the limit of {}", counted(*n, "continuation")),
            Limit::RunRequests(n) => {
                write!(f, "the run budget of {}", counted(*n, "model request"))
            }
            Limit::RunTokens(n) => write!(f, "the run budget of {}", counted(*n, "token")),
            Limit::SessionRequests(n) => {
                write!(f, "the session budget of {}", counted(*n, "model request"))
            }
            Limit::SessionTokens(n) => write!(f, "the session budget of {}", counted(*n, "token")),
            Limit::RunCost(max) => write!(f, "the run's cost limit of {max}"),
            Limit::SessionCost { max, spent } => write!(f, "budget (money {spent} of {max})"),
            Limit::SessionWall { max_secs } => {
                write!(f, "budget (wall time of {})", duration(*max_secs))
            }
            Limit::Loop { what, times } => write!(f, "loop ({what} ×{times})"),
            Limit::Shared {
                profile,
                measure,
                window,
                max,
                spent,
            } => write!(
                f,
                "limit (profile {profile}: {} per {window})",
                measure.of(*spent, *max)
            ),
            Limit::RepeatedFailure { tool, times } => write!(
                f,
                "the loop guard: the same {tool} call failed the same way {} in a row",
                counted(*times, "time")
            ),
        }
    }
}

impl Limit {
    /// The words a stop says it with: `stopped: budget (money 2.00 of
    /// 2.00)` for the session's own limits and loops, `stopped by the run
    /// budget of 6 model requests` for the others.
    pub fn stop_line(&self) -> String {
        match self {
            Limit::SessionCost { .. }
            | Limit::SessionWall { .. }
            | Limit::Loop { .. }
            | Limit::Shared { .. } => {
                format!("stopped: {self}")
            }
            _ => format!("stopped by {self}"),
        }
    }

    /// The kind of limit, for a metric's label: `money`, `requests`,
    /// `tokens`, `wall_time`, `turn_requests`, `continuations`, `loop`,
    /// and for a profile's shared limits `profile_per_minute`,
    /// `profile_per_hour`, `profile_per_day`.
    pub fn kind(&self) -> &'static str {
        match self {
            Limit::Shared { window, .. } => match window {
                Window::Minute => "profile_per_minute",
                Window::Hour => "profile_per_hour",
                Window::Day => "profile_per_day",
            },
            Limit::TurnRequests(_) => "turn_requests",
            Limit::Continuations(_) => "continuations",
            Limit::RunRequests(_) | Limit::SessionRequests(_) => "requests",
            Limit::RunTokens(_) | Limit::SessionTokens(_) => "tokens",
            Limit::RunCost(_) | Limit::SessionCost { .. } => "money",
            Limit::SessionWall { .. } => "wall_time",
            Limit::Loop { .. } | Limit::RepeatedFailure { .. } => "loop",
        }
    }
}

/// What a shared limit counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Measure {
    /// Money at the profile's prices, in millionths.
    Money,
    /// Tokens (prompt + completion, as providers report them).
    Tokens,
    /// Model requests.
    Requests,
}

impl Measure {
    /// Its name, as in config keys and the database: `money`.
    pub fn as_str(self) -> &'static str {
        match self {
            Measure::Money => "money",
            Measure::Tokens => "tokens",
            Measure::Requests => "requests",
        }
    }

    /// `spent` of `max` for people: `money 2.10 of 2.00`, `1200 of 1000
    /// tokens`, `30 of 30 requests`.
    pub fn of(self, spent: u64, max: u64) -> String {
        match self {
            Measure::Money => format!(
                "money {} of {}",
                pod_llm::Cost::from_micros(spent),
                pod_llm::Cost::from_micros(max)
            ),
            Measure::Tokens => format!("{spent} of {}", counted(max, "token")),
            Measure::Requests => format!("{spent} of {}", counted(max, "request")),
        }
    }
}

/// The window a shared limit counts over: a calendar minute, hour or day
/// in UTC.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Window {
    /// A UTC minute.
    Minute,
    /// A UTC hour.
    Hour,
    /// A UTC day.
    Day,
}

impl Window {
    /// Its name, as in config keys and the database (PostgreSQL's
    /// `date_trunc` field): `day`.
    pub fn as_str(self) -> &'static str {
        match self {
            Window::Minute => "minute",
            Window::Hour => "hour",
            Window::Day => "day",
        }
    }

    /// Its length in seconds.
    pub fn secs(self) -> i64 {
        match self {
            Window::Minute => 60,
            Window::Hour => 3600,
            Window::Day => 86_400,
        }
    }
}

impl std::fmt::Display for Window {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Seconds as people write them: `90s`, `15m`, `2h`, `1h30m`.
fn duration(secs: u64) -> String {
    match (secs / 3600, secs % 3600 / 60, secs % 60) {
        (0, 0, s) => format!("{s}s"),
        (0, m, 0) => format!("{m}m"),
        (h, 0, 0) => format!("{h}h"),
        (h, m, 0) => format!("{h}h{m}m"),
        _ => format!("{secs}s"),
    }
}

/// `n` and `noun`, plural unless `n` is one: "1 model request", "2 model requests".
fn counted(n: impl Into<u64>, noun: &str) -> String {
    match n.into() {
        1 => format!("1 {noun}"),
        n => format!("{n} {noun}s"),
    }
}

/// A run's spending against its [`Budget`].
#[derive(Debug, Clone)]
pub struct BudgetMeter {
    budget: Budget,
    turn_requests: u32,
    continuations: u32,
    requests: u64,
    tokens: u64,
    last_failure: Option<FailedCall>,
    failures_in_a_row: u32,
}

#[derive(Debug, Clone, PartialEq)]
struct FailedCall {
    tool: String,
    arguments: String,
    content: String,
}

impl BudgetMeter {
    /// A run with nothing spent yet.
    pub fn new(budget: Budget) -> Self {
        Self {
            budget,
            turn_requests: 0,
            continuations: 0,
            requests: 0,
            tokens: 0,
            last_failure: None,
            failures_in_a_row: 0,
        }
    }

    /// The limits.
    pub fn budget(&self) -> &Budget {
        &self.budget
    }

    /// Requests made in the run so far.
    pub fn requests(&self) -> u64 {
        self.requests
    }

    /// Tokens spent in the run so far.
    pub fn tokens(&self) -> u64 {
        self.tokens
    }

    /// Continuations so far.
    pub fn continuations(&self) -> u32 {
        self.continuations
    }

    /// The limit that forbids another request, if one does.
    pub fn before_request(&self) -> Option<Limit> {
        let budget = &self.budget;
        if self.turn_requests >= budget.requests_per_turn {
            return Some(Limit::TurnRequests(budget.requests_per_turn));
        }
        if let Some(max) = budget.requests.filter(|max| self.requests >= *max) {
            return Some(Limit::RunRequests(max));
        }
        if let Some(max) = budget.tokens.filter(|max| self.tokens >= *max) {
            return Some(Limit::RunTokens(max));
        }
        None
    }

    /// A request is being sent.
    pub fn request_sent(&mut self) {
        self.turn_requests += 1;
        self.requests += 1;
    }

    /// A response reported its usage.
    pub fn spent_tokens(&mut self, tokens: u64) {
        self.tokens = self.tokens.saturating_add(tokens);
    }

    /// An interceptor asks to continue the run with a new turn: allowed,
    /// with a fresh per-turn count, unless the continuations are used up.
    pub fn continuation(&mut self) -> Result<(), Limit> {
        if let Some(max) = self
            .budget
            .continuations
            .filter(|max| self.continuations >= *max)
        {
            return Err(Limit::Continuations(max));
        }
        self.continuations += 1;
        self.turn_requests = 0;
        Ok(())
    }

    /// A tool call's result was committed. Returns the loop guard's limit
    /// when this is one identical failure too many.
    pub fn tool_result(
        &mut self,
        tool: &str,
        arguments: &str,
        content: &str,
        is_error: bool,
    ) -> Option<Limit> {
        if !is_error {
            self.last_failure = None;
            self.failures_in_a_row = 0;
            return None;
        }
        let call = FailedCall {
            tool: tool.to_string(),
            arguments: arguments.to_string(),
            content: content.to_string(),
        };
        if self.last_failure.as_ref() == Some(&call) {
            self.failures_in_a_row += 1;
        } else {
            self.last_failure = Some(call);
            self.failures_in_a_row = 1;
        }
        let max = self.budget.repeated_failures;
        (max > 0 && self.failures_in_a_row >= max).then(|| Limit::RepeatedFailure {
            tool: tool.to_string(),
            times: self.failures_in_a_row,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn budget() -> Budget {
        Budget {
            requests_per_turn: 3,
            continuations: Some(2),
            requests: Some(7),
            tokens: Some(1_000),
            repeated_failures: 3,
        }
    }

    #[test]
    fn each_continuation_gets_a_fresh_turn_count_until_they_run_out() {
        let mut meter = BudgetMeter::new(Budget {
            requests: None,
            ..budget()
        });
        for _ in 0..3 {
            assert_eq!(meter.before_request(), None);
            meter.request_sent();
        }
        assert_eq!(meter.before_request(), Some(Limit::TurnRequests(3)));
        assert_eq!(meter.continuation(), Ok(()));
        assert_eq!(meter.before_request(), None);
        assert_eq!(meter.continuation(), Ok(()));
        assert_eq!(meter.continuation(), Err(Limit::Continuations(2)));
        assert_eq!(meter.requests(), 3);
    }

    #[test]
    fn the_run_budgets_span_continuations() {
        let mut meter = BudgetMeter::new(Budget {
            continuations: None,
            ..budget()
        });
        for _ in 0..7 {
            if meter.before_request().is_some() {
                meter.continuation().unwrap();
            }
            meter.request_sent();
        }
        assert_eq!(meter.before_request(), Some(Limit::RunRequests(7)));

        let mut meter = BudgetMeter::new(budget());
        meter.spent_tokens(999);
        assert_eq!(meter.before_request(), None);
        meter.spent_tokens(1);
        assert_eq!(meter.before_request(), Some(Limit::RunTokens(1_000)));
    }

    #[test]
    fn only_identical_failures_in_a_row_trip_the_loop_guard() {
        let mut meter = BudgetMeter::new(budget());
        assert_eq!(meter.tool_result("bash", "{}", "exit 1", true), None);
        assert_eq!(meter.tool_result("bash", "{}", "exit 1", true), None);
        // Another error, a success, or other arguments start over.
        assert_eq!(meter.tool_result("bash", "{}", "exit 2", true), None);
        assert_eq!(meter.tool_result("bash", "{}", "exit 2", true), None);
        assert_eq!(meter.tool_result("bash", "{}", "ok", false), None);
        assert_eq!(meter.tool_result("bash", "{}", "exit 2", true), None);
        assert_eq!(meter.tool_result("bash", "{\"a\":1}", "exit 2", true), None);
        assert_eq!(meter.tool_result("bash", "{\"a\":1}", "exit 2", true), None);
        assert_eq!(
            meter.tool_result("bash", "{\"a\":1}", "exit 2", true),
            Some(Limit::RepeatedFailure {
                tool: "bash".into(),
                times: 3
            })
        );
    }

    #[test]
    fn zero_turns_the_loop_guard_off() {
        let mut meter = BudgetMeter::new(Budget {
            repeated_failures: 0,
            ..budget()
        });
        for _ in 0..10 {
            assert_eq!(meter.tool_result("x", "{}", "no", true), None);
        }
    }

    #[test]
    fn a_limit_of_one_is_said_in_the_singular() {
        assert_eq!(
            Limit::RunRequests(1).to_string(),
            "the run budget of 1 model request"
        );
        assert_eq!(
            Limit::TurnRequests(1).to_string(),
            "the per-turn budget of 1 model request"
        );
        assert_eq!(
            Limit::SessionRequests(2).to_string(),
            "the session budget of 2 model requests"
        );
        assert_eq!(Limit::RunTokens(1).to_string(), "the run budget of 1 token");
        assert_eq!(
            Limit::Continuations(1).to_string(),
            "the limit of 1 continuation"
        );
        assert_eq!(
            Limit::RepeatedFailure {
                tool: "bash".into(),
                times: 1
            }
            .to_string(),
            "the loop guard: the same bash call failed the same way 1 time in a row"
        );
    }

    #[test]
    fn the_sessions_own_limits_say_what_stopped_it() {
        let money = Limit::SessionCost {
            max: pod_llm::Cost::from_amount(2.0),
            spent: pod_llm::Cost::from_amount(2.1),
        };
        assert_eq!(money.stop_line(), "stopped: budget (money 2.10 of 2.00)");
        assert_eq!(money.kind(), "money");
        assert_eq!(
            Limit::SessionWall { max_secs: 7_200 }.stop_line(),
            "stopped: budget (wall time of 2h)"
        );
        let looped = Limit::Loop {
            what: "bash \"echo pending\"".into(),
            times: 7,
        };
        assert_eq!(
            looped.stop_line(),
            "stopped: loop (bash \"echo pending\" ×7)"
        );
        assert_eq!(looped.kind(), "loop");
        assert_eq!(
            Limit::RunRequests(6).stop_line(),
            "stopped by the run budget of 6 model requests"
        );
    }
}
