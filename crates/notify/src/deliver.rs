//! One event's delivery: the signed webhook with its retries, and the
//! command.

use crate::{
    Kind, NotifyConfig, NotifyError, DEFAULT_RETRIES, DEFAULT_SECRET_ENV, DEFAULT_TIMEOUT,
};
use base64::Engine;
use hmac::{KeyInit, Mac};
use std::process::Stdio;
use std::time::Duration;
use tokio::io::AsyncWriteExt;
use uuid::Uuid;

/// The longest wait between two webhook attempts.
const MAX_BACKOFF: Duration = Duration::from_secs(60);

/// Where a notifier's events go, checked once.
#[derive(Debug)]
pub(crate) struct Target {
    webhook: Option<reqwest::Url>,
    // The HMAC key; unsigned without one.
    secret: Option<Vec<u8>>,
    command: Option<Vec<String>>,
    timeout: Duration,
    retries: u32,
    client: reqwest::Client,
}

impl Target {
    pub(crate) fn new(
        config: &NotifyConfig,
        env: impl Fn(&str) -> Option<String>,
    ) -> Result<Self, NotifyError> {
        let webhook = match &config.webhook {
            Some(url) => match reqwest::Url::parse(url) {
                Ok(parsed) if matches!(parsed.scheme(), "http" | "https") => Some(parsed),
                _ => return Err(NotifyError::Url { url: url.clone() }),
            },
            None => None,
        };
        let secret = match &config.secret_env {
            Some(name) => Some(
                env(name)
                    .filter(|s| !s.is_empty())
                    .ok_or_else(|| NotifyError::NoSecret { name: name.clone() })
                    .and_then(|secret| key(&secret, name))?,
            ),
            None => match env(DEFAULT_SECRET_ENV).filter(|s| !s.is_empty()) {
                Some(secret) => Some(key(&secret, DEFAULT_SECRET_ENV)?),
                None => None,
            },
        };
        if config.command.as_ref().is_some_and(|c| c.is_empty()) {
            return Err(NotifyError::NoCommand);
        }
        let timeout = config
            .timeout_secs
            .map(Duration::from_secs)
            .unwrap_or(DEFAULT_TIMEOUT);
        let client = reqwest::Client::builder()
            .timeout(timeout)
            .user_agent(concat!("pod/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(NotifyError::Client)?;
        Ok(Self {
            webhook,
            secret,
            command: config.command.clone(),
            timeout,
            retries: config.retries.unwrap_or(DEFAULT_RETRIES),
            client,
        })
    }

    /// Delivers `body` everywhere it goes; failures are logged.
    pub(crate) async fn deliver(&self, kind: Kind, session: Option<Uuid>, body: Vec<u8>) {
        let id = format!("msg_{}", Uuid::new_v4().simple());
        let webhook = async {
            if let Some(url) = &self.webhook {
                self.post(url, &id, kind, session, &body).await;
            }
        };
        let command = async {
            if let Some(argv) = &self.command {
                self.run(argv, kind, session, &body).await;
            }
        };
        tokio::join!(webhook, command);
    }

    async fn post(
        &self,
        url: &reqwest::Url,
        id: &str,
        kind: Kind,
        session: Option<Uuid>,
        body: &[u8],
    ) {
        let mut backoff = Duration::from_secs(1);
        for attempt in 0..=self.retries {
            if attempt > 0 {
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(MAX_BACKOFF);
            }
            let timestamp = chrono::Utc::now().timestamp().to_string();
            let mut request = self
                .client
                .post(url.clone())
                .header("content-type", "application/json")
                .header("webhook-id", id)
                .header("webhook-timestamp", &timestamp)
                .body(body.to_vec());
            if let Some(signature) = self
                .secret
                .as_deref()
                .and_then(|key| sign(key, id, &timestamp, body))
            {
                request = request.header("webhook-signature", signature);
            }
            let why = match request.send().await {
                Ok(response) if response.status().is_success() => {
                    tracing::debug!(session = ?session, kind = kind.type_name(), attempt, "notification delivered");
                    return;
                }
                Ok(response) => {
                    let status = response.status();
                    let again = status.is_server_error()
                        || status == reqwest::StatusCode::REQUEST_TIMEOUT
                        || status == reqwest::StatusCode::TOO_MANY_REQUESTS;
                    if !again {
                        tracing::warn!(session = ?session, kind = kind.type_name(), %status, "the webhook refused a notification; not retried");
                        return;
                    }
                    format!("status {status}")
                }
                // Without the URL: a webhook's secret is often in its path
                // (Slack, Discord), and this goes to the log.
                Err(err) => chain(&err.without_url()),
            };
            tracing::warn!(session = ?session, kind = kind.type_name(), attempt, error = %why, "webhook delivery failed");
        }
        tracing::warn!(session = ?session, kind = kind.type_name(), attempts = self.retries + 1, "notification not delivered; giving up");
    }

    async fn run(&self, argv: &[String], kind: Kind, session: Option<Uuid>, body: &[u8]) {
        let Some((program, args)) = argv.split_first() else {
            return;
        };
        let spawned = tokio::process::Command::new(program)
            .args(args)
            .env("POD_EVENT", kind.type_name())
            .env(
                "POD_SESSION_ID",
                session.map(|s| s.to_string()).unwrap_or_default(),
            )
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn();
        let mut child = match spawned {
            Ok(child) => child,
            Err(err) => {
                tracing::warn!(session = ?session, kind = kind.type_name(), program = %program, %err, "cannot run the notify command");
                return;
            }
        };
        let fed = async {
            if let Some(mut stdin) = child.stdin.take() {
                // A command that does not read its input is fine.
                let _ = stdin.write_all(body).await;
            }
            child.wait().await
        };
        match tokio::time::timeout(self.timeout, fed).await {
            Ok(Ok(status)) if status.success() => {}
            Ok(Ok(status)) => {
                tracing::warn!(session = ?session, kind = kind.type_name(), program = %program, %status, "the notify command failed")
            }
            Ok(Err(err)) => {
                tracing::warn!(session = ?session, kind = kind.type_name(), program = %program, %err, "the notify command failed")
            }
            Err(_) => {
                let _ = child.kill().await;
                tracing::warn!(session = ?session, kind = kind.type_name(), program = %program, "the notify command timed out; killed");
            }
        }
    }
}

/// The HMAC key of a secret: base64 after a `whsec_` prefix, else the
/// secret's bytes.
fn key(secret: &str, name: &str) -> Result<Vec<u8>, NotifyError> {
    match secret.strip_prefix("whsec_") {
        Some(encoded) => base64::engine::general_purpose::STANDARD
            .decode(encoded)
            .map_err(|_| NotifyError::BadSecret {
                name: name.to_string(),
            }),
        None => Ok(secret.as_bytes().to_vec()),
    }
}

/// The `webhook-signature` value: `v1,` and the base64 HMAC-SHA256 of
/// `id.timestamp.body`.
pub fn sign(key: &[u8], id: &str, timestamp: &str, body: &[u8]) -> Option<String> {
    let mut mac = <hmac::Hmac<sha2::Sha256> as KeyInit>::new_from_slice(key).ok()?;
    mac.update(id.as_bytes());
    mac.update(b".");
    mac.update(timestamp.as_bytes());
    mac.update(b".");
    mac.update(body);
    let digest = mac.finalize().into_bytes();
    Some(format!(
        "v1,{}",
        base64::engine::general_purpose::STANDARD.encode(digest)
    ))
}

fn chain(err: &(dyn std::error::Error + 'static)) -> String {
    let mut text = err.to_string();
    let mut source = err.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signatures_follow_standard_webhooks() {
        // The Standard Webhooks specification's example: this secret, id,
        // timestamp and body give this signature.
        let key = key("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "S").unwrap();
        let body = br#"{"test": 2432232314}"#;
        assert_eq!(
            sign(&key, "msg_p5jXN8AQM9LWM0D4loKWxJek", "1614265330", body).unwrap(),
            "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="
        );
    }

    #[test]
    fn a_bad_table_is_refused_with_what_to_fix() {
        let none = |_: &str| None;
        let config = NotifyConfig {
            webhook: Some("ftp://x".into()),
            ..Default::default()
        };
        assert!(matches!(
            Target::new(&config, none),
            Err(NotifyError::Url { .. })
        ));
        let config = NotifyConfig {
            webhook: Some("https://x.example/hook".into()),
            secret_env: Some("HOOK_SECRET".into()),
            ..Default::default()
        };
        let err = Target::new(&config, none).unwrap_err();
        assert!(err.to_string().contains("HOOK_SECRET"), "{err}");
        let bad = |_: &str| Some("whsec_***".to_string());
        assert!(matches!(
            Target::new(&config, bad),
            Err(NotifyError::BadSecret { .. })
        ));
        let config = NotifyConfig {
            command: Some(Vec::new()),
            ..Default::default()
        };
        assert!(matches!(
            Target::new(&config, none),
            Err(NotifyError::NoCommand)
        ));
    }
}
