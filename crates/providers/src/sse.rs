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
    pub fn feed(&mut self, bytes: &[u8]) -> Result<Vec<SseEvent>, LineTooLong> {
        let mut events = Vec::new();
        for &byte in bytes {
            match byte {
                b'\n' if self.after_cr => self.after_cr = false,
                b'\n' | b'\r' => {
                    self.after_cr = byte == b'\r';
                    let line = std::mem::take(&mut self.line);
                    if let Some(event) = self.line_done(&line) {
                        events.push(event);
                    }
                }
                _ => {
                    self.after_cr = false;
                    if self.line.len() >= MAX_LINE {
                        return Err(LineTooLong);
                    }
                    self.line.push(byte);
                }
            }
        }
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
    fn an_event_with_no_data_is_not_dispatched() {
        assert!(all(&[b"event: ping\n\n"]).is_empty());
    }
}
