//! Reading a session log: every line verified, a torn tail told apart from
//! corruption in the middle.

use super::codec::{decode_line, LineError};
use super::record::{LogRecord, SessionHeader, LOG_FORMAT_VERSION};
use crate::error::PodError;
use std::path::Path;

/// A log as read from disk.
#[derive(Debug, Default)]
pub struct LogContents {
    /// The header, if the first line survived.
    pub header: Option<SessionHeader>,
    /// Every record after the header, in order.
    pub records: Vec<LogRecord>,
    /// Length of the verified prefix; appends continue from here.
    pub valid_len: u64,
    /// The torn last line that was dropped, if any.
    pub torn_tail: Option<TornTail>,
    /// Where a log read with [`parse_log_before_damage`] stopped: the first
    /// line, not the last, that failed its check. `None` from
    /// [`parse_log`], which refuses such a log instead.
    pub damage: Option<Damage>,
}

/// A line in the middle of a log that failed its check (a bad disk, an
/// edit): what comes before it can still be read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Damage {
    /// 1-based line number.
    pub line: usize,
    /// What is wrong with it.
    pub reason: String,
}

impl LogContents {
    /// Where a reader that read this stands: after its records and its
    /// verified bytes (a torn tail not counted, so a line still being
    /// written is read again once whole).
    pub fn cursor(&self) -> LogCursor {
        LogCursor {
            records: self.records.len(),
            bytes: self.valid_len,
        }
    }
}

/// Where a reader of a growing log stands: how many records it has read
/// and, in a log file, where the line after them starts.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LogCursor {
    /// Records read (the header not counted).
    pub records: usize,
    /// Bytes of the file read, whole lines only (0 where the store keeps
    /// no file, or nothing was read yet).
    pub bytes: u64,
}

/// A last line that a crash cut short.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TornTail {
    /// 1-based line number.
    pub line: usize,
    /// Bytes dropped.
    pub bytes: u64,
}

