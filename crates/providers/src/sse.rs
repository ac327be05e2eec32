//! A minimal Server-Sent Events decoder: bytes in, events out.
//!
//! Hand-written on purpose: SSE client libraries reconnect by themselves,
//! and re-sending a completion request must be the retry policy's decision.
//! Follows the WHATWG event-stream rules that model APIs rely on: `:` comment
//! lines (keep-alives) are ignored, several `data:` lines join with `\n`, an
//! empty line dispatches, and lines may end in `\n`, `\r\n` or `\r`.

/// One dispatched event.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SseEvent {
    /// The `event:` field, if any.
    pub event: Option<String>,
    /// The `data:` lines joined with `\n`.
    pub data: String,
}

/// Longest line we buffer while waiting for its end. A model chunk is a few
/// kilobytes; a server that sends megabytes without a newline is broken, and
/// buffering it all would let it eat memory.
const MAX_LINE: usize = 16 * 1024 * 1024;

/// Incremental decoder; feed it bytes as they arrive.
#[derive(Debug, Default)]
pub struct SseDecoder {
    line: Vec<u8>,
    // A `\r` ended the last line; a `\n` right after it belongs to it.
    after_cr: bool,
    event: Option<String>,
    data: Option<String>,
}

/// A line longer than the decoder accepts.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("SSE line longer than {MAX_LINE} bytes")]
pub struct LineTooLong;

impl SseDecoder {
    /// An empty decoder.
    pub fn new() -> Self {
        Self::default()
    }

    /// Decodes `bytes`, returning the events they complete.
    ///
    /// A line that arrived whole in `bytes` is read where it lies; only
    /// the part of a line that a read cut off is copied, to wait for its
    /// end (a response's events are most often whole in each read).
    pub fn feed(&mut self, bytes: &[u8]) -> Result<Vec<SseEvent>, LineTooLong> {
        let mut events = Vec::new();
        let mut rest = bytes;
        if self.after_cr {
            if let Some(&first) = rest.first() {
                self.after_cr = false;
                if first == b'\n' {
                    rest = &rest[1..];
                }
            }
        }
        while let Some(end) = memchr::memchr2(b'\n', b'\r', rest) {
            let (part, tail) = rest.split_at(end);
            if self.line.len() + part.len() > MAX_LINE {
                return Err(LineTooLong);
            }
            rest = &tail[1..];
            if tail[0] == b'\r' {
                match rest.first() {
                    Some(b'\n') => rest = &rest[1..],
                    Some(_) => {}
                    // The `\n` of a `\r\n` may come with the next read.
                    None => self.after_cr = true,
                }
            }
            let event = if self.line.is_empty() {
                self.line_done(part)
            } else {
                let mut line = std::mem::take(&mut self.line);
                line.extend_from_slice(part);
                self.line_done(&line)
            };
            events.extend(event);
        }
        if self.line.len() + rest.len() > MAX_LINE {
            return Err(LineTooLong);
        }
        self.line.extend_from_slice(rest);
        Ok(events)
    }

    /// Ends the input. An event not followed by an empty line is still
    /// dispatched: servers that close right after their last `data:` line
    /// have said everything they meant to.
    pub fn finish(&mut self) -> Option<SseEvent> {
        let line = std::mem::take(&mut self.line);
        if !line.is_empty() {
            if let Some(event) = self.line_done(&line) {
                return Some(event);
            }
        }
        self.dispatch()
    }

    fn line_done(&mut self, line: &[u8]) -> Option<SseEvent> {
        if line.is_empty() {
            return self.dispatch();
        }
        if line[0] == b':' {
            return None;
        }
        let line = String::from_utf8_lossy(line);
        let (field, value) = match line.find(':') {
            Some(pos) => {
                let value = &line[pos + 1..];
                (&line[..pos], value.strip_prefix(' ').unwrap_or(value))
            }
            None => (&line[..], ""),
        };
        match field {
            "data" => match &mut self.data {
                Some(data) => {
                    data.push('\n');
                    data.push_str(value);
                }
                None => self.data = Some(value.to_string()),
            },
            "event" => self.event = Some(value.to_string()),
            // `id` and `retry` drive browser reconnection, which we never do.
            _ => {}
        }
        None
    }

    fn dispatch(&mut self) -> Option<SseEvent> {
        let event = self.event.take();
        let data = self.data.take()?;
        Some(SseEvent { event, data })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn all(parts: &[&[u8]]) -> Vec<SseEvent> {
        let mut decoder = SseDecoder::new();
        let mut events = Vec::new();
        for part in parts {
            events.extend(decoder.feed(part).unwrap());
        }
        events.extend(decoder.finish());
        events
    }

    #[test]
    fn comments_crlf_and_split_lines() {
        let events = all(&[
            b": keep-alive\r\n\r\n",
            b"event: message_start\r\nda",
            b"ta: {\"a\":1}\r",
            b"\n\r\n",
            b"data: [DONE]\n\n",
        ]);
        assert_eq!(
            events,
            vec![
                SseEvent {
                    event: Some("message_start".into()),
                    data: "{\"a\":1}".into()
                },
                SseEvent {
                    event: None,
                    data: "[DONE]".into()
                },
            ]
        );
    }

    #[test]
    fn multi_line_data_joins_with_newlines() {
        let events = all(&[b"data: one\ndata:two\ndata\n\n"]);
        assert_eq!(events[0].data, "one\ntwo\n");
    }

    #[test]
    fn last_event_without_blank_line_is_dispatched() {
        let events = all(&[b"data: {}"]);
        assert_eq!(events.len(), 1);
        assert_eq!(events[0].data, "{}");
    }

    #[test]
    fn events_are_the_same_wherever_the_reads_cut() {
        let stream: &[u8] = b": ping\r\n\r\nevent: a\r\ndata: {\"x\":1}\r\n\r\n\
            data: one\rdata: two\r\rdata: three\n\ndata: [DONE]\n\n";
        let whole = all(&[stream]);
        assert_eq!(whole.len(), 4, "{whole:?}");
        assert_eq!(whole[1].data, "one\ntwo");
        for cut in 0..=stream.len() {
            let (a, b) = stream.split_at(cut);
            assert_eq!(all(&[a, b]), whole, "cut at {cut}");
            for second in cut..=stream.len() {
                let (b, c) = stream[cut..].split_at(second - cut);
                assert_eq!(all(&[a, b, c]), whole, "cuts at {cut} and {second}");
            }
        }
        let bytes: Vec<&[u8]> = stream.chunks(1).collect();
        assert_eq!(all(&bytes), whole);
    }

    #[test]
    fn a_line_longer_than_the_limit_is_an_error_however_it_arrives() {
        let piece = vec![b'x'; 1024 * 1024];
        let mut decoder = SseDecoder::new();
        let mut failed = false;
        for _ in 0..=MAX_LINE / piece.len() {
            if decoder.feed(&piece).is_err() {
                failed = true;
                break;
            }
        }
        assert!(failed, "a line of more than {MAX_LINE} bytes was buffered");
        let mut whole = vec![b'x'; MAX_LINE + 1];
        whole.push(b'\n');
        assert_eq!(SseDecoder::new().feed(&whole), Err(LineTooLong));
        // A line of exactly the limit is fine.
        whole.truncate(MAX_LINE);
        whole.push(b'\n');
        assert!(SseDecoder::new().feed(&whole).is_ok());
    }

    #[test]
    fn an_event_with_no_data_is_not_dispatched() {
        assert!(all(&[b"event: ping\n\n"]).is_empty());
    }
}
