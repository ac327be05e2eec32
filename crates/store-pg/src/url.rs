//! Database URLs: telling them from paths, and showing them without secrets.

/// Whether `text` is a PostgreSQL connection URL (`postgres://` or
/// `postgresql://`).
pub fn is_postgres_url(text: &str) -> bool {
    let lower = text.trim_start().to_ascii_lowercase();
    lower.starts_with("postgres://") || lower.starts_with("postgresql://")
}

/// `url` without its password, for messages and logs: the password of the
/// user part (`user:secret@host`) and any `password=` parameter are
/// replaced by `***`.
pub fn redact(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return redact_params(url, ' ');
    };
    let (authority, tail) = match rest.find(['/', '?']) {
        Some(at) => rest.split_at(at),
        None => (rest, ""),
    };
    let authority = match authority.rsplit_once('@') {
        Some((user, host)) => match user.split_once(':') {
            Some((name, _)) => format!("{name}:***@{host}"),
            None => format!("{user}@{host}"),
        },
        None => authority.to_string(),
    };
    let tail = match tail.split_once('?') {
        Some((path, query)) => format!("{path}?{}", redact_params(query, '&')),
        None => tail.to_string(),
    };
    format!("{scheme}://{authority}{tail}")
}

fn redact_params(text: &str, separator: char) -> String {
    text.split(separator)
        .map(|part| match part.split_once('=') {
            Some((key, _)) if key.trim().eq_ignore_ascii_case("password") => format!("{key}=***"),
            _ => part.to_string(),
        })
        .collect::<Vec<_>>()
        .join(&separator.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passwords_never_show() {
        assert_eq!(
            redact("postgres://pod:s3cret@db.example:5432/pod?sslmode=disable"),
            "postgres://pod:***@db.example:5432/pod?sslmode=disable"
        );
        assert_eq!(
            redact("postgresql:///pod?host=/tmp/pg&password=s3cret"),
            "postgresql:///pod?host=/tmp/pg&password=***"
        );
        assert_eq!(
            redact("host=/tmp user=pod password=s3cret"),
            "host=/tmp user=pod password=***"
        );
        assert_eq!(redact("postgres://pod@h/db"), "postgres://pod@h/db");
        assert!(is_postgres_url("postgres://h/db"));
        assert!(is_postgres_url("PostgreSQL://h/db"));
        assert!(!is_postgres_url("/var/lib/pod"));
    }
}
