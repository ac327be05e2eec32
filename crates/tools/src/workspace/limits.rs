//! Caps and timeouts of the workspace tools, with the reason for each, and
//! the small text helpers that apply them.
//!
//! Every cap protects the context window: a tool result is re-sent with
//! every later request until compaction, so one huge result costs many
//! times its size. When a cap cuts output, the result says so and how to
//! get the rest.

use std::time::Duration;

/// The caps and timeouts of the workspace tools.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Lines `read_file` returns when no range is given (or the range is
    /// longer): about 20k tokens of typical code, enough to understand a
    /// file, small enough to read several.
    pub read_max_lines: usize,
    /// Bytes of file content `read_file` returns per call, whatever the line
    /// count (minified files have few, huge lines).
    pub read_max_bytes: usize,
    /// Characters per line shown by `read_file` and `grep`; longer lines are
    /// cut, since they are almost always generated data.
    pub line_max_chars: usize,
    /// Files larger than this are not loaded at all (they are hashed whole
    /// for the tracker): use `grep` or `bash` with `head`/`sed` instead.
    pub file_max_bytes: u64,
    /// Entries `list_dir` and `glob` return.
    pub list_max_entries: usize,
    /// Matches `grep` returns.
    pub grep_max_matches: usize,
    /// `bash` timeout when the model gives none: long enough for a build or
    /// a test run, short enough that a hung command does not stall a session.
    pub bash_default_timeout: Duration,
    /// The longest timeout the model may ask for.
    pub bash_max_timeout: Duration,
    /// Bytes of each of stdout and stderr kept by `bash`, split between the
    /// head and the tail: the start shows what ran, the end shows how it
    /// ended, the middle is usually progress noise.
    pub bash_output_max_bytes: usize,
    /// After the command's process group is gone, how long to wait for its
    /// output pipes to close: a process that left the group (setsid) may
    /// hold them open forever.
    pub bash_pipe_grace: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            read_max_lines: 2_000,
            read_max_bytes: 100_000,
            line_max_chars: 2_000,
            file_max_bytes: 20 * 1024 * 1024,
            list_max_entries: 1_000,
            grep_max_matches: 200,
            bash_default_timeout: Duration::from_secs(120),
            bash_max_timeout: Duration::from_secs(600),
            bash_output_max_bytes: 30_000,
            bash_pipe_grace: Duration::from_secs(2),
        }
    }
}

/// Bytes inspected to tell a binary file from text (as git does: a NUL in
/// the first 8000 bytes).
pub const BINARY_PROBE_BYTES: usize = 8_000;

/// Whether `content` looks binary.
pub fn looks_binary(content: &[u8]) -> bool {
    content[..content.len().min(BINARY_PROBE_BYTES)].contains(&0)
}

/// `line` cut to `max` characters, with a marker when cut.
pub fn cut_line(line: &str, max: usize) -> String {
    match line.char_indices().nth(max) {
        Some((at, _)) => format!("{}… [line cut at {max} characters]", &line[..at]),
        None => line.to_string(),
    }
}

/// Keeps the first and last bytes of a stream, counting what falls between.
#[derive(Debug, Clone)]
pub struct HeadTail {
    head: Vec<u8>,
    tail: std::collections::VecDeque<u8>,
    head_cap: usize,
    tail_cap: usize,
    total: u64,
}

impl HeadTail {
    /// Keeps at most `max` bytes: half from the start, half from the end.
    pub fn new(max: usize) -> Self {
        let head_cap = max / 2;
        Self {
            head: Vec::new(),
            tail: std::collections::VecDeque::new(),
            head_cap,
            tail_cap: max - head_cap,
            total: 0,
        }
    }

    /// Adds a chunk.
    pub fn push(&mut self, mut chunk: &[u8]) {
        self.total += chunk.len() as u64;
        let room = self.head_cap.saturating_sub(self.head.len());
        let take = room.min(chunk.len());
        self.head.extend_from_slice(&chunk[..take]);
        chunk = &chunk[take..];
        if chunk.len() >= self.tail_cap {
            self.tail.clear();
            self.tail.extend(&chunk[chunk.len() - self.tail_cap..]);
            return;
        }
        let overflow = (self.tail.len() + chunk.len()).saturating_sub(self.tail_cap);
        self.tail.drain(..overflow);
        self.tail.extend(chunk);
    }

    /// Bytes seen in total.
    pub fn total(&self) -> u64 {
        self.total
    }

    /// The kept text, with a marker where bytes were dropped.
    pub fn render(&self) -> String {
        let kept = (self.head.len() + self.tail.len()) as u64;
        let mut out = String::from_utf8_lossy(&self.head).into_owned();
        if self.total > kept {
            out.push_str(&format!(
                "\n[… {} bytes omitted from the middle …]\n",
                self.total - kept
            ));
        }
        let tail: Vec<u8> = self.tail.iter().copied().collect();
        out.push_str(&String::from_utf8_lossy(&tail));
        out
    }
}
