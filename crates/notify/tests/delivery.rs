//! Deliveries to a real receiver over loopback and to a real command.

use pod_notify::{Event, Kind, Notifier, NotifyConfig, Outbox};
use pod_testkit::webhook::Receiver;
use serde_json::Value;
use std::time::Duration;
use uuid::Uuid;

fn question(session: Uuid) -> Event {
    let mut event = Event::new(Kind::Question, session, "/work/repo".into());
    event.title = Some("Fix the flaky test".into());
    event.question = Some(
        serde_json::json!({"id": Uuid::new_v4(), "tool": "bash", "summary": "bash: rm -rf build"}),
    );
    event.answer_with = Some(format!("pod approve {session} allow|deny"));
    event
}

#[tokio::test]
async fn a_webhook_gets_the_event_signed_the_standard_webhooks_way() {
    let receiver = Receiver::start(204).await;
    let config = NotifyConfig {
        webhook: Some(receiver.url.clone()),
        secret_env: Some("HOOK_SECRET".into()),
        dashboard: Some("https://pod.example.com/".into()),
        ..Default::default()
    };
    let secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
    let outbox = Outbox::default();
    let notifier = Notifier::new(&config, &outbox, |name| {
        (name == "HOOK_SECRET").then(|| secret.to_string())
    })
    .unwrap()
    .unwrap();
    let session = Uuid::new_v4();
    notifier.send(question(session));
    assert!(outbox.flush(Duration::from_secs(10)).await);
    let got = receiver.received();
    assert_eq!(got.len(), 1);
    let request = &got[0];
    let body = request.json();
    assert_eq!(body["type"], "session.question");
    assert_eq!(body["data"]["session_id"], session.to_string());
    assert_eq!(body["data"]["title"], "Fix the flaky test");
    assert_eq!(body["data"]["workspace"], "/work/repo");
    assert_eq!(body["data"]["question"]["tool"], "bash");
    assert_eq!(
        body["data"]["link"],
        format!("https://pod.example.com/#/s/{session}")
    );
    // The receiver's check, as Standard Webhooks' libraries do it.
    assert!(request.signed_with(secret));
    assert!(!request.signed_with("whsec_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"));
    let id = &request.headers["webhook-id"];
    let timestamp = &request.headers["webhook-timestamp"];
    assert!(id.starts_with("msg_"));
    let age = chrono::Utc::now().timestamp() - timestamp.parse::<i64>().unwrap();
    assert!((0..60).contains(&age), "{age}");
}

#[tokio::test]
async fn a_failing_receiver_is_retried_with_the_same_id_and_blocks_nothing() {
    let receiver = Receiver::start(503).await;
    let config = NotifyConfig {
        webhook: Some(receiver.url.clone()),
        retries: Some(2),
        ..Default::default()
    };
    let outbox = Outbox::default();
    let notifier = Notifier::new(&config, &outbox, |_| None).unwrap().unwrap();
    let session = Uuid::new_v4();
    notifier.send(question(session));
    // `send` returned: the delivery is in the background.
    assert_eq!(outbox.in_flight(), 1);
    assert!(
        outbox.flush(Duration::from_secs(30)).await,
        "gives up in the end"
    );
    // This session's deliveries only: another test's retries may reach a
    // port the system handed to this receiver after that test's closed.
    let got: Vec<_> = receiver
        .received()
        .into_iter()
        .filter(|r| r.json()["data"]["session_id"] == session.to_string())
        .collect();
    assert_eq!(got.len(), 3, "the first attempt and two retries");
    let ids: Vec<&String> = got.iter().map(|r| &r.headers["webhook-id"]).collect();
    assert!(ids.iter().all(|id| *id == ids[0]), "{ids:?}");
    // Unsigned without a secret.
    assert!(!got[0].headers.contains_key("webhook-signature"));
}

#[tokio::test]
async fn a_receiver_that_is_gone_and_a_refusal_are_not_retried_forever() {
    // Nothing listens: connection refused, retried, then given up.
    let port = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap().port()
    };
    let outbox = Outbox::default();
    let gone = NotifyConfig {
        webhook: Some(format!("http://127.0.0.1:{port}/hook")),
        retries: Some(1),
        ..Default::default()
    };
    Notifier::new(&gone, &outbox, |_| None)
        .unwrap()
        .unwrap()
        .send(question(Uuid::new_v4()));
    // A 400 is the receiver's answer: not retried.
    let receiver = Receiver::start(400).await;
    let refused = NotifyConfig {
        webhook: Some(receiver.url.clone()),
        ..Default::default()
    };
    Notifier::new(&refused, &outbox, |_| None)
        .unwrap()
        .unwrap()
        .send(question(Uuid::new_v4()));
    assert!(outbox.flush(Duration::from_secs(30)).await);
    assert_eq!(receiver.received().len(), 1);
}

#[tokio::test]
async fn a_command_gets_the_same_json_on_stdin_and_only_the_events_asked_for() {
    let dir = std::env::temp_dir().join(format!("pod-notify-{}", Uuid::new_v4()));
    std::fs::create_dir_all(&dir).unwrap();
    let out = dir.join("events.jsonl");
    let config = NotifyConfig {
        command: Some(vec![
            "sh".into(),
            "-c".into(),
            format!(
                "cat >> '{}'; echo \" $POD_EVENT\" >> '{}'",
                out.display(),
                out.display()
            ),
        ]),
        events: Some(vec![Kind::Finished]),
        ..Default::default()
    };
    let outbox = Outbox::default();
    let notifier = Notifier::new(&config, &outbox, |_| None).unwrap().unwrap();
    let session = Uuid::new_v4();
    notifier.send(question(session));
    let mut finished = Event::new(Kind::Finished, session, "/w".into());
    finished.reason = Some("done".into());
    notifier.send(finished);
    assert!(outbox.flush(Duration::from_secs(10)).await);
    let written = std::fs::read_to_string(&out).unwrap();
    let (json, event) = written.rsplit_once(' ').unwrap();
    let body: Value = serde_json::from_str(json).unwrap();
    assert_eq!(body["type"], "session.finished");
    assert_eq!(body["data"]["reason"], "done");
    assert_eq!(event.trim(), "session.finished");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[tokio::test]
async fn a_sessions_events_reach_the_command_in_the_order_they_happened() {
    let dir = std::env::temp_dir().join(format!("pod-notify-{}", Uuid::new_v4()));
    std::fs::create_dir_all(&dir).unwrap();
    let out = dir.join("order.txt");
    let config = NotifyConfig {
        // Slow enough that deliveries run at once would interleave.
        command: Some(vec![
            "sh".into(),
            "-c".into(),
            format!(
                "cat > /dev/null; sleep 0.1; echo \"$POD_EVENT\" >> '{}'",
                out.display()
            ),
        ]),
        ..Default::default()
    };
    let outbox = Outbox::default();
    let notifier = Notifier::new(&config, &outbox, |_| None).unwrap().unwrap();
    let session = Uuid::new_v4();
    for kind in [Kind::Question, Kind::Stopped, Kind::Failed, Kind::Finished] {
        notifier.send(Event::new(kind, session, "/w".into()));
    }
    assert!(outbox.flush(Duration::from_secs(20)).await);
    assert_eq!(
        std::fs::read_to_string(&out).unwrap(),
        "session.question\nsession.stopped\nsession.failed\nsession.finished\n"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}
