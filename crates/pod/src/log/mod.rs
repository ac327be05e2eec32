//! The session log: append-only JSON Lines, one verified record per line.

mod codec;
mod disk;
mod reader;
mod record;
mod writer;

pub use codec::{decode_line, encode_line, verified_payload, LineError};
pub use reader::{
    parse_appended, parse_log, parse_log_before_damage, read_appended, read_log,
    read_log_before_damage, Damage, LogContents, LogCursor, TornTail,
};
pub use record::{
    AnswerRecord, CheckRecord, CheckpointPhase, CheckpointRecord, CompactionRecord, EndedHow,
    EndedRecord, HookDecision, HookRecord, LaunchJson, LimitsRecord, LogRecord, Origin, ParentLink,
    QuestionRecord, SessionHeader, StoppedRecord, TraceRecord, VerdictRecord, VerifyRecord,
    LOG_FORMAT_VERSION,
};
pub(crate) use writer::lock as lock_exclusive;
pub use writer::{is_locked, FileLog};
