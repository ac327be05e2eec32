//! Text that came from a model, a tool or a file, made fit for a terminal.
//!
//! A terminal obeys what it is sent: an escape sequence in a model's answer
//! can retitle the window (`ESC ] 0 ; … BEL`), clear the screen, move the
//! cursor over lines already shown, or hide text; a carriage return can
//! overwrite the start of a line; a bidirectional override (U+202E) makes
//! text read in another order than it is stored. Every string of that kind
//! goes through [`text`] (or [`line`]) before it is printed: control
//! characters, `DEL`, the C1 controls and the bidirectional controls are
//! shown as escapes (`\u{1b}`), so the bytes that would act never reach the
//! terminal. Newlines and tabs stay in [`text`]; a carriage return before
//! a newline is dropped and any other is shown.

use std::borrow::Cow;

/// Whether `c` would act on a terminal or reorder text rather than show.
fn acts(c: char) -> bool {
    (c.is_control() && c != '\n' && c != '\t')
        || matches!(
            c,
            '\u{061C}' | '\u{200E}' | '\u{200F}' | '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}'
        )
}

/// `text` with every acting character shown as an escape; newlines and
/// tabs kept (a `\r\n` becomes `\n`).
pub fn text(text: &str) -> Cow<'_, str> {
    clean(text, false)
}

/// The same for a one-line place: newlines are shown as `⏎` as well.
pub fn line(text: &str) -> Cow<'_, str> {
    clean(text, true)
}

fn clean(text: &str, one_line: bool) -> Cow<'_, str> {
    if !text.chars().any(|c| acts(c) || (one_line && c == '\n')) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 16);
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\r' if chars.peek() == Some(&'\n') => {}
            '\n' if one_line => out.push_str(" ⏎ "),
            c if acts(c) => out.extend(c.escape_unicode()),
            c => out.push(c),
        }
    }
    Cow::Owned(out)
}

/// `value` as JSON (pretty or compact) in which the acting characters that
/// JSON leaves raw (`DEL`, the C1 controls, the bidirectional controls) are
/// `\uXXXX` escapes too: the same value for a program, nothing that acts
/// when the stream is shown on a terminal.
pub fn json(value: &impl serde::Serialize, pretty: bool) -> serde_json::Result<String> {
    let mut out = Vec::new();
    match pretty {
        true => value.serialize(&mut serde_json::Serializer::with_formatter(
            &mut out,
            Escaping(serde_json::ser::PrettyFormatter::new()),
        ))?,
        false => value.serialize(&mut serde_json::Serializer::with_formatter(
            &mut out,
            Escaping(serde_json::ser::CompactFormatter),
        ))?,
    }
    // The serializer writes UTF-8 only.
    Ok(String::from_utf8_lossy(&out).into_owned())
}

/// A formatter that escapes what [`acts`] in string contents.
struct Escaping<F>(F);

impl<F: serde_json::ser::Formatter> serde_json::ser::Formatter for Escaping<F> {
    fn write_string_fragment<W: ?Sized + std::io::Write>(
        &mut self,
        writer: &mut W,
        fragment: &str,
    ) -> std::io::Result<()> {
        let mut start = 0;
        for (at, c) in fragment.char_indices() {
            if acts(c) {
                writer.write_all(&fragment.as_bytes()[start..at])?;
                // Every acting character is in the Basic Multilingual Plane.
                write!(writer, "\\u{:04x}", u32::from(c))?;
                start = at + c.len_utf8();
            }
        }
        writer.write_all(&fragment.as_bytes()[start..])
    }

    fn begin_array<W: ?Sized + std::io::Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        self.0.begin_array(w)
    }
    fn end_array<W: ?Sized + std::io::Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        self.0.end_array(w)
    }
    fn begin_array_value<W: ?Sized + std::io::Write>(
        &mut self,
        w: &mut W,
        first: bool,
    ) -> std::io::Result<()> {
        self.0.begin_array_value(w, first)
    }
    fn end_array_value<W: ?Sized + std::io::Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        self.0.end_array_value(w)
    }
    fn begin_object<W: ?Sized + std::io::Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        self.0.begin_object(w)
    }
    fn end_object<W: ?Sized + std::io::Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        self.0.end_object(w)
    }
    fn begin_object_key<W: ?Sized + std::io::Write>(
        &mut self,
        w: &mut W,
        first: bool,
    ) -> std::io::Result<()> {
        self.0.begin_object_key(w, first)
    }
    fn end_object_key<W: ?Sized + std::io::Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        self.0.end_object_key(w)
    }
    fn begin_object_value<W: ?Sized + std::io::Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        self.0.begin_object_value(w)
    }
    fn end_object_value<W: ?Sized + std::io::Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        self.0.end_object_value(w)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_and_overrides_are_shown_not_obeyed() {
        let hostile = "a\u{1b}]0;pwned\u{7}b\u{1b}[2J\u{1b}[H\u{9b}31mc\u{202E}gnp.exe\u{7f}";
        let shown = text(hostile);
        for byte in ['\u{1b}', '\u{7}', '\u{9b}', '\u{202E}', '\u{7f}'] {
            assert!(!shown.contains(byte), "{byte:?} in {shown:?}");
        }
        assert_eq!(
            shown,
            "a\\u{1b}]0;pwned\\u{7}b\\u{1b}[2J\\u{1b}[H\\u{9b}31mc\\u{202e}gnp.exe\\u{7f}"
        );
    }

    #[test]
    fn json_escapes_what_it_would_leave_raw_and_keeps_the_value() {
        let value = serde_json::json!({"text": "a\u{1b}[2Jb\u{9b}c\u{202E}d\u{7f}é", "n": [1, 2]});
        for pretty in [false, true] {
            let encoded = json(&value, pretty).unwrap();
            assert!(
                encoded.chars().all(|c| !acts(c) || c == '\n'),
                "{encoded:?}"
            );
            assert!(
                encoded.contains("\\u202e") && encoded.contains('é'),
                "{encoded}"
            );
            let back: serde_json::Value = serde_json::from_str(&encoded).unwrap();
            assert_eq!(back, value);
        }
    }

    #[test]
    fn newlines_and_tabs_stay_and_carriage_returns_do_not_overwrite() {
        assert!(matches!(text("plain\ttext\nline"), Cow::Borrowed(_)));
        assert_eq!(text("one\r\ntwo"), "one\ntwo");
        assert_eq!(text("secret\rshown"), "secret\\u{d}shown");
        assert_eq!(line("one\ntwo"), "one ⏎ two");
    }
}
