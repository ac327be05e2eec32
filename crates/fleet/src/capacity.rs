//! How many sessions a worker admits at once: what its open-file limit
//! can serve, and what it learns when a session's model connection finds
//! no descriptor anyway.
//!
//! A session waiting on its model holds one connection to it (in flight,
//! or idle in the process's pool between requests), and a file or a
//! command's two pipes while a tool runs. Past the process's limit a
//! connection fails with `EMFILE`: admitting only what the limit serves
//! keeps the rest queued in the store, for this worker or another, instead
//! of failing them. Over HTTP/2 sessions share connections, and a worker
//! admits more as its sessions' requests go out on streams
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

/// Descriptors per running session: its model connection, and one more for
/// what a tool holds open. A session waiting on its model (nearly all of a
/// session's time) holds one; one running a command holds three (the
/// connection idle in the pool, the command's stdout and stderr pipes), and
/// sessions seldom all run commands at the same moment. A session that
/// still meets the limit is given back to the queue ([`out_of_files`]),
/// and the worker then admits no more than it runs.
pub const FILES_PER_SESSION: u64 = 2;

/// The most sessions a process allowed `open_files` descriptors serves at
/// once, when `reserved` of them are taken by its other connections (the
/// database pool, the HTTP API's connections and listener). At least one:
/// a worker that cannot run one session still claims one at a time, and a
/// session that finds no descriptor goes back to the queue.
pub fn sessions(open_files: u64, reserved: u64) -> u32 {
    let spare = open_files.saturating_sub(OWN_FILES.saturating_add(reserved));
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

    /// The sessions it serves now that `running` run and its HTTP/2 model
    /// connections hold `http2`, never fewer than [`Files::sessions`]. A
    /// session with a request in flight on an HTTP/2 stream holds no
    /// descriptor of its own (its connection is shared, and each shared
    /// connection is reckoned once): it is reckoned with one, for a tool.
    /// Every other running session, and each one admitted next, is
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
        let held =
            i128::from(OWN_FILES) + i128::from(self.reserved) + connections + per_session * running
                - on_streams;
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
    fn a_limit_serves_what_is_left_after_the_process_and_its_connections() {
        // 20,000 files, 16 database connections, no HTTP API.
        assert_eq!(sessions(20_000, 16), (20_000 - 64 - 16) / 2);
        // The HTTP API's 128 connections and its listener come off too.
        assert_eq!(sessions(1_024, 16 + 129), (1_024 - 64 - 145) / 2);
        // Too few for one: one, given back to the queue if it cannot run.
        assert_eq!(sessions(50, 16), 1);
        assert_eq!(sessions(0, 0), 1);
        // An unlimited process is not capped by its files.
        assert_eq!(sessions(u64::MAX, 16), u32::MAX);
    }

    #[test]
    fn sessions_on_http2_streams_are_reckoned_with_one_descriptor() {
        let files = Files {
            limit: 1_000,
            reserved: 16,
        };
        let floor = (1_000 - 64 - 16) / 2;
        assert_eq!(files.sessions(), floor);
        let none = Http2InUse::default();
        // Over HTTP/1.1 (no streams) it is the floor, however many run.
        assert_eq!(files.sessions_now(0, none), floor);
        assert_eq!(files.sessions_now(floor, none), floor);
        // 460 sessions all waiting on streams of 5 connections: each holds
        // one, the connections five: 1,000 - 80 - 5 - 460 = 455 spare,
        // room for 227 more at two each.
        let streams = Http2InUse {
            connections: 5,
            streams: 460,
        };
        assert_eq!(files.sessions_now(460, streams), 460 + 455 / 2);
        // Those just admitted are not on a stream yet: two each, which
        // leaves no room for more until their requests are on streams.
        assert_eq!(files.sessions_now(687, streams), 687);
        // At most one stream per running session counts (subagents and
        // graders add streams of their own).
        let more = Http2InUse {
            connections: 5,
            streams: 5_000,
        };
        assert_eq!(
            files.sessions_now(460, more),
            files.sessions_now(460, streams)
        );
        // Never below the floor, even when the reckoning is over.
        assert_eq!(files.sessions_now(900, none), floor);
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
