//! Provider faults driven through a real Pod (issue 9, "Provider faults").
//!
//! Each test starts a Pod in a temporary `POD_HOME` on a `RetryingProvider`
//! over the loopback server and runs one multi-step tool-calling turn while
//! the server misbehaves: rate-limit storms, 5xx and overload bursts, a
//! stalled stream, a reset in the middle of a call's arguments, garbage SSE
//! lines, empty responses, a 400. Every test then checks the same things:
//! the turn recovered or failed with an error naming the cause, the Pod's
//! history is valid, no tool ran twice (the `lookup` tool counts its runs),
//! and a following prompt works.
//!
//! The provider retries before the first event (fast policy below); once
//! events flowed, the Pod's worker sends the request again after its own
//! short delay (half a second of real time: `PodConfig` does not expose it,
//! and paused time cannot drive real sockets).

use parking_lot::Mutex;
use pod::{Pod, PodConfig, PodError, PodEvent, PodHandle, PodHome};
use pod_llm::{validate_history, Item, ItemKind, Provider};
use pod_providers::{
    AnthropicProvider, OpenAiProvider, OpenAiResponsesProvider, RetryPolicy, RetryingProvider,
};
use pod_testkit::provider::endpoint;
use pod_testkit::server::{anthropic_sse, LoopbackServer, Part, Reply};
use pod_testkit::wire::{anthropic_parts, openai_parts, response_id, responses_parts, Call, TOOL};
use pod_worker::{Tool, ToolContext, ToolOutput, ToolRegistry, TurnEndReason};
use serde_json::{json, Value};
use std::sync::Arc;
use std::time::Duration;
use tempfile::TempDir;
use tokio::sync::broadcast;

/// Which wire format the loopback server speaks.
#[derive(Clone, Copy, Debug)]
enum Wire {
    OpenAi,
    Anthropic,
    /// OpenAI's Responses API, following stored responses.
    Responses,
}

impl Wire {
    fn parts(self, text: &str, calls: &[Call]) -> Vec<String> {
        match self {
            Wire::OpenAi => openai_parts(text, calls),
            Wire::Anthropic => anthropic_parts(text, calls),
            Wire::Responses => responses_parts(text, calls),
        }
    }

    fn step(self, text: &str, calls: &[Call]) -> Reply {
        Reply::sse(self.parts(text, calls))
    }

    /// The provider a profile would build, with tiny backoffs so storms pass
    /// in milliseconds.
    fn provider(self, server: &LoopbackServer, idle: Duration) -> Arc<dyn Provider> {
        let policy = RetryPolicy {
            max_attempts: ATTEMPTS,
            base_delay: Duration::from_millis(1),
            max_delay: Duration::from_millis(5),
            max_retry_after: Duration::from_secs(1),
        };
        match self {
            Wire::OpenAi => {
                let mut endpoint = endpoint(server.url("/v1"));
                endpoint.timeouts.idle = idle;
                Arc::new(RetryingProvider::new(
                    OpenAiProvider::new(endpoint).unwrap(),
                    policy,
                ))
            }
            Wire::Anthropic => {
                let mut endpoint = endpoint(server.url(""));
                endpoint.timeouts.idle = idle;
                Arc::new(RetryingProvider::new(
                    AnthropicProvider::new(endpoint).unwrap(),
                    policy,
                ))
            }
            Wire::Responses => {
                let mut endpoint = endpoint(server.url("/v1"));
                endpoint.timeouts.idle = idle;
                Arc::new(RetryingProvider::new(
                    OpenAiResponsesProvider::new(endpoint, true).unwrap(),
                    policy,
                ))
            }
        }
    }
}

/// Attempts of the provider's retry policy, the first included.
const ATTEMPTS: u32 = 4;

