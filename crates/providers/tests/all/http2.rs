//! HTTP/2 to the model: the transport's own pool (another connection when
//! every one is at its server's stream limit), requests the server did not
//! process sent again, ALPN over TLS, and HTTP/1.1 where that is what the
//! server speaks. Through the OpenAI-compatible provider, built from a
//! profile's settings.

use crate::support::{ask, complete};
use futures_util::StreamExt;
use pod_llm::Provider;
use pod_providers::config::{Http2, ProviderConfig, ProviderKind, RawProviderConfig};
use pod_providers::OpenAiProvider;
use pod_testkit::h2server::{Behaviour, H2Server};
use pod_testkit::server::{LoopbackServer, Reply};
use pod_testkit::wire::openai_parts;
use std::sync::atomic::Ordering;
use std::time::Duration;

/// An OpenAI-compatible provider for `base`, from a profile's settings.
fn provider(base: &str, http2: Option<Http2>, ca_file: Option<&std::path::Path>) -> OpenAiProvider {
    let raw = RawProviderConfig {
        kind: Some(ProviderKind::OpenAi),
        base_url: Some(format!("{base}/v1")),
        model: Some("test-model".into()),
        request_timeout_secs: Some(10),
        idle_timeout_secs: Some(10),
        http2,
        ca_file: ca_file.map(Into::into),
        ..RawProviderConfig::default()
    };
    match raw.resolve_with(|_| None).unwrap() {
        ProviderConfig::OpenAi { endpoint, .. } => OpenAiProvider::new(endpoint).unwrap(),
        other => panic!("not an OpenAI endpoint: {other:?}"),
    }
}

/// Sends one request per prompt at once and gives back each answer's text.
async fn ask_all(provider: &OpenAiProvider, prompts: &[String]) -> Vec<String> {
    let asked = prompts.iter().map(|prompt| async move {
        let answer = complete(provider as &dyn Provider, ask(prompt)).await;
        answer.unwrap_or_else(|err| panic!("{prompt}: {err}")).text
    });
    futures_util::future::join_all(asked).await
}

fn prompts(n: usize) -> Vec<String> {
    (0..n).map(|i| format!("request {i}")).collect()
}

fn said(prompts: &[String]) -> Vec<String> {
    prompts.iter().map(|p| format!("you said {p}")).collect()
}

fn sorted(mut list: Vec<String>) -> Vec<String> {
    list.sort();
    list
}

#[tokio::test]
async fn streams_past_the_servers_limit_open_more_connections_instead_of_queueing() {
    // Each answer waits for all six to be open at once: a client that
    // queued the streams past two on one connection would time out.
    let server = H2Server::plain(Behaviour {
        max_streams: Some(2),
        hold_until: Some(6),
        ..Behaviour::default()
    })
    .await;
    let provider = provider(&server.base, Some(Http2::PriorKnowledge), None);
    let asked = prompts(6);
    assert_eq!(ask_all(&provider, &asked).await, said(&asked));
    assert_eq!(server.answered(), sorted(asked));
    assert!(
        server.stats.most_streams.load(Ordering::SeqCst) <= 2,
        "more than two streams on one connection"
    );
    assert!(
        server.connections() >= 3,
        "{} connections",
        server.connections()
    );
    // A later request takes a place on a connection already open.
    let before = server.connections();
    let again = vec!["once more".to_string()];
    assert_eq!(ask_all(&provider, &again).await, said(&again));
    assert_eq!(server.connections(), before);
}

#[tokio::test]
async fn an_answer_dropped_halfway_frees_its_place_on_the_connection() {
    let server = H2Server::plain(Behaviour {
        max_streams: Some(1),
        ..Behaviour::default()
    })
    .await;
    let provider = provider(&server.base, Some(Http2::PriorKnowledge), None);
    let mut events = provider.stream(&ask("first")).await.unwrap();
    events.next().await.unwrap().unwrap();
    drop(events);
    let again = vec!["second".to_string()];
    assert_eq!(ask_all(&provider, &again).await, said(&again));
    // The second stream took the first's place on the one connection.
    assert_eq!(server.connections(), 1);
}

#[tokio::test]
async fn an_idle_connection_is_closed() {
    let server = H2Server::plain(Behaviour::default()).await;
    let provider = provider(&server.base, Some(Http2::PriorKnowledge), None);
    let asked = prompts(1);
    assert_eq!(ask_all(&provider, &asked).await, said(&asked));
    assert_eq!(server.stats.closed.load(Ordering::SeqCst), 0);
    // The clock now moves on whenever nothing else is left to do: to the
    // pool's idle timeout, well before the guard's ten minutes.
    tokio::time::pause();
    let closed = async {
        loop {
            let closing = server.stats.closing.notified();
            if server.stats.closed.load(Ordering::SeqCst) == 1 {
                return;
            }
            closing.await;
        }
    };
    tokio::time::timeout(Duration::from_secs(600), closed)
        .await
        .expect("the idle connection stayed open");
    // The next request opens a new one.
    let again = vec!["again".to_string()];
    tokio::time::resume();
    assert_eq!(ask_all(&provider, &again).await, said(&again));
    assert_eq!(server.connections(), 2);
}

#[tokio::test]
async fn refused_streams_are_sent_once_more_on_another_connection() {
    let server = H2Server::plain(Behaviour {
        refuse_first_connection: true,
        ..Behaviour::default()
    })
    .await;
    let provider = provider(&server.base, Some(Http2::PriorKnowledge), None);
    let asked = prompts(3);
    assert_eq!(ask_all(&provider, &asked).await, said(&asked));
    assert_eq!(server.stats.refused.load(Ordering::SeqCst), 3);
    // Each answered once, all on the second connection.
    assert_eq!(server.answered(), sorted(asked));
    assert_eq!(server.connections(), 2);
}

