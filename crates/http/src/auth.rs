//! The API's bearer token: made on first start (stored 0600 in `POD_HOME`
//! and printed once), or read from `--token-file`; every API request must
//! carry it.
//!
//! Browsers cannot set headers on an `EventSource`, so a GET request may
//! carry the token as `?access_token=` instead; the dashboard reads it from
//! its URL's fragment, which browsers never send.

use super::error::ApiError;
use crate::failure::ServeError;
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

/// Reads `--token-file`, or the home's token (made when missing). Either
/// file is checked first ([`read_checked`]): a token others can read, or a
/// guessable one, is refused with what to do.
pub fn load(home: &Path, given: Option<&Path>) -> Result<Token, ServeError> {
    if let Some(path) = given {
        return Ok(Token {
            value: read_checked(path)?.into(),
            path: path.to_path_buf(),
            created: false,
        });
    }
    let path = home.join(TOKEN_FILE);
    match std::fs::symlink_metadata(&path) {
        Ok(_) => {
            return Ok(Token {
                value: read_checked(&path)?.into(),
                path,
                created: false,
            })
        }
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => {}
        Err(err) => {
            return Err(ServeError::io(
                format!("cannot read {}", path.display()),
                err,
            ))
        }
    }
    let mut builder = std::fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
    builder
        .create(home)
        .map_err(|err| ServeError::io(format!("cannot create {}", home.display()), err))?;
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

/// The least a token must carry: guessing it is then out of reach.
const MIN_BITS: f64 = 128.0;

/// How to make a good token file.
const HOW: &str = "make one with: (umask 077; head -c 32 /dev/urandom | base64 > FILE)";

/// Reads a token file after checking it is a regular file (not a symlink)
/// owned by this user and closed to everyone else, and that its token is
/// strong enough.
pub fn read_checked(path: &Path) -> Result<String, ServeError> {
    let shown = path.display();
    let meta = std::fs::symlink_metadata(path)
        .map_err(|err| ServeError::io(format!("cannot read the token file {shown}"), err))?;
    if meta.file_type().is_symlink() {
        return Err(ServeError::refused(
            format!("the token file {shown} is a symbolic link"),
            "name the file itself, so what it points to cannot be swapped",
        ));
    }
    if !meta.is_file() {
        return Err(ServeError::refused(
            format!("the token file {shown} is not a regular file"),
            HOW,
        ));
    }
    check_owner_and_mode(path, &meta)?;
    let value = read_no_follow(path)?;
    let value = value.trim();
    if let Err(why) = strong_enough(value) {
        return Err(ServeError::refused(
            format!("the token in {shown} is too easy to guess: {why}"),
            HOW,
        ));
    }
    Ok(value.to_string())
}

#[cfg(unix)]
fn check_owner_and_mode(path: &Path, meta: &std::fs::Metadata) -> Result<(), ServeError> {
    use std::os::unix::fs::MetadataExt;
    // SAFETY: geteuid has no preconditions and cannot fail.
    let me = unsafe { libc::geteuid() };
    if meta.uid() != me {
        return Err(ServeError::refused(
            format!(
                "the token file {} belongs to uid {}, not to this user (uid {me})",
                path.display(),
                meta.uid()
            ),
            "use a token file of your own",
        ));
    }
    let mode = meta.mode() & 0o777;
    if mode & 0o077 != 0 {
        return Err(ServeError::refused(
            format!(
                "the token file {} can be read by others (mode {mode:o})",
                path.display()
            ),
            format!("chmod 600 {}", path.display()),
        ));
    }
    Ok(())
}

#[cfg(not(unix))]
fn check_owner_and_mode(_path: &Path, _meta: &std::fs::Metadata) -> Result<(), ServeError> {
    Ok(())
}

/// Reads the file without following a symlink swapped in since the check.
#[cfg(unix)]
fn read_no_follow(path: &Path) -> Result<String, ServeError> {
    use std::io::Read;
    use std::os::unix::fs::OpenOptionsExt;
    let mut text = String::new();
    std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW)
        .open(path)
        .and_then(|mut file| file.read_to_string(&mut text))
        .map_err(|err| {
            ServeError::io(
                format!("cannot read the token file {}", path.display()),
                err,
            )
        })?;
    Ok(text)
}

#[cfg(not(unix))]
fn read_no_follow(path: &Path) -> Result<String, ServeError> {
    std::fs::read_to_string(path).map_err(|err| {
        ServeError::io(
            format!("cannot read the token file {}", path.display()),
            err,
        )
    })
}

