//! One line for an error and its causes: the one formatter every crate of
//! pod uses for errors that travel as text (events, logs, API answers, the
//! CLI's `error:` line).

/// `err` and each of its causes on one line, `what failed: because: …`;
/// a cause whose text an outer message already includes (`#[error("…:
/// {0}")]` with a source) is not repeated.
pub fn error_chain(err: &dyn std::error::Error) -> String {
    let mut line = err.to_string();
    let mut cause = err.source();
    while let Some(next) = cause {
        let text = next.to_string();
        if !line.contains(&text) {
            line.push_str(": ");
            line.push_str(&text);
        }
        cause = next.source();
    }
    line
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, thiserror::Error)]
    enum Outer {
        #[error("cannot start")]
        Start(#[source] std::io::Error),
        #[error("cannot read: {0}")]
        Read(#[source] std::io::Error),
    }

    #[test]
    fn causes_follow_once_each() {
        let io = || std::io::Error::other("disk full");
        assert_eq!(error_chain(&Outer::Start(io())), "cannot start: disk full");
        assert_eq!(error_chain(&Outer::Read(io())), "cannot read: disk full");
    }
}
