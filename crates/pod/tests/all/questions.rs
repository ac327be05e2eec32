//! Questions kept in the log: recorded before anyone is asked, answered
//! once, parked turns that survive their Pod, and what replay rebuilds
//! (open questions, answers given while parked, standing answers,
//! timeouts).

use crate::support::{result_of, ScriptedApprover, TestPod};
use pod::log::{LogRecord, SessionHeader};
use pod::questions::{self, Answerer};
use pod::{ApprovalDecision, ApprovalRequest, Approver, CancellationToken, PodConfig, PodError};
use pod::{PodEvent, PodHandle, ToolPolicy};
use pod_llm::{validate_history, Item, ScriptStep};
use pod_testkit::tools::Echo;
use pod_worker::{ToolRegistry, TurnEndReason};
use serde_json::json;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use uuid::Uuid;

/// How long an answer waits for a session still parking (none here: the
/// Pods are shut down before).
const WAIT: std::time::Duration = std::time::Duration::ZERO;

fn echo_call(text: &str) -> ScriptStep {
    ScriptStep::tool_call("echo", json!({ "text": text }))
}

/// A config where `echo` asks, with one shared echo (its runs counted
/// across Pods) and `approver`.
fn asking(test: &TestPod, echo: &Echo, approver: Option<Arc<dyn Approver>>) -> PodConfig {
    let mut config = test.config();
    let mut tools = ToolRegistry::new();
    tools.register(echo.clone());
    config.tools = tools;
    config.approval.set("echo", ToolPolicy::Ask);
    config.approver = approver;
    config
}

async fn records(config: &PodConfig, id: Uuid) -> Vec<LogRecord> {
    config.store().read(id).await.expect("read log").records
}

fn questions_in(records: &[LogRecord]) -> Vec<&pod::log::QuestionRecord> {
    records
        .iter()
        .filter_map(|r| match r {
            LogRecord::Question(q) => Some(q),
            _ => None,
        })
        .collect()
}

fn answers_in(records: &[LogRecord]) -> Vec<&pod::log::AnswerRecord> {
    records
        .iter()
        .filter_map(|r| match r {
            LogRecord::Answer(a) => Some(a),
            _ => None,
        })
        .collect()
}

/// An approver that, when asked, looks whether the question is already in
/// the session's log, then allows.
struct Peeking {
    store: pod::Store,
    seen_in_log: parking_lot::Mutex<Vec<bool>>,
}

#[async_trait::async_trait]
impl Approver for Peeking {
    async fn decide(&self, request: ApprovalRequest, _: CancellationToken) -> ApprovalDecision {
        let mut found = false;
        for id in self.store.list().await.expect("list") {
            let records = self.store.read(id).await.expect("read").records;
            found |= questions_in(&records)
                .iter()
                .any(|q| q.request.call_id == request.call_id);
        }
        self.seen_in_log.lock().push(found);
        ApprovalDecision::AllowOnce
    }

    fn answerer(&self) -> Answerer {
        Answerer {
            via: "test".into(),
            by: Some("ada".into()),
            from: Some("bench-3".into()),
        }
    }
}

/// Answers every question `Later`: the turn parks.
struct Parker;

#[async_trait::async_trait]
impl Approver for Parker {
    async fn decide(&self, _: ApprovalRequest, _: CancellationToken) -> ApprovalDecision {
        ApprovalDecision::Later
    }
}

