//! Fuzz bodies: one function per target, each taking arbitrary bytes and
//! panicking only when a property breaks. The `cargo fuzz` targets in
//! `fuzz/` (libFuzzer, nightly) and the stable `pod-fuzz` driver call the
//! same functions, so a crash found by either reproduces in both.
//!
//! | target | property |
//! |---|---|
//! | `log_line` | `decode_line` never panics; a line that decodes re-encodes to a line that decodes to the same record, and that encoding is a fixed point; a line whose payload is the record's canonical JSON re-encodes to identical bytes |
//! | `log_payload` | the same, with the input as the payload of a line with a valid checksum (reaches the record parser past the CRC) |
//! | `parse_log` | `parse_log` never panics; when it succeeds, its verified prefix parses to the same records without a torn tail, and re-encoding the records parses back to them |
//! | `sse` | `SseDecoder` never panics, and the events do not depend on how the bytes are split into chunks |
//! | `openai_stream`, `anthropic_stream`, `responses_stream` | the provider's SSE + stream parser never panics, and its events or error do not depend on chunking |

use pod::log::{decode_line, encode_line, parse_log, verified_payload, LogRecord};
use pod_providers::sse::{SseDecoder, SseEvent};
use pod_providers::FuzzWire;
use std::path::Path;

/// Names of the targets, as `fuzz/fuzz_targets/<name>.rs` and
/// `fuzz/corpus/<name>/`.
pub const TARGETS: &[&str] = &[
    "log_line",
    "log_payload",
    "parse_log",
    "sse",
    "openai_stream",
    "anthropic_stream",
    "responses_stream",
];

/// Runs target `name` on `data`; `false` if there is no such target.
pub fn run_target(name: &str, data: &[u8]) -> bool {
    match name {
        "log_line" => log_line(data),
        "log_payload" => log_payload(data),
        "parse_log" => parse_log_bytes(data),
        "sse" => sse(data),
        "openai_stream" => provider_stream(FuzzWire::OpenAi, data),
        "anthropic_stream" => provider_stream(FuzzWire::Anthropic, data),
        "responses_stream" => provider_stream(FuzzWire::Responses, data),
        _ => return false,
    }
    true
}

/// `log_line`: one line (without its newline).
pub fn log_line(data: &[u8]) {
    let Ok(record) = decode_line(data) else {
        return;
    };
    let encoded = encode_line(&record).expect("a decoded record encodes");
    let body = &encoded[..encoded.len() - 1];
    let again = decode_line(body).expect("a re-encoded line decodes");
    assert_eq!(again, record, "re-encoding changed the record");
    let twice = encode_line(&again).expect("encodes");
    assert_eq!(twice, encoded, "encoding is not a fixed point");
    let canonical = serde_json::to_vec(&record).expect("encodes");
    if verified_payload(data).ok() == Some(canonical.as_slice()) {
        assert_eq!(body, data, "a canonical line re-encoded to other bytes");
    }
}

/// `log_payload`: `data` as the payload of a well-framed line.
pub fn log_payload(data: &[u8]) {
    let crc = crc32(data);
    let mut line = format!("{{\"crc\":\"{crc:08x}\",\"rec\":").into_bytes();
    line.extend_from_slice(data);
    line.push(b'}');
    log_line(&line);
}

/// `parse_log`: a whole log file.
pub fn parse_log_bytes(data: &[u8]) {
    let path = Path::new("fuzz.jsonl");
    let Ok(contents) = parse_log(path, data) else {
        return;
    };
    let valid = usize::try_from(contents.valid_len).expect("fits");
    assert!(valid <= data.len());
    let prefix = parse_log(path, &data[..valid]).expect("the verified prefix parses");
    assert!(
        prefix.torn_tail.is_none(),
        "the verified prefix has a torn tail"
    );
    assert_eq!(prefix.records, contents.records);
    let mut rewritten = Vec::new();
    if let Some(header) = &contents.header {
        rewritten.extend(encode_line(&LogRecord::Header(header.clone())).expect("encodes"));
    }
    for record in &contents.records {
        rewritten.extend(encode_line(record).expect("encodes"));
    }
    let back = parse_log(path, &rewritten).expect("re-encoded records parse");
    assert_eq!(back.records, contents.records);
    assert_eq!(back.header, contents.header);
}

/// Splits `data` into chunks at points chosen by its first byte (so the
/// fuzzer explores chunkings too); the rest is the payload.
fn chunks(data: &[u8]) -> (Vec<u8>, Vec<Vec<u8>>) {
    let Some((&shape, rest)) = data.split_first() else {
        return (Vec::new(), Vec::new());
    };
    let step = usize::from(shape % 17) + 1;
    let pieces = rest.chunks(step).map(<[u8]>::to_vec).collect();
    (rest.to_vec(), pieces)
}

fn sse_events(pieces: &[Vec<u8>]) -> Result<Vec<SseEvent>, String> {
    let mut decoder = SseDecoder::new();
    let mut events = Vec::new();
    for piece in pieces {
        events.extend(decoder.feed(piece).map_err(|e| e.to_string())?);
    }
    events.extend(decoder.finish());
    Ok(events)
}

/// `sse`: the SSE decoder, whole and chunked.
pub fn sse(data: &[u8]) {
    let (whole, pieces) = chunks(data);
    let at_once = sse_events(&[whole]);
    let chunked = sse_events(&pieces);
    assert_eq!(at_once, chunked, "SSE events depend on chunking");
}

/// `openai_stream` / `anthropic_stream` / `responses_stream`: a
/// provider's stream parser.
pub fn provider_stream(wire: FuzzWire, data: &[u8]) {
    let (whole, pieces) = chunks(data);
    let at_once = collect(wire, vec![whole]);
    let chunked = collect(wire, pieces);
    assert_eq!(at_once, chunked, "stream events depend on chunking");
}

fn collect(wire: FuzzWire, pieces: Vec<Vec<u8>>) -> Vec<String> {
    use futures_util::StreamExt;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .expect("a runtime");
    runtime.block_on(async {
        pod_providers::stream_parser_for_fuzzing(wire, pieces)
            .map(|event| format!("{event:?}"))
            .collect()
            .await
    })
}

/// CRC-32 (IEEE), bitwise: the fuzz bodies need it only to frame payloads.
fn crc32(data: &[u8]) -> u32 {
    let mut crc = !0u32;
    for &byte in data {
        crc ^= u32::from(byte);
        for _ in 0..8 {
            let mask = (crc & 1).wrapping_neg();
            crc = (crc >> 1) ^ (0xEDB8_8320 & mask);
        }
    }
    !crc
}

#[cfg(test)]
mod tests {
    use super::*;
    use pod_llm::Item;

    #[test]
    fn the_bodies_accept_real_lines_and_garbage() {
        let line = encode_line(&LogRecord::Item(Item::user("hi"))).unwrap();
        let body = &line[..line.len() - 1];
        log_line(body);
        log_payload(&serde_json::to_vec(&LogRecord::Item(Item::user("x"))).unwrap());
        parse_log_bytes(&line);
        for name in TARGETS {
            assert!(run_target(name, b"\x03data: {\"x\":1}\n\n"));
            assert!(run_target(name, &[]));
        }
        assert!(!run_target("nope", b""));
        // The framing CRC agrees with the log's.
        assert_eq!(crc32(b"123456789"), 0xCBF4_3926);
    }
}