// The turn every test runs: two parallel calls, one more call, an answer.
const STEP1_TEXT: &str = "Looking up a and b.";
const STEP1_CALLS: &[Call] = &[("c1", r#"{"key":"a"}"#), ("c2", r#"{"key":"b"}"#)];
const STEP2_CALLS: &[Call] = &[("c3", r#"{"key":"c"}"#)];
const ANSWER: &str = "a, b and c are known.";
const FOLLOW_UP: &str = "Still here.";

fn step1(wire: Wire) -> Reply {
    wire.step(STEP1_TEXT, STEP1_CALLS)
}

fn step2(wire: Wire) -> Reply {
    wire.step("", STEP2_CALLS)
}

fn answer(wire: Wire) -> Reply {
    wire.step(ANSWER, &[])
}

/// The answer to the prompt that checks the Pod is still usable.
fn follow_up(wire: Wire) -> Reply {
    wire.step(FOLLOW_UP, &[])
}

/// Every key the `lookup` tool was run with, in order of execution.
#[derive(Clone, Default)]
struct Runs(
    // Written by the tool inside the Pod's task, read by the test.
    Arc<Mutex<Vec<String>>>,
);

impl Runs {
    fn sorted(&self) -> Vec<String> {
        let mut keys = self.0.lock().clone();
        keys.sort();
        keys
    }
}

/// `lookup`, counting its executions.
struct CountingLookup(Runs);

#[derive(serde::Deserialize)]
struct LookupArgs {
    key: String,
}

#[async_trait::async_trait]
impl Tool for CountingLookup {
    type Args = LookupArgs;

    fn name(&self) -> &str {
        TOOL
    }

    fn description(&self) -> String {
        "Looks up a key.".into()
    }

    fn parameters(&self) -> Arc<Value> {
        Arc::new(
            json!({"type": "object", "properties": {"key": {"type": "string"}}, "required": ["key"]}),
        )
    }

    async fn call(&self, args: LookupArgs, _ctx: ToolContext) -> ToolOutput {
        self.0 .0.lock().push(args.key.clone());
        ToolOutput::ok(format!("value of {}", args.key))
    }
}

/// A Pod in a temporary home, on a provider over the loopback server.
struct FaultPod {
    server: LoopbackServer,
    pod: PodHandle,
    runs: Runs,
    events: broadcast::Receiver<PodEvent>,
    // Holds POD_HOME and the workspace until the test ends.
    _dir: TempDir,
}

impl FaultPod {
    async fn start(wire: Wire, replies: Vec<Reply>) -> Self {
        Self::start_with_idle(wire, replies, Duration::from_secs(5)).await
    }

    async fn start_with_idle(wire: Wire, replies: Vec<Reply>, idle: Duration) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let server = LoopbackServer::start(replies).await;
        let runs = Runs::default();
        let mut config = PodConfig::new(
            PodHome::new(dir.path().join("home")),
            dir.path(),
            wire.provider(&server, idle),
        );
        let mut tools = ToolRegistry::new();
        tools.register(CountingLookup(runs.clone()));
        config.tools = tools;
        // Every event of a test fits, so none is lost to lagging.
        config.event_capacity = 1024;
        let pod = Pod::spawn(config).await.unwrap();
        let events = pod.subscribe();
        Self {
            server,
            pod,
            runs,
            events,
            _dir: dir,
        }
    }

    /// Runs the turn every test uses.
    async fn run_turn(&self) -> Result<TurnEndReason, PodError> {
        self.pod
            .prompt("Look up a, b and c.")
            .await
            .map(|outcome| outcome.reason)
    }

    /// The Pod's history from its log, checked for validity.
    async fn history(&self) -> Vec<Item> {
        let history = self.pod.get_history().await.unwrap();
        validate_history(&history).unwrap();
        history
    }

    /// Asserts the whole turn went through: every call once in history, with
    /// its result, and every tool run exactly once.
    async fn assert_turn_completed(&self) {
        let history = self.history().await;
        assert_eq!(call_ids(&history), ["c1", "c2", "c3"]);
        assert_eq!(self.runs.sorted(), ["a", "b", "c"]);
        assert_eq!(last_text(&history), ANSWER);
    }

    /// Asserts the Pod answers a following prompt (the server's next reply
    /// must be [`follow_up`]) with a valid history and no further tool run.
    async fn assert_usable(&self) {
        let runs = self.runs.sorted();
        let outcome = self.pod.prompt("Still there?").await.unwrap();
        assert_eq!(outcome.reason, TurnEndReason::EndTurn);
        let history = self.history().await;
        assert_eq!(last_text(&history), FOLLOW_UP);
        assert_eq!(self.runs.sorted(), runs, "no tool ran again");
    }

    /// The events broadcast so far.
    fn events(&mut self) -> Vec<PodEvent> {
        let mut events = Vec::new();
        while let Ok(event) = self.events.try_recv() {
            events.push(event);
        }
        events
    }

    /// The errors of the worker's re-sent requests, in order.
    fn resends(&mut self) -> Vec<String> {
        self.events()
            .into_iter()
            .filter_map(|event| match event {
                PodEvent::RequestRetried { error, .. } => Some(error),
                _ => None,
            })
            .collect()
    }
}

fn call_ids(history: &[Item]) -> Vec<String> {
    history
        .iter()
        .flat_map(|item| item.tool_calls().iter().map(|call| call.id.clone()))
        .collect()
}

fn last_text(history: &[Item]) -> String {
    match history.last().map(|item| &item.kind) {
        Some(ItemKind::Assistant { text, .. }) => text.clone(),
        other => panic!("history ends with {other:?}"),
    }
}

/// The first `writes` SSE writes of `parts`, then `end`.
fn cut(parts: Vec<String>, writes: usize, end: Part) -> Reply {
    Reply::sse(parts.into_iter().take(writes)).then(end)
}

fn rate_limited(retry_after: (&str, &str)) -> Reply {
    Reply::status(
        429,
        r#"{"error":{"message":"Rate limit reached for requests","type":"requests"}}"#,
    )
    .header(retry_after.0, retry_after.1)
}

#[tokio::test]
async fn rate_limit_storm_with_retry_after_is_ridden_out() {
    let wire = Wire::OpenAi;
    let replies = vec![
        rate_limited(("retry-after", "0")),
        rate_limited(("retry-after-ms", "5")),
        rate_limited(("retry-after", "0.01")),
        step1(wire),
        rate_limited(("retry-after-ms", "1")),
        rate_limited(("retry-after", "0")),
        step2(wire),
        answer(wire),
        follow_up(wire),
    ];
    let mut pod = FaultPod::start(wire, replies).await;
    assert_eq!(pod.run_turn().await.unwrap(), TurnEndReason::EndTurn);
    pod.assert_turn_completed().await;
    let bodies = pod.server.bodies();
    assert_eq!(bodies.len(), 8);
    assert!(bodies[..4].iter().all(|b| b == &bodies[0]), "same request");
    assert!(bodies[4..7].iter().all(|b| b == &bodies[4]), "same request");
    assert_eq!(pod.resends(), Vec::<String>::new(), "the provider retried");
    pod.assert_usable().await;
}

#[tokio::test]
async fn rate_limit_storm_longer_than_the_attempts_fails_the_turn_naming_it() {
    let wire = Wire::OpenAi;
    let mut replies = vec![step1(wire)];
    replies.extend((0..ATTEMPTS).map(|_| rate_limited(("retry-after-ms", "1"))));
    replies.push(follow_up(wire));
    let pod = FaultPod::start(wire, replies).await;
    let err = pod.run_turn().await.unwrap_err().to_string();
    assert!(err.contains("HTTP 429"), "{err}");
    assert!(err.contains("Rate limit reached for requests"), "{err}");
    let history = pod.history().await;
    assert_eq!(call_ids(&history), ["c1", "c2"]);
    assert_eq!(pod.runs.sorted(), ["a", "b"]);
    assert_eq!(pod.server.requests().len(), 1 + ATTEMPTS as usize);
    pod.assert_usable().await;
}

#[tokio::test]
async fn server_error_burst_is_retried() {
    let wire = Wire::OpenAi;
    let down = |status| Reply::status(status, r#"{"error":{"message":"upstream unavailable"}}"#);
    let replies = vec![
        down(500),
        down(502),
        step1(wire),
        down(503),
        step2(wire),
        answer(wire),
        follow_up(wire),
    ];
    let pod = FaultPod::start(wire, replies).await;
    assert_eq!(pod.run_turn().await.unwrap(), TurnEndReason::EndTurn);
    pod.assert_turn_completed().await;
    assert_eq!(pod.server.requests().len(), 6);
    pod.assert_usable().await;
}

fn overloaded_status() -> Reply {
    Reply::status(
        529,
        r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#,
    )
}

#[tokio::test]
async fn anthropic_529_overloaded_burst_is_retried() {
    let wire = Wire::Anthropic;
    let replies = vec![
        overloaded_status(),
        step1(wire),
        overloaded_status(),
        overloaded_status(),
        overloaded_status(),
        step2(wire),
        answer(wire),
        follow_up(wire),
    ];
    let mut pod = FaultPod::start(wire, replies).await;
    assert_eq!(pod.run_turn().await.unwrap(), TurnEndReason::EndTurn);
    pod.assert_turn_completed().await;
    assert_eq!(pod.server.requests().len(), 7);
    assert_eq!(pod.resends(), Vec::<String>::new(), "the provider retried");
    pod.assert_usable().await;
}

#[tokio::test]
async fn anthropic_529_beyond_the_attempts_fails_the_turn_naming_it() {
    let wire = Wire::Anthropic;
    let mut replies = vec![step1(wire), step2(wire)];
    replies.extend((0..ATTEMPTS).map(|_| overloaded_status()));
    replies.push(follow_up(wire));
    let pod = FaultPod::start(wire, replies).await;
    let err = pod.run_turn().await.unwrap_err().to_string();
    assert!(err.contains("HTTP 529"), "{err}");
    assert!(err.contains("overloaded_error: Overloaded"), "{err}");
    let history = pod.history().await;
    assert_eq!(call_ids(&history), ["c1", "c2", "c3"]);
    assert_eq!(pod.runs.sorted(), ["a", "b", "c"]);
    pod.assert_usable().await;
}

/// Anthropic's in-stream `event: error`.
fn overloaded_event() -> String {
    anthropic_sse(&[
        json!({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}),
    ])
    .remove(0)
}

#[tokio::test]
async fn anthropic_overloaded_event_before_content_is_retried_by_the_provider() {
    let wire = Wire::Anthropic;
    // `message_start`, then the error: nothing reached the Pod yet.
    let mut first = wire.parts(STEP1_TEXT, STEP1_CALLS);
    first.truncate(1);
    first.push(overloaded_event());
    let replies = vec![
        Reply::sse(first),
        step1(wire),
        step2(wire),
        answer(wire),
        follow_up(wire),
    ];
    let mut pod = FaultPod::start(wire, replies).await;
    assert_eq!(pod.run_turn().await.unwrap(), TurnEndReason::EndTurn);
    pod.assert_turn_completed().await;
    assert_eq!(pod.server.requests().len(), 4);
    assert_eq!(pod.resends(), Vec::<String>::new(), "the provider retried");
    pod.assert_usable().await;
}

#[tokio::test]
async fn anthropic_overloaded_event_mid_tool_call_is_resent_and_the_tool_runs_once() {
    let wire = Wire::Anthropic;
    // message_start, the thinking block (4 writes), the text block (3), the
    // first call's start and its first input fragment; then the error.
    let mut broken = wire.parts(STEP1_TEXT, STEP1_CALLS);
    broken.truncate(10);
    assert!(broken[9].contains("input_json_delta"), "{}", broken[9]);
    broken.push(overloaded_event());
    let replies = vec![
        Reply::sse(broken),
        step1(wire),
        step2(wire),
        answer(wire),
        follow_up(wire),
    ];
    let mut pod = FaultPod::start(wire, replies).await;
    assert_eq!(pod.run_turn().await.unwrap(), TurnEndReason::EndTurn);
    pod.assert_turn_completed().await;
    let resends = pod.resends();
    assert_eq!(resends.len(), 1, "{resends:?}");
    assert!(resends[0].contains("overloaded_error"), "{resends:?}");
    let bodies = pod.server.bodies();
    assert_eq!(bodies[0], bodies[1], "the worker re-sent the same request");
    pod.assert_usable().await;
}

#[tokio::test]
async fn stalled_stream_times_out_and_is_sent_again() {
    let wire = Wire::OpenAi;
    // The first stall comes before any event (the provider retries), the
    // second after the call's header (the worker sends the request again).
    let mut stalled = wire.parts("", STEP2_CALLS);
    stalled.truncate(1);
    let replies = vec![
        Reply::sse([": keep-alive\n\n"]).then(Part::Stall),
        step1(wire),
        Reply::sse(stalled).then(Part::Stall),
        step2(wire),
        answer(wire),
        follow_up(wire),
    ];
    let idle = Duration::from_millis(200);
    let mut pod = FaultPod::start_with_idle(wire, replies, idle).await;
    assert_eq!(pod.run_turn().await.unwrap(), TurnEndReason::EndTurn);
    pod.assert_turn_completed().await;
    assert_eq!(pod.server.requests().len(), 5);
    let resends = pod.resends();
    assert_eq!(resends, ["no data from the provider for 200ms"]);
    pod.assert_usable().await;
}

#[tokio::test]
async fn stream_that_stalls_on_every_attempt_fails_the_turn_naming_the_idle_timeout() {
    let wire = Wire::OpenAi;
    let mut replies: Vec<Reply> = (0..ATTEMPTS)
        .map(|_| Reply::sse([": keep-alive\n\n"]).then(Part::Stall))
        .collect();
    replies.push(follow_up(wire));
    let idle = Duration::from_millis(100);
    let pod = FaultPod::start_with_idle(wire, replies, idle).await;
    let err = pod.run_turn().await.unwrap_err().to_string();
    assert!(err.contains("no data from the provider for 100ms"), "{err}");
    assert_eq!(call_ids(&pod.history().await), Vec::<String>::new());
    pod.assert_usable().await;
    assert_eq!(pod.runs.sorted(), Vec::<String>::new());
}

/// The first answer is reset after its text, both call headers and the
/// first fragment of `c1`'s arguments; the worker sends the request again.
async fn reset_mid_tool_call_arguments(wire: Wire, writes: usize) {
    let parts = wire.parts(STEP1_TEXT, STEP1_CALLS);
    let last = &parts[writes - 1];
    assert!(last.contains(r#"{\"key"#), "cut after a fragment: {last}");
    let replies = vec![
        cut(parts, writes, Part::Reset),
        step1(wire),
        step2(wire),
        answer(wire),
        follow_up(wire),
    ];
    let mut pod = FaultPod::start(wire, replies).await;
    assert_eq!(pod.run_turn().await.unwrap(), TurnEndReason::EndTurn);
    pod.assert_turn_completed().await;
    let resends = pod.resends();
    assert_eq!(resends.len(), 1, "{resends:?}");
    assert!(resends[0].starts_with("connection failed"), "{resends:?}");
    let bodies = pod.server.bodies();
    assert_eq!(bodies.len(), 4);
    assert_eq!(bodies[0], bodies[1], "the worker re-sent the same request");
    pod.assert_usable().await;
}

#[tokio::test]
async fn openai_reset_mid_tool_call_arguments_runs_each_tool_once() {
    // Text, two call headers, c1's first fragment.
    reset_mid_tool_call_arguments(Wire::OpenAi, 4).await;
}

#[tokio::test]
async fn anthropic_reset_mid_tool_call_arguments_runs_each_tool_once() {
    // message_start, thinking (4), text (3), c1's start and first fragment.
    reset_mid_tool_call_arguments(Wire::Anthropic, 10).await;
}

#[tokio::test]
async fn responses_reset_mid_tool_call_arguments_runs_each_tool_once() {
    // created, the text message (3), c1's header and first fragment.
    reset_mid_tool_call_arguments(Wire::Responses, 6).await;
}

#[tokio::test]
async fn reset_on_every_resend_fails_the_turn_and_runs_no_tool_of_it() {
    let wire = Wire::OpenAi;
    let broken = || cut(wire.parts(STEP1_TEXT, STEP1_CALLS), 4, Part::Reset);
    // The first attempt and the worker's two resends (`stream_retries`).
    let replies = vec![broken(), broken(), broken(), follow_up(wire)];
    let mut pod = FaultPod::start(wire, replies).await;
    let err = pod.run_turn().await.unwrap_err().to_string();
    assert!(err.contains("connection failed"), "{err}");
    assert_eq!(pod.resends().len(), 2);
    assert_eq!(call_ids(&pod.history().await), Vec::<String>::new());
    assert_eq!(pod.runs.sorted(), Vec::<String>::new());
    pod.assert_usable().await;
}

#[tokio::test]
async fn stray_sse_fields_comments_and_unknown_json_fields_are_ignored() {
    let wire = Wire::OpenAi;
    let noisy = |parts: Vec<String>| {
        let mut out = vec![": keep-alive\n\n".to_string(), "retry: 3000\n\n".into()];
        for (n, part) in parts.into_iter().enumerate() {
            out.push(format!(
                "id: {n}\nevent: completion.chunk\nx-vendor: yes\nnonsense\n"
            ));
            // Unknown fields in a chunk, as every compatible server adds some.
            out.push(part.replacen(
                "{\"choices\"",
                "{\"object\":\"chat.completion.chunk\",\"system_fingerprint\":\"fp_1\",\"x_extra\":{\"a\":[1]},\"choices\"",
                1,
            ));
            out.push("data:\n\n: still thinking\n\n".into());
        }
        Reply::sse(out)
    };
    let replies = vec![
        noisy(wire.parts(STEP1_TEXT, STEP1_CALLS)),
        noisy(wire.parts("", STEP2_CALLS)),
        noisy(wire.parts(ANSWER, &[])),
        follow_up(wire),
    ];
    let mut pod = FaultPod::start(wire, replies).await;
    assert_eq!(pod.run_turn().await.unwrap(), TurnEndReason::EndTurn);
    pod.assert_turn_completed().await;
    assert_eq!(pod.server.requests().len(), 3);
    assert_eq!(pod.resends(), Vec::<String>::new());
    pod.assert_usable().await;
}

#[tokio::test]
async fn non_json_data_line_fails_the_turn_as_malformed_without_a_resend() {
    let wire = Wire::OpenAi;
    // A proxy's error page in the middle of c3's arguments.
    let mut garbled = wire.parts("", STEP2_CALLS);
    garbled.insert(2, "data: <html>502 Bad Gateway</html>\n\n".into());
    let replies = vec![step1(wire), Reply::sse(garbled), follow_up(wire)];
    let mut pod = FaultPod::start(wire, replies).await;
    let err = pod.run_turn().await.unwrap_err().to_string();
    assert!(err.contains("malformed response"), "{err}");
    assert!(err.contains("<html>502 Bad Gateway</html>"), "{err}");
    assert_eq!(
        pod.resends(),
        Vec::<String>::new(),
        "malformed is not retried"
    );
    assert_eq!(pod.server.requests().len(), 2);
    let history = pod.history().await;
    assert_eq!(call_ids(&history), ["c1", "c2"]);
    assert_eq!(pod.runs.sorted(), ["a", "b"]);
    pod.assert_usable().await;
}

#[tokio::test]
async fn empty_200_response_is_retried_by_the_provider() {
    let wire = Wire::OpenAi;
    let empty = || Reply::sse(Vec::<String>::new());
    let replies = vec![
        empty(),
        step1(wire),
        empty(),
        empty(),
        step2(wire),
        answer(wire),
        follow_up(wire),
    ];
    let mut pod = FaultPod::start(wire, replies).await;
    assert_eq!(pod.run_turn().await.unwrap(), TurnEndReason::EndTurn);
    pod.assert_turn_completed().await;
    assert_eq!(pod.server.requests().len(), 6);
    assert_eq!(pod.resends(), Vec::<String>::new(), "the provider retried");
    pod.assert_usable().await;
}

#[tokio::test]
async fn only_empty_200_responses_fail_the_turn_naming_it() {
    for wire in [Wire::OpenAi, Wire::Anthropic, Wire::Responses] {
        let mut replies = vec![step1(wire)];
        replies.extend((0..ATTEMPTS).map(|_| Reply::sse(Vec::<String>::new())));
        replies.push(follow_up(wire));
        let pod = FaultPod::start(wire, replies).await;
        let err = pod.run_turn().await.unwrap_err().to_string();
        assert!(
            err.contains("connection failed: stream ended before"),
            "{wire:?}: {err}"
        );
        assert_eq!(call_ids(&pod.history().await), ["c1", "c2"]);
        assert_eq!(pod.runs.sorted(), ["a", "b"]);
        pod.assert_usable().await;
    }
}

#[tokio::test]
async fn bad_request_mid_session_surfaces_its_message_and_the_pod_stays_usable() {
    let wire = Wire::OpenAi;
    let bad = Reply::status(
        400,
        r#"{"error":{"message":"Invalid 'messages[3].content': string too long","type":"invalid_request_error","code":"string_above_max_length"}}"#,
    );
    let replies = vec![step1(wire), bad, follow_up(wire)];
    let mut pod = FaultPod::start(wire, replies).await;
    let err = pod.run_turn().await.unwrap_err();
    assert!(matches!(err, PodError::Turn(_)), "{err:?}");
    assert_eq!(
        err.to_string(),
        "turn failed: provider returned HTTP 400: invalid_request_error: Invalid 'messages[3].content': string too long"
    );
    let errors: Vec<String> = pod
        .events()
        .into_iter()
        .filter_map(|event| match event {
            PodEvent::TurnFailed { message } => Some(message),
            _ => None,
        })
        .collect();
    assert_eq!(errors, [err.to_string()], "front ends are told");
    assert_eq!(pod.server.requests().len(), 2, "a 400 is not retried");
    assert_eq!(call_ids(&pod.history().await), ["c1", "c2"]);
    assert_eq!(pod.runs.sorted(), ["a", "b"]);
    pod.assert_usable().await;
}

/// On the Responses wire a Pod's requests follow the stored responses,
/// through a mid-stream reset (the re-sent request follows the same one),
/// and a resumed session's first request goes out whole.
#[tokio::test]
async fn responses_pod_follows_stored_responses_until_it_is_resumed() {
    let wire = Wire::Responses;
    let parts = wire.parts("", STEP2_CALLS);
    let replies = vec![
        step1(wire),
        // c3's header and first fragment, then a reset.
        cut(parts, 3, Part::Reset),
        step2(wire),
        answer(wire),
        follow_up(wire),
        wire.step("Resumed.", &[]),
    ];
    let mut pod = FaultPod::start(wire, replies).await;
    assert_eq!(pod.run_turn().await.unwrap(), TurnEndReason::EndTurn);
    pod.assert_turn_completed().await;
    assert_eq!(pod.resends().len(), 1);
    pod.assert_usable().await;
    let bodies = pod.server.bodies();
    assert_eq!(bodies.len(), 5);
    let previous = |n: usize| {
        bodies[n]["previous_response_id"]
            .as_str()
            .map(str::to_owned)
    };
    assert_eq!(previous(0), None);
    let after_step1 = Some(response_id(STEP1_TEXT, STEP1_CALLS));
    assert_eq!(previous(1), after_step1);
    assert_eq!(
        bodies[1], bodies[2],
        "the re-sent request follows the same response"
    );
    assert_eq!(previous(3), Some(response_id("", STEP2_CALLS)));
    assert_eq!(previous(4), Some(response_id(ANSWER, &[])));
    assert_eq!(
        bodies[4]["input"],
        json!([{"role": "user", "content": "Still there?"}])
    );
    // The session in a new process: its provider holds no chain.
    let id = pod.pod.session_id();
    pod.pod.shutdown().await.unwrap();
    let mut config = PodConfig::new(
        PodHome::new(pod._dir.path().join("home")),
        pod._dir.path(),
        wire.provider(&pod.server, Duration::from_secs(5)),
    );
    let mut tools = ToolRegistry::new();
    tools.register(CountingLookup(pod.runs.clone()));
    config.tools = tools;
    let resumed = Pod::resume(id, config).await.unwrap();
    resumed.prompt("And now?").await.unwrap();
    let history = resumed.get_history().await.unwrap();
    validate_history(&history).unwrap();
    assert_eq!(last_text(&history), "Resumed.");
    let last = pod.server.bodies().pop().unwrap();
    assert!(last.get("previous_response_id").is_none(), "{last}");
    let input = last["input"].as_array().unwrap();
    assert_eq!(
        input[0],
        json!({"role": "user", "content": "Look up a, b and c."})
    );
    assert_eq!(
        input.last(),
        Some(&json!({"role": "user", "content": "And now?"}))
    );
    resumed.shutdown().await.unwrap();
}

/// A server that says inside the stream that it lost the stored response:
/// the provider drops the chain and sends the request again, whole, before
/// anything reached the Pod.
#[tokio::test]
async fn responses_lost_response_reported_in_the_stream_is_sent_again_whole() {
    let wire = Wire::Responses;
    let lost = json!({"type": "error", "error": {"type": "invalid_request_error",
        "code": "previous_response_not_found", "message": "Previous response not found."}});
    let replies = vec![
        step1(wire),
        Reply::sse(anthropic_sse(&[lost])),
        step2(wire),
        answer(wire),
        follow_up(wire),
    ];
    let mut pod = FaultPod::start(wire, replies).await;
    assert_eq!(pod.run_turn().await.unwrap(), TurnEndReason::EndTurn);
    pod.assert_turn_completed().await;
    assert_eq!(
        pod.resends(),
        Vec::<String>::new(),
        "the provider resent it"
    );
    let bodies = pod.server.bodies();
    assert_eq!(
        bodies[1]["previous_response_id"],
        response_id(STEP1_TEXT, STEP1_CALLS)
    );
    assert!(bodies[2].get("previous_response_id").is_none());
    assert_eq!(
        bodies[2]["input"].as_array().unwrap().len(),
        6,
        "{}",
        bodies[2]
    );
    // The whole request started a new chain, which the next one follows.
    assert_eq!(
        bodies[3]["previous_response_id"],
        response_id("", STEP2_CALLS)
    );
    pod.assert_usable().await;
}
