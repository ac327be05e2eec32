//! One log line: `{"crc":"<8 hex>","rec":<record JSON>}` followed by `\n`.
//!
//! The CRC-32 covers the record's JSON bytes exactly as written, so a torn or
//! bit-flipped line fails the check instead of being misread. The line stays
//! plain JSON, so `jq` and friends can read the log.

use super::record::LogRecord;

const PREFIX: &[u8] = br#"{"crc":""#;
const MIDDLE: &[u8] = br#"","rec":"#;
const HEX_LEN: usize = 8;

/// Why a line could not be decoded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LineError {
    /// The line does not have the framing of a log line.
    #[error("not a log line (bad framing)")]
    Framing,
    /// The checksum does not match the payload.
    #[error("checksum mismatch (stored {stored:08x}, computed {computed:08x})")]
    Checksum {
        /// The checksum in the line.
        stored: u32,
        /// The checksum of the payload.
        computed: u32,
    },
    /// The checksum matches but the record is not one this version reads.
    #[error("unreadable record: {0}")]
    Record(String),
}

/// Encodes a record as one line, newline included.
pub fn encode_line(record: &LogRecord) -> Result<Vec<u8>, serde_json::Error> {
    let payload = serde_json::to_vec(record)?;
    let crc = crc32fast::hash(&payload);
    let mut line = Vec::with_capacity(payload.len() + PREFIX.len() + MIDDLE.len() + HEX_LEN + 2);
    line.extend_from_slice(PREFIX);
    line.extend_from_slice(format!("{crc:08x}").as_bytes());
    line.extend_from_slice(MIDDLE);
    line.extend_from_slice(&payload);
    line.extend_from_slice(b"}\n");
    Ok(line)
}

/// Decodes one line (without its newline).
pub fn decode_line(line: &[u8]) -> Result<LogRecord, LineError> {
    let payload = verified_payload(line)?;
    serde_json::from_slice(payload).map_err(|e| LineError::Record(e.to_string()))
}

/// Checks the framing and checksum and returns the record's JSON bytes.
pub fn verified_payload(line: &[u8]) -> Result<&[u8], LineError> {
    let head = PREFIX.len() + HEX_LEN + MIDDLE.len();
    if line.len() < head + 1
        || !line.starts_with(PREFIX)
        || &line[PREFIX.len() + HEX_LEN..head] != MIDDLE
        || line.last() != Some(&b'}')
    {
        return Err(LineError::Framing);
    }
    let hex = &line[PREFIX.len()..PREFIX.len() + HEX_LEN];
    // Exactly what `encode_line` writes: `from_str_radix` alone would also
    // take upper case and a leading `+`, so one record had several lines.
    if !hex.iter().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')) {
        return Err(LineError::Framing);
    }
    let hex = std::str::from_utf8(hex).map_err(|_| LineError::Framing)?;
    let stored = u32::from_str_radix(hex, 16).map_err(|_| LineError::Framing)?;
    let payload = &line[head..line.len() - 1];
    let computed = crc32fast::hash(payload);
    if stored != computed {
        return Err(LineError::Checksum { stored, computed });
    }
    Ok(payload)
}

#[cfg(test)]
mod tests {
    use super::*;
    use pod_llm::Item;

    #[test]
    fn round_trips_and_detects_flips() {
        let record = LogRecord::Item(Item::user("hello"));
        let line = encode_line(&record).unwrap();
        assert_eq!(line.last(), Some(&b'\n'));
        let body = &line[..line.len() - 1];
        assert_eq!(decode_line(body).unwrap(), record);
        // The line is plain JSON.
        let _: serde_json::Value = serde_json::from_slice(body).unwrap();
        for i in 0..body.len() {
            let mut flipped = body.to_vec();
            flipped[i] ^= 0x01;
            assert!(
                decode_line(&flipped).is_err(),
                "flip at byte {i} went unnoticed"
            );
        }
        for cut in 0..body.len() {
            assert!(
                decode_line(&body[..cut]).is_err(),
                "cut at {cut} went unnoticed"
            );
        }
    }

    /// Found by the `log_line` fuzz target: `{"crc":"dA843717",...}` decoded
    /// and re-encoded as `da843717`.
    #[test]
    fn crc_hex_must_be_lower_case_without_sign() {
        let record = LogRecord::Item(Item::user("hello"));
        let line = encode_line(&record).unwrap();
        let body = &line[..line.len() - 1];
        let hex = PREFIX.len()..PREFIX.len() + HEX_LEN;
        let upper: Vec<u8> = body
            .iter()
            .enumerate()
            .map(|(i, b)| {
                if hex.contains(&i) {
                    b.to_ascii_uppercase()
                } else {
                    *b
                }
            })
            .collect();
        if upper != body {
            assert_eq!(decode_line(&upper), Err(LineError::Framing));
        }
        let mut signed = body.to_vec();
        signed[hex.start] = b'+';
        assert_eq!(decode_line(&signed), Err(LineError::Framing));
    }
}