/// Whether `token` can carry [`MIN_BITS`]: printable ASCII without spaces
/// (it travels in a header), enough distinct characters to be random, and
/// enough characters for its alphabet (hex: 32; letters and digits: 22).
fn strong_enough(token: &str) -> Result<(), String> {
    if let Some(c) = token.chars().find(|c| !c.is_ascii_graphic()) {
        return Err(format!(
            "it holds {c:?}; use printable ASCII without spaces"
        ));
    }
    let distinct = token
        .bytes()
        .collect::<std::collections::BTreeSet<u8>>()
        .len();
    if distinct < 8 {
        return Err(format!("it repeats only {distinct} different characters"));
    }
    let hex = token.bytes().all(|b| b.is_ascii_hexdigit())
        && !(token.bytes().any(|b| b.is_ascii_lowercase())
            && token.bytes().any(|b| b.is_ascii_uppercase()));
    let alphabet: u32 = match hex {
        true => 16,
        false => {
            let has = |is: fn(&u8) -> bool| token.bytes().any(|b| is(&b));
            [
                (has(u8::is_ascii_digit), 10),
                (has(u8::is_ascii_lowercase), 26),
                (has(u8::is_ascii_uppercase), 26),
                (has(u8::is_ascii_punctuation), 32),
            ]
            .iter()
            .filter(|(present, _)| *present)
            .map(|(_, size)| size)
            .sum()
        }
    };
    let bits = token.len() as f64 * f64::from(alphabet).log2();
    if bits < MIN_BITS {
        return Err(format!(
            "{} characters carry about {bits:.0} bits; at least {MIN_BITS:.0} are needed",
            token.len()
        ));
    }
    Ok(())
}

#[cfg(unix)]
fn write_private(path: &Path, value: &str) -> Result<(), ServeError> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
        .map_err(|err| ServeError::io(format!("cannot create {}", path.display()), err))?;
    file.write_all(value.as_bytes())
        .and_then(|()| file.sync_all())
        .map_err(|err| ServeError::io(format!("cannot write {}", path.display()), err))
}

#[cfg(not(unix))]
fn write_private(path: &Path, value: &str) -> Result<(), ServeError> {
    std::fs::write(path, value)
        .map_err(|err| ServeError::io(format!("cannot write {}", path.display()), err))
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
        Some(given) if same(given.as_bytes(), token.as_bytes()) => {
            if let Some(ticket) = request.extensions().get::<Arc<crate::admission::Ticket>>() {
                ticket.promote();
            }
            Ok(next.run(request).await)
        }
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
pub(crate) fn same(a: &[u8], b: &[u8]) -> bool {
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
        write_mode(&short, "tiny", 0o600);
        assert!(load(dir.path(), Some(&short)).is_err());
    }

    fn write_mode(path: &Path, text: &str, mode: u32) {
        use std::os::unix::fs::PermissionsExt;
        std::fs::write(path, text).unwrap();
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
    }

    fn refusal(path: &Path) -> String {
        let err = read_checked(path).unwrap_err();
        match std::error::Error::source(&err) {
            Some(cause) => format!("{err}: {cause}"),
            None => err.to_string(),
        }
    }

    #[test]
    fn a_token_file_others_can_read_or_that_is_a_link_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let good = "k3J9xQ2mZ7pL4vR8tW1yB6nC5hF0dS2a";
        let open = dir.path().join("open");
        write_mode(&open, good, 0o644);
        assert!(
            refusal(&open).contains("can be read by others (mode 644)"),
            "{}",
            refusal(&open)
        );
        let private = dir.path().join("private");
        write_mode(&private, good, 0o600);
        assert_eq!(read_checked(&private).unwrap(), good);
        let link = dir.path().join("link");
        std::os::unix::fs::symlink(&private, &link).unwrap();
        assert!(
            refusal(&link).contains("symbolic link"),
            "{}",
            refusal(&link)
        );
        let missing = dir.path().join("missing");
        assert!(
            refusal(&missing).contains("cannot read"),
            "{}",
            refusal(&missing)
        );
    }

    #[test]
    fn a_token_must_carry_128_bits() {
        // 32 hex digits are 128 bits; 31 are not.
        assert!(strong_enough("0123456789abcdef0123456789abcdef").is_ok());
        assert!(strong_enough("0123456789abcdef0123456789abcde").is_err());
        // 22 letters and digits are 131 bits.
        assert!(strong_enough("k3J9xQ2mZ7pL4vR8tW1yB6").is_ok());
        assert!(strong_enough("abc").is_err());
        let repeated = "ab".repeat(40);
        assert!(strong_enough(&repeated).unwrap_err().contains("only 2"));
        assert!(strong_enough("k3J9xQ2mZ7pL 4vR8tW1yB6nC5hF").is_err());
    }
}