#[tokio::test]
async fn a_question_is_in_the_log_before_anyone_is_asked_and_its_answer_after() {
    let test = TestPod::new(vec![echo_call("hi"), ScriptStep::text("done")]);
    let echo = Echo::default();
    let peeking = Arc::new(Peeking {
        store: test.config().store(),
        seen_in_log: Default::default(),
    });
    let config = asking(&test, &echo, Some(peeking.clone()));
    let pod = pod::Pod::spawn(config.clone()).await.expect("spawn");
    let mut events = pod.subscribe();
    let outcome = pod.prompt("go").await.expect("turn");
    assert_eq!(outcome.reason, TurnEndReason::EndTurn);
    assert_eq!(*peeking.seen_in_log.lock(), [true]);
    let id = pod.session_id();
    pod.shutdown().await.expect("shutdown");
    let records = records(&config, id).await;
    let asked = questions_in(&records);
    let answered = answers_in(&records);
    assert_eq!(asked.len(), 1);
    assert_eq!(asked[0].request.tool, "echo");
    assert_eq!(answered.len(), 1);
    assert_eq!(answered[0].question, asked[0].id);
    assert_eq!(answered[0].decision, ApprovalDecision::AllowOnce);
    assert_eq!(
        (
            answered[0].via.as_str(),
            answered[0].by.as_deref(),
            answered[0].from.as_deref()
        ),
        ("test", Some("ada"), Some("bench-3"))
    );
    assert!(!answered[0].pending);
    // The question sits before its answer, and both before the result.
    let position = |pred: &dyn Fn(&LogRecord) -> bool| records.iter().position(pred).unwrap();
    let q = position(&|r| matches!(r, LogRecord::Question(_)));
    let a = position(&|r| matches!(r, LogRecord::Answer(_)));
    let result = position(
        &|r| matches!(r, LogRecord::Item(item) if matches!(item.kind, pod_llm::ItemKind::ToolResult { .. })),
    );
    assert!(q < a && a < result, "{q} {a} {result}");
    assert_eq!(echo.runs.load(Ordering::SeqCst), 1);
    // Front ends heard of both.
    let mut heard = Vec::new();
    while let Ok(event) = events.try_recv() {
        match event {
            PodEvent::QuestionAsked { .. } => heard.push("asked"),
            PodEvent::QuestionAnswered { .. } => heard.push("answered"),
            _ => {}
        }
    }
    assert_eq!(heard, ["asked", "answered"]);
}

async fn parked_session(test: &TestPod, echo: &Echo) -> (PodConfig, Uuid) {
    let config = asking(test, echo, Some(Arc::new(Parker)));
    let pod = pod::Pod::spawn(config.clone()).await.expect("spawn");
    let outcome = pod.prompt("go").await.expect("turn");
    assert!(
        matches!(&outcome.reason, TurnEndReason::Parked(why) if why.contains("waiting for an answer")),
        "{:?}",
        outcome.reason
    );
    let id = pod.session_id();
    pod.shutdown().await.expect("shutdown");
    (config, id)
}

async fn resume(config: &PodConfig, id: Uuid) -> PodHandle {
    pod::Pod::resume(id, config.clone()).await.expect("resume")
}

