//! How many sessions a worker admits at once: what its open-file limit
//! can serve, and what it learns when a session's model connection finds
//! no descriptor anyway.
//!
//! A session waiting on its model over HTTP/1.1 holds one connection to it
//! (in flight, or idle in the process's pool between requests); over
//! HTTP/2 its request is a stream of a connection many sessions share, and
//! it holds none of its own. What its tools open (a command's pipes, a
//! file, a walk's directories) comes from a share of the limit kept for
//! tools, where a call past the share waits for others to end
//! ([`pod_tools::files`]). Past the process's limit a connection fails with
//! `EMFILE`: admitting only what the limit serves keeps the rest queued in
//! the store, for this worker or another, instead of failing them. Over
//! HTTP/2 a worker admits more as its sessions' requests go out on streams
//! ([`Files::sessions_now`]).

use pod_llm::ProviderError;
use pod_providers::Http2InUse;
use pod_worker::WorkerError;

/// Descriptors the process keeps for itself, whatever it runs: standard
/// streams, the runtime's epoll and wakers, signal pipes, the log, a
/// resolver's files, a checkpoint's `git` pipes, MCP servers of a session
/// starting. An idle `pod serve` holds about 20 (measured with `ls
/// /proc/PID/fd`; BENCHMARKS.md section 20); 64 leave room for the rest.
pub const OWN_FILES: u64 = 64;

/// Descriptors per running session that is not waiting on an HTTP/2
/// stream: its model connection over HTTP/1.1 (or, just admitted, the one
/// it may make). Its tools' files come from [`tool_files`]. A session that
/// still meets the limit (a subagent's connection, say) is given back to
/// the queue ([`out_of_files`]), and the worker then admits no more than it
/// runs.
pub const FILES_PER_SESSION: u64 = 1;

/// The share of a process's `open_files` its tool calls may hold at once
/// ([`pod_tools::files::limit`]): a sixteenth, at least two commands' worth
/// and at most 1,024 (128 commands running at the same moment).
pub fn tool_files(open_files: u64) -> u64 {
    (open_files / 16).clamp(2 * u64::from(pod_tools::files::BASH_FILES), 1_024)
}

/// The most sessions a process allowed `open_files` descriptors serves at
/// once, when `reserved` of them are taken by its other connections (the
/// database pool, the HTTP API's connections and listener). At least one:
/// a worker that cannot run one session still claims one at a time, and a
/// session that finds no descriptor goes back to the queue.
pub fn sessions(open_files: u64, reserved: u64) -> u32 {
    let held = OWN_FILES
        .saturating_add(reserved)
        .saturating_add(tool_files(open_files));
    let spare = open_files.saturating_sub(held);
    u32::try_from(spare / FILES_PER_SESSION)
        .unwrap_or(u32::MAX)
        .max(1)
}

/// A process's open-file limit and the descriptors its other connections
/// may take (the database pool, the HTTP API's connections and listener).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Files {
    /// The most files it may open.
    pub limit: u64,
    /// Taken by its other connections, at most.
    pub reserved: u64,
}

impl Files {
    /// The sessions it serves whatever their model speaks: [`sessions`].
    pub fn sessions(&self) -> u32 {
        sessions(self.limit, self.reserved)
    }

    /// The share its tools may hold at once: [`tool_files`].
    pub fn tools(&self) -> u64 {
        tool_files(self.limit)
    }

    /// The sessions it serves now that `running` run and its HTTP/2 model
    /// connections hold `http2`, never fewer than [`Files::sessions`]. A
    /// session with a request in flight on an HTTP/2 stream holds no
    /// descriptor of its own (its connection is shared, and each shared
    /// connection is reckoned once; its tools' files are the tools'
    /// share). Every other running session, and each one admitted next, is
    /// reckoned with [`FILES_PER_SESSION`] until its request is on a
    /// stream, so admitting never runs ahead of what the streams show.
    pub fn sessions_now(&self, running: u32, http2: Http2InUse) -> u32 {
        // In i128: every u64 fits, and the reckoning may be over the limit.
        let running = i128::from(running);
        let on_streams = i128::try_from(http2.streams)
            .unwrap_or(i128::MAX)
            .min(running);
        let connections = i128::try_from(http2.connections).unwrap_or(i128::MAX);
        let per_session = i128::from(FILES_PER_SESSION);
        let held = i128::from(OWN_FILES)
            + i128::from(self.reserved)
            + i128::from(self.tools())
            + connections
            + per_session * (running - on_streams);
        let now = running + (i128::from(self.limit) - held).div_euclid(per_session);
        u32::try_from(now.max(0))
            .unwrap_or(u32::MAX)
            .max(self.sessions())
    }
}