/// Reads and verifies a whole log file.
pub fn read_log(path: &Path) -> Result<LogContents, PodError> {
    let bytes = std::fs::read(path).map_err(|source| PodError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    parse_log(path, &bytes)
}

/// Verifies log bytes. `path` is only used in errors.
pub fn parse_log(path: &Path, bytes: &[u8]) -> Result<LogContents, PodError> {
    parse(path, bytes, false)
}

/// Reads and verifies a log file up to its first damaged line, which ends
/// the read instead of failing it ([`LogContents::damage`] says where):
/// what `pod fork --at N` saves of a damaged session. A damaged header is
/// still an error, since nothing after it can be trusted to belong to it.
pub fn read_log_before_damage(path: &Path) -> Result<LogContents, PodError> {
    let bytes = std::fs::read(path).map_err(|source| PodError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    parse_log_before_damage(path, &bytes)
}

/// [`parse_log`], stopping at the first damaged line instead of failing.
pub fn parse_log_before_damage(path: &Path, bytes: &[u8]) -> Result<LogContents, PodError> {
    parse(path, bytes, true)
}

fn parse(path: &Path, bytes: &[u8], salvage: bool) -> Result<LogContents, PodError> {
    // One record per line: size the vector once instead of regrowing (and
    // copying) it ~17 times on a 100k-line log.
    let lines = bytes.iter().filter(|&&b| b == b'\n').count();
    let mut contents = LogContents {
        records: Vec::with_capacity(lines),
        ..LogContents::default()
    };
    let mut offset = 0usize;
    let mut line_no = 0usize;
    while offset < bytes.len() {
        line_no += 1;
        let (line, next, complete) = match memchr_newline(&bytes[offset..]) {
            Some(n) => (&bytes[offset..offset + n], offset + n + 1, true),
            None => (&bytes[offset..], bytes.len(), false),
        };
        let is_last = next >= bytes.len() || only_zeros(&bytes[next..]);
        // A line without its newline was never acknowledged.
        let decoded = if complete {
            decode_line(line)
        } else {
            Err(LineError::Framing)
        };
        match decoded {
            Ok(record) => {
                match accept(&mut contents, record, path, line_no) {
                    Ok(()) => {}
                    Err(PodError::CorruptLog { reason, .. }) if salvage && line_no > 1 => {
                        contents.damage = Some(Damage {
                            line: line_no,
                            reason,
                        });
                        break;
                    }
                    Err(err) => return Err(err),
                }
                contents.valid_len = next as u64;
                offset = next;
            }
            // A last line that is cut or fails its check is what a crash
            // mid-append leaves: drop it; the writer truncates it on resume.
            Err(LineError::Framing | LineError::Checksum { .. }) if is_last => {
                contents.torn_tail = Some(TornTail {
                    line: line_no,
                    bytes: (bytes.len() - offset) as u64,
                });
                tracing::warn!(
                    path = %path.display(),
                    line = line_no,
                    "dropping torn last line of session log"
                );
                break;
            }
            Err(err) if salvage && line_no > 1 => {
                contents.damage = Some(Damage {
                    line: line_no,
                    reason: err.to_string(),
                });
                break;
            }
            Err(err) => {
                return Err(PodError::CorruptLog {
                    path: path.to_path_buf(),
                    line: line_no,
                    reason: err.to_string(),
                })
            }
        }
    }
    Ok(contents)
}

/// Reads what a log file gained after `cursor`: only the bytes appended
/// since, parsed once. A last line without its newline (or one failing its
/// check with nothing after it) is one still being written, or a crash's
/// torn tail: it is left for the next read, which starts where it does.
pub fn read_appended(
    path: &Path,
    cursor: LogCursor,
) -> Result<(Vec<LogRecord>, LogCursor), PodError> {
    use std::io::{Read, Seek, SeekFrom};
    let io = |source| PodError::Io {
        path: path.to_path_buf(),
        source,
    };
    let mut file = std::fs::File::open(path).map_err(io)?;
    let len = file.metadata().map_err(io)?.len();
    if len < cursor.bytes {
        // Whole lines are never cut (only a torn tail, which a cursor never
        // passes): this is not the log that was read.
        return Err(PodError::CorruptLog {
            path: path.to_path_buf(),
            line: cursor.records + 1,
            reason: format!(
                "the log is {len} bytes, shorter than the {} already read from it",
                cursor.bytes
            ),
        });
    }
    if len == cursor.bytes {
        return Ok((Vec::new(), cursor));
    }
    file.seek(SeekFrom::Start(cursor.bytes)).map_err(io)?;
    let mut bytes = Vec::new();
    file.read_to_end(&mut bytes).map_err(io)?;
    parse_appended(path, &bytes, cursor)
}

/// The whole records in `bytes`, which continue a log after `cursor`, and
/// the cursor after them (see [`read_appended`]). `path` is only used in
/// errors.
pub fn parse_appended(
    path: &Path,
    bytes: &[u8],
    cursor: LogCursor,
) -> Result<(Vec<LogRecord>, LogCursor), PodError> {
    let mut records = Vec::new();
    let mut offset = 0usize;
    // The header is line 1.
    let mut line_no = cursor.records + 1;
    while let Some(n) = memchr_newline(&bytes[offset..]) {
        line_no += 1;
        let next = offset + n + 1;
        match decode_line(&bytes[offset..offset + n]) {
            Ok(LogRecord::Header(_)) => {
                return Err(PodError::CorruptLog {
                    path: path.to_path_buf(),
                    line: line_no,
                    reason: "a header line after the first line".into(),
                })
            }
            Ok(record) => {
                records.push(record);
                offset = next;
            }
            // What `parse_log` drops as a torn tail: left unread.
            Err(LineError::Framing | LineError::Checksum { .. }) if only_zeros(&bytes[next..]) => {
                break
            }
            Err(err) => {
                return Err(PodError::CorruptLog {
                    path: path.to_path_buf(),
                    line: line_no,
                    reason: err.to_string(),
                })
            }
        }
    }
    let cursor = LogCursor {
        records: cursor.records + records.len(),
        bytes: cursor.bytes + offset as u64,
    };
    Ok((records, cursor))
}

fn accept(
    contents: &mut LogContents,
    record: LogRecord,
    path: &Path,
    line: usize,
) -> Result<(), PodError> {
    match record {
        LogRecord::Header(header) if line == 1 => {
            if header.format_version > LOG_FORMAT_VERSION {
                return Err(PodError::CorruptLog {
                    path: path.to_path_buf(),
                    line,
                    reason: format!(
                        "log format version {} is newer than this pod reads ({LOG_FORMAT_VERSION})",
                        header.format_version
                    ),
                });
            }
            contents.header = Some(header);
        }
        LogRecord::Header(_) => {
            return Err(PodError::CorruptLog {
                path: path.to_path_buf(),
                line,
                reason: "a header line after the first line".into(),
            })
        }
        _ if line == 1 => {
            return Err(PodError::CorruptLog {
                path: path.to_path_buf(),
                line,
                reason: "the first line is not a session header".into(),
            })
        }
        record => contents.records.push(record),
    }
    Ok(())
}

fn memchr_newline(bytes: &[u8]) -> Option<usize> {
    bytes.iter().position(|&b| b == b'\n')
}

fn only_zeros(bytes: &[u8]) -> bool {
    bytes.iter().all(|&b| b == 0 || b == b'\n')
}