#[tokio::test]
async fn a_parked_question_survives_its_pod_and_the_answer_runs_the_call_once() {
    let test = TestPod::new(vec![echo_call("hi"), ScriptStep::text("done")]);
    let echo = Echo::default();
    let (config, id) = parked_session(&test, &echo).await;
    let records_now = records(&config, id).await;
    let asked = questions_in(&records_now);
    assert_eq!(asked.len(), 1);
    assert!(answers_in(&records_now).is_empty());
    assert_eq!(echo.runs.load(Ordering::SeqCst), 0);

    // Resumed where nobody can answer: it parks again, the question is
    // not asked again, and no "interrupted" result closes the call.
    let mut nobody = config.clone();
    nobody.approver = None;
    let pod = resume(&nobody, id).await;
    let outcome = pod.continue_turn().await.expect("turn");
    assert!(matches!(outcome.reason, TurnEndReason::Parked(_)));
    pod.shutdown().await.expect("shutdown");
    let records_now = records(&config, id).await;
    assert_eq!(questions_in(&records_now).len(), 1);
    assert!(!records_now.iter().any(|r| matches!(
        r,
        LogRecord::Item(Item {
            kind: pod_llm::ItemKind::ToolResult { .. },
            ..
        })
    )));

    // Answered from elsewhere while parked; a second answer loses.
    let store = config.store();
    let by = Answerer::via("cli");
    let question = asked[0].id;
    let answered = questions::answer(&store, id, question, ApprovalDecision::AllowOnce, &by, WAIT)
        .await
        .expect("answer");
    assert!(answered.answer.pending);
    let late = questions::answer(
        &store,
        id,
        question,
        ApprovalDecision::RejectOnce,
        &by,
        WAIT,
    )
    .await;
    assert!(
        matches!(
            late,
            Err(PodError::AlreadyAnswered {
                decision: ApprovalDecision::AllowOnce,
                ..
            })
        ),
        "{late:?}"
    );

    // The session continues with nobody to ask: the recorded answer runs
    // the call, once.
    let pod = resume(&nobody, id).await;
    let outcome = pod.continue_turn().await.expect("turn");
    assert_eq!(outcome.reason, TurnEndReason::EndTurn);
    assert_eq!(echo.runs.load(Ordering::SeqCst), 1);
    let history = pod.get_history().await.expect("history");
    validate_history(&history).expect("valid");
    pod.shutdown().await.expect("shutdown");
    let answers: Vec<bool> = answers_in(&records(&config, id).await)
        .iter()
        .map(|a| a.pending)
        .collect();
    assert_eq!(answers, [true, false], "recorded again when acted on");
    // And a later resume does not run it again.
    let pod = resume(&nobody, id).await;
    pod.shutdown().await.expect("shutdown");
    assert_eq!(echo.runs.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn a_crash_after_an_answer_was_acted_on_closes_the_call_instead_of_running_it_again() {
    let test = TestPod::new(vec![ScriptStep::text("after")]);
    let echo = Echo::default();
    let config = asking(&test, &echo, None);
    let store = config.store();
    // The log a crash left while the tool ran: the question, its answer
    // acted on, no result.
    let id = Uuid::new_v4();
    let header = SessionHeader::new(id, "scripted".into(), test.dir.path().into());
    let writer = store
        .create(&header, pod::Durability::Always)
        .await
        .expect("create");
    let call = pod_llm::ToolCall {
        id: "call_1".into(),
        name: "echo".into(),
        arguments: json!({"text": "hi"}).to_string(),
    };
    let question = pod::log::QuestionRecord::ask(
        ApprovalRequest::new("call_1", "echo", &call.arguments),
        None,
    );
    let acted = Answerer::via("terminal").answer(&question, ApprovalDecision::AllowOnce, false);
    for record in [
        LogRecord::Item(Item::user("go")),
        LogRecord::Item(Item::new(pod_llm::ItemKind::Assistant {
            text: String::new(),
            reasoning: None,
            tool_calls: vec![call],
            usage: None,
        })),
        LogRecord::Question(question),
        LogRecord::Answer(acted),
    ] {
        writer.append(&record, true).await.expect("append");
    }
    writer.shutdown().await.expect("close");
    let pod = resume(&config, id).await;
    let history = pod.get_history().await.expect("history");
    let (content, is_error) = result_of(&history, "call_1");
    assert!(is_error && content.starts_with("Interrupted"), "{content}");
    pod.shutdown().await.expect("shutdown");
    assert_eq!(echo.runs.load(Ordering::SeqCst), 0);
}

#[tokio::test]
async fn standing_answers_come_back_from_the_log() {
    let test = TestPod::new(vec![
        echo_call("one"),
        ScriptStep::text("first"),
        echo_call("two"),
        ScriptStep::text("second"),
    ]);
    let echo = Echo::default();
    let approver = ScriptedApprover::new([ApprovalDecision::AllowAlways]);
    let config = asking(&test, &echo, Some(approver.clone()));
    let pod = pod::Pod::spawn(config.clone()).await.expect("spawn");
    pod.prompt("go").await.expect("turn");
    let id = pod.session_id();
    pod.shutdown().await.expect("shutdown");
    // A new Pod, whose approver would cancel: "always" still holds.
    let pod = resume(&config, id).await;
    let outcome = pod.prompt("again").await.expect("turn");
    assert_eq!(outcome.reason, TurnEndReason::EndTurn);
    assert_eq!(echo.runs.load(Ordering::SeqCst), 2);
    assert_eq!(approver.requests.lock().len(), 1, "asked once");
    pod.shutdown().await.expect("shutdown");
}

#[tokio::test]
async fn a_question_past_its_timeout_is_answered_no_by_itself() {
    let test = TestPod::new(vec![echo_call("hi"), ScriptStep::text("done")]);
    let echo = Echo::default();
    let mut config = asking(&test, &echo, Some(Arc::new(Parker)));
    config.approval.timeout_secs = Some(0);
    let pod = pod::Pod::spawn(config.clone()).await.expect("spawn");
    let outcome = pod.prompt("go").await.expect("turn");
    assert_eq!(outcome.reason, TurnEndReason::EndTurn);
    let history = pod.get_history().await.expect("history");
    let call = pod_testkit::calls_of(&history)[0].0.clone();
    let (content, is_error) = result_of(&history, &call);
    assert!(is_error && content.contains("in time"), "{content}");
    let id = pod.session_id();
    pod.shutdown().await.expect("shutdown");
    let records = records(&config, id).await;
    let answers = answers_in(&records);
    assert_eq!(answers.len(), 1);
    assert_eq!(answers[0].via, "timeout");
    assert_eq!(answers[0].decision, ApprovalDecision::RejectOnce);
    assert_eq!(echo.runs.load(Ordering::SeqCst), 0);
}

/// What a reader following a log says waits (the HTTP server's reader of
/// a watched session) is what a replay of the whole log says, after every
/// record: questions asked, answered, left open by a result, and carried
/// over a compaction.
#[test]
fn questions_followed_record_by_record_are_those_a_replay_finds_open() {
    use pod::log::{AnswerRecord, CompactionRecord};
    use pod::questions::{FollowedQuestions, Questions};
    use pod_testkit::logs::SessionLog;
    let dir = tempfile::tempdir().unwrap();
    let log = SessionLog::new("mock-1", dir.path())
        .prompt("Work")
        .call("write_file", json!({"path": "a"}), 10, 1)
        .ask();
    let asked = |log: &SessionLog| {
        let path = log.write(dir.path());
        let bytes = std::fs::read(path).unwrap();
        pod::log::parse_log(std::path::Path::new("log"), &bytes)
            .unwrap()
            .records
    };
    let first = match asked(&log).last() {
        Some(LogRecord::Question(q)) => q.clone(),
        other => panic!("{other:?}"),
    };
    let answer = |question: &pod::log::QuestionRecord| {
        LogRecord::Answer(AnswerRecord {
            question: question.id,
            call_id: question.request.call_id.clone(),
            decision: ApprovalDecision::AllowOnce,
            by: None,
            via: "test".into(),
            from: None,
            at: chrono::Utc::now(),
            pending: false,
            result: None,
        })
    };
    let log = log
        .record(answer(&first))
        .result("written", false)
        .call("write_file", json!({"path": "b"}), 10, 1)
        .ask()
        .call("write_file", json!({"path": "c"}), 10, 1)
        .ask();
    let mut records = asked(&log);
    let open_call = match &records[records.len() - 4] {
        LogRecord::Item(item) => item.clone(),
        other => panic!("{other:?}"),
    };
    // A boundary whose tail keeps the call asked about: still open after it.
    records.push(LogRecord::Compaction(CompactionRecord {
        summary: Item::user("Summary"),
        tail: vec![open_call],
        carry_over: Vec::new(),
        todos: Vec::new(),
        tokens_before: 100,
        tokens_after: 10,
        usage: None,
    }));
    records.push(LogRecord::Item(Item::tool_result("call_2", "done", false)));
    records.push(LogRecord::Compaction(CompactionRecord {
        summary: Item::user("Summary again"),
        tail: Vec::new(),
        carry_over: Vec::new(),
        todos: Vec::new(),
        tokens_before: 100,
        tokens_after: 10,
        usage: None,
    }));
    let mut followed = FollowedQuestions::default();
    let mut seen_open = 0;
    for cut in 1..=records.len() {
        followed.observe(&records[cut - 1]);
        let prefix = &records[..cut];
        let history = pod::replay::replay(prefix).history;
        let whole = Questions::from_records(prefix);
        let want: Vec<Uuid> = whole.open(&history).iter().map(|q| q.id).collect();
        let got: Vec<Uuid> = followed.open().iter().map(|q| q.id).collect();
        assert_eq!(got, want, "after record {cut}");
        seen_open = seen_open.max(want.len());
    }
    // The log did have open questions, two at once at the most.
    assert_eq!(seen_open, 2);
}