/// Whether `err` (or one of its causes) is a want of file descriptors:
/// a model connection that could not be made ([`ProviderError::OutOfFiles`]),
/// or any file or socket this process could not open (`EMFILE`, `ENFILE`).
pub fn out_of_files(err: &(dyn std::error::Error + 'static)) -> bool {
    let provider = |err: &ProviderError| matches!(err, ProviderError::OutOfFiles { .. });
    let worker = |err: &WorkerError| matches!(err, WorkerError::Provider(p) if provider(p));
    let mut next = Some(err);
    while let Some(error) = next {
        if let Some(io) = error.downcast_ref::<std::io::Error>() {
            // EMFILE (24) and ENFILE (23), the same on Linux and macOS.
            if matches!(io.raw_os_error(), Some(23 | 24)) {
                return true;
            }
        }
        // `WorkerError::Provider` is transparent: its source skips the
        // provider's error, so both are looked at where they are.
        if error.downcast_ref::<ProviderError>().is_some_and(provider)
            || error.downcast_ref::<WorkerError>().is_some_and(worker)
        {
            return true;
        }
        next = error.source();
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;
    use pod::PodError;

    #[test]
    fn a_limit_serves_what_is_left_after_the_process_its_connections_and_tools() {
        // 20,000 files, 16 database connections, no HTTP API: 1,024 for
        // tools, one per session.
        assert_eq!(tool_files(20_000), 1_024);
        assert_eq!(sessions(20_000, 16), 20_000 - 64 - 16 - 1_024);
        // The HTTP API's 128 connections and its listener come off too; a
        // sixteenth of the limit for tools.
        assert_eq!(tool_files(1_024), 64);
        assert_eq!(sessions(1_024, 16 + 129), 1_024 - 64 - 145 - 64);
        // Two commands' worth at the least.
        assert_eq!(tool_files(96), 16);
        // Too few for one: one, given back to the queue if it cannot run.
        assert_eq!(sessions(50, 16), 1);
        assert_eq!(sessions(0, 0), 1);
        // An unlimited process is not capped by its files.
        assert_eq!(sessions(u64::MAX, 16), u32::MAX);
    }

    #[test]
    fn sessions_on_http2_streams_hold_no_descriptor() {
        let files = Files {
            limit: 1_000,
            reserved: 16,
        };
        let floor = 1_000 - 64 - 16 - 62;
        assert_eq!(files.tools(), 62);
        assert_eq!(files.sessions(), floor);
        let none = Http2InUse::default();
        // Over HTTP/1.1 (no streams) it is the floor, however many run.
        assert_eq!(files.sessions_now(0, none), floor);
        assert_eq!(files.sessions_now(floor, none), floor);
        // 800 sessions all waiting on streams of 8 connections: they hold
        // the 8, which leaves 850 for sessions still to reach a stream.
        let streams = Http2InUse {
            connections: 8,
            streams: 800,
        };
        assert_eq!(files.sessions_now(800, streams), 800 + floor - 8);
        // Those just admitted are not on a stream yet: one each, which
        // leaves no room for more until their requests are on streams.
        assert_eq!(
            files.sessions_now(800 + floor - 8, streams),
            800 + floor - 8
        );
        // At most one stream per running session counts (subagents and
        // graders add streams of their own).
        let more = Http2InUse {
            connections: 8,
            streams: 5_000,
        };
        assert_eq!(
            files.sessions_now(800, more),
            files.sessions_now(800, streams)
        );
        // Never below the floor, even when the reckoning is over.
        assert_eq!(files.sessions_now(5_000, none), floor);
    }

    #[test]
    fn only_a_want_of_descriptors_is_out_of_files() {
        let no_files = ProviderError::OutOfFiles {
            url: "http://127.0.0.1:1".into(),
            why: "Too many open files (os error 24)".into(),
        };
        let turn = PodError::Turn(WorkerError::Provider(no_files.clone()));
        assert!(out_of_files(&turn));
        assert!(out_of_files(&no_files));
        let refused = PodError::Turn(WorkerError::Provider(ProviderError::Unreachable {
            url: "http://127.0.0.1:1".into(),
            why: "connection refused".into(),
        }));
        assert!(!out_of_files(&refused));
        let io = |errno| PodError::Io {
            path: "/tmp/x".into(),
            source: std::io::Error::from_raw_os_error(errno),
        };
        assert!(out_of_files(&io(24)));
        assert!(out_of_files(&io(23)));
        assert!(!out_of_files(&io(2)));
    }
}