#[tokio::test]
async fn streams_above_a_goaways_last_stream_are_sent_again_and_answered_once() {
    let server = H2Server::plain(Behaviour {
        go_away_after: Some(3),
        ..Behaviour::default()
    })
    .await;
    let provider = provider(&server.base, Some(Http2::PriorKnowledge), None);
    let asked = prompts(3);
    assert_eq!(ask_all(&provider, &asked).await, said(&asked));
    // The first connection answered the stream its GOAWAY named; the
    // other two went to a second connection; none was answered twice.
    assert_eq!(server.answered(), sorted(asked));
    assert_eq!(server.connections(), 2);
}

#[tokio::test]
async fn a_tls_server_that_offers_h2_is_spoken_to_over_http2() {
    let server = H2Server::tls(Behaviour {
        alpn: vec!["h2", "http/1.1"],
        max_streams: Some(1),
        hold_until: Some(2),
        ..Behaviour::default()
    })
    .await;
    let dir = tempfile::tempdir().unwrap();
    let ca = dir.path().join("ca.pem");
    std::fs::write(&ca, server.ca_pem.as_deref().unwrap()).unwrap();
    // The default: ALPN decides.
    let provider = provider(&server.base, None, Some(&ca));
    let asked = prompts(2);
    assert_eq!(ask_all(&provider, &asked).await, said(&asked));
    assert_eq!(server.stats.http1_answers.load(Ordering::SeqCst), 0);
    assert_eq!(server.answered(), sorted(asked));
    assert_eq!(server.connections(), 2);
}

#[tokio::test]
async fn a_tls_server_that_offers_only_http1_is_spoken_to_over_http1() {
    let server = H2Server::tls(Behaviour {
        alpn: vec!["http/1.1"],
        ..Behaviour::default()
    })
    .await;
    let dir = tempfile::tempdir().unwrap();
    let ca = dir.path().join("ca.pem");
    std::fs::write(&ca, server.ca_pem.as_deref().unwrap()).unwrap();
    let provider = provider(&server.base, None, Some(&ca));
    for asked in [prompts(1), vec!["again".to_string()]] {
        assert_eq!(ask_all(&provider, &asked).await, said(&asked));
    }
    assert_eq!(server.stats.http1_answers.load(Ordering::SeqCst), 2);
}

#[tokio::test]
async fn a_server_outside_the_ca_file_is_refused() {
    let server = H2Server::tls(Behaviour {
        alpn: vec!["h2"],
        ..Behaviour::default()
    })
    .await;
    // Trusts another CA than the server's.
    let other = rcgen::generate_simple_self_signed(vec!["127.0.0.1".into()]).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let ca = dir.path().join("other.pem");
    std::fs::write(&ca, other.cert.pem()).unwrap();
    let provider = provider(&server.base, None, Some(&ca));
    let err = complete(&provider, ask("hi")).await.unwrap_err();
    assert!(
        matches!(err, pod_llm::ProviderError::Unreachable { .. }),
        "{err:?}"
    );
    assert!(server.answered().is_empty());
}

#[tokio::test]
async fn a_plain_http1_server_is_spoken_to_over_http1_by_default() {
    let server = LoopbackServer::start(vec![Reply::sse(openai_parts("you said hi", &[]))]).await;
    let base = server.url("");
    let provider = provider(base.trim_end_matches('/'), None, None);
    let answer = complete(&provider, ask("hi")).await.unwrap();
    assert_eq!(answer.text, "you said hi");
    assert_eq!(server.arrived(), 1);
}

#[test]
fn http2_is_a_profile_setting() {
    let file = pod_providers::config::ConfigFile::parse(
        "[profiles.gateway]\nkind = \"openai\"\nmodel = \"m\"\nbase_url = \"http://gw:8080/v1\"\nhttp2 = \"prior-knowledge\"\nca_file = \"ca.pem\"\n",
        std::path::Path::new("/etc/pod/config.toml"),
    )
    .unwrap();
    let profile = file.profile(Some("gateway")).unwrap();
    assert_eq!(profile.http2, Some(Http2::PriorKnowledge));
    assert_eq!(
        profile.ca_file.as_deref(),
        Some(std::path::Path::new("/etc/pod/ca.pem"))
    );
    let wrong = pod_providers::config::ConfigFile::parse(
        "[profiles.gateway]\nhttp2 = \"always\"\n",
        std::path::Path::new("config.toml"),
    );
    assert!(wrong.is_err());
}

/// A request waiting for its answer holds what that wait needs, not the
/// room of opening a connection (TCP, TLS, the HTTP/2 handshake) or of
/// the HTTP/1.1 client, which it awaits only now and then: a worker holds
/// one such request per waiting session, so every kilobyte here is 100 MB
/// at 100,000 sessions. Both inline made it 11.5 KB (pod-bench serve:
/// 50.5 KB per session over HTTP/2 + TLS, 41.7 KB with them boxed).
#[tokio::test]
async fn a_request_waiting_for_its_answer_holds_little() {
    let request = ask("hi");
    for (wire, http2) in [("openai", None), ("openai, HTTP/1.1", Some(Http2::Never))] {
        let provider = provider("https://127.0.0.1:9", http2, None);
        let waiting = provider.stream(&request);
        let size = std::mem::size_of_val(&*waiting);
        assert!(
            size <= 4096,
            "{wire}: a request in flight holds {size} bytes"
        );
    }
}
