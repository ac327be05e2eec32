//! The API's bearer token: made on first start (stored 0600 in `POD_HOME`
//! and printed once), or read from `--token-file`; every API request must
//! carry it.
//!
//! Browsers cannot set headers on an `EventSource`, so a GET request may
//! carry the token as `?access_token=` instead; the dashboard reads it from
//! its URL's fragment, which browsers never send.

use super::error::ApiError;
use anyhow::{bail, Context, Result};
use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::Response;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The file a server's token is kept in, under `POD_HOME`.
pub const TOKEN_FILE: &str = "http-token";

/// The token, and whether it was made just now (then it is printed).
pub struct Token {
    /// The secret.
    pub value: Arc<str>,
    /// Where it is kept.
    pub path: PathBuf,
    /// Made by this start.
    pub created: bool,
}

/// Reads `--token-file`, or the home's token (made when missing).
pub fn load(home: &Path, given: Option<&Path>) -> Result<Token> {
    if let Some(path) = given {
        let value = std::fs::read_to_string(path)
            .with_context(|| format!("cannot read the token file {}", path.display()))?;
        let value = value.trim();
        if value.len() < 16 {
            bail!(
                "the token in {} is shorter than 16 characters: too easy to guess",
                path.display()
            );
        }
        return Ok(Token {
            value: value.into(),
            path: path.to_path_buf(),
            created: false,
        });
    }
    let path = home.join(TOKEN_FILE);
    if let Ok(value) = std::fs::read_to_string(&path) {
        if !value.trim().is_empty() {
            return Ok(Token {
                value: value.trim().into(),
                path,
                created: false,
            });
        }
    }
    std::fs::create_dir_all(home).with_context(|| format!("cannot create {}", home.display()))?;
    // Two v4 uuids: 244 random bits from the OS generator.
    let value = format!(
        "{}{}",
        uuid::Uuid::new_v4().simple(),
        uuid::Uuid::new_v4().simple()
    );
    write_private(&path, &value)?;
    Ok(Token {
        value: value.into(),
        path,
        created: true,
    })
}

#[cfg(unix)]
fn write_private(path: &Path, value: &str) -> Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
        .with_context(|| format!("cannot create {}", path.display()))?;
    file.write_all(value.as_bytes())
        .and_then(|()| file.sync_all())
        .with_context(|| format!("cannot write {}", path.display()))
}

#[cfg(not(unix))]
fn write_private(path: &Path, value: &str) -> Result<()> {
    std::fs::write(path, value).with_context(|| format!("cannot write {}", path.display()))
}

/// Refuses a request without the token (401, JSON).
pub async fn require(
    State(token): State<Arc<str>>,
    request: Request,
    next: Next,
) -> Result<Response, ApiError> {
    let header = request
        .headers()
        .get(axum::http::header::AUTHORIZATION)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.strip_prefix("Bearer "));
    let query = (request.method() == axum::http::Method::GET)
        .then(|| query_token(request.uri().query().unwrap_or_default()))
        .flatten();
    match header.map(str::to_string).or(query) {
        Some(given) if same(given.as_bytes(), token.as_bytes()) => Ok(next.run(request).await),
        Some(_) => Err(ApiError::unauthorized(
            "wrong token: use the one `pod serve --http` printed (kept in POD_HOME/http-token)",
        )),
        None => Err(ApiError::unauthorized(
            "missing token: send `Authorization: Bearer TOKEN` (the one `pod serve --http` \
             printed, kept in POD_HOME/http-token)",
        )),
    }
}

fn query_token(query: &str) -> Option<String> {
    query
        .split('&')
        .find_map(|pair| pair.strip_prefix("access_token="))
        .map(str::to_string)
}

/// Compares without stopping at the first difference, so the time taken
/// does not tell how much of a guess was right.
fn same(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_compare_whole_and_come_from_the_query() {
        assert!(same(b"abc", b"abc"));
        assert!(!same(b"abc", b"abd"));
        assert!(!same(b"abc", b"ab"));
        assert_eq!(query_token("a=1&access_token=xyz"), Some("xyz".into()));
        assert_eq!(query_token("a=1"), None);
    }

    #[test]
    fn a_new_token_is_private_and_kept() {
        let dir = tempfile::tempdir().unwrap();
        let first = load(dir.path(), None).unwrap();
        assert!(first.created && first.value.len() == 64);
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(&first.path).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o600);
        }
        let again = load(dir.path(), None).unwrap();
        assert!(!again.created);
        assert_eq!(again.value, first.value);
        let short = dir.path().join("short");
        std::fs::write(&short, "tiny").unwrap();
        assert!(load(dir.path(), Some(&short)).is_err());
    }
}
