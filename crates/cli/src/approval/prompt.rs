//! The approval question and its answers, on any input and writer so it
//! can be tested with scripted answers. [`super::terminal`] runs it on the
//! real stdin and stderr: one key answers on a terminal ([`Keys`]), a line
//! elsewhere ([`Lines`]).
//!
//! The question shows what will happen, not only the tool's name: the
//! lines an `edit_file` takes out and puts in, the start of what a
//! `write_file` writes with its size, a `bash` command in full. All of it is
//! the model's text, shown through [`crate::render::safe`].

use crate::render::safe;
use pod::{ApprovalDecision, ApprovalRequest};
use pod_tools::workspace::bash::BashArgs;
use pod_tools::workspace::edit_file::EditFileArgs;
use pod_tools::workspace::write_file::WriteFileArgs;
use std::io::{BufRead, Read, Write};

/// Where answers come from.
pub trait Answers {
    /// The next answer; `None` at end of input (or Ctrl-D on a terminal).
    fn next_answer(&mut self, output: &mut dyn Write) -> Option<String>;
}

/// One answer per line (a pipe, a file, tests).
pub struct Lines<R>(pub R);

impl<R: BufRead> Answers for Lines<R> {
    fn next_answer(&mut self, _output: &mut dyn Write) -> Option<String> {
        let mut line = String::new();
        match self.0.read_line(&mut line) {
            Ok(0) | Err(_) => None,
            Ok(_) => Some(line),
        }
    }
}

/// One key per answer, no Enter: for a terminal in non-canonical mode
/// ([`super::terminal::RawMode`]). The key is echoed; Ctrl-D cancels.
pub struct Keys<R>(pub R);

/// Ctrl-D: in non-canonical mode the terminal passes it on as a byte.
const CTRL_D: u8 = 0x04;

impl<R: Read> Answers for Keys<R> {
    fn next_answer(&mut self, output: &mut dyn Write) -> Option<String> {
        let mut key = [0u8; 1];
        match self.0.read(&mut key) {
            Ok(0) | Err(_) => None,
            Ok(_) if key[0] == CTRL_D => None,
            Ok(_) => {
                let key = char::from(key[0]);
                let shown = if key.is_ascii_graphic() { key } else { ' ' };
                let _ = writeln!(output, "{shown}");
                Some(key.to_string())
            }
        }
    }
}

/// Asks about `request` on `output` and reads answers from `input` until
/// one is valid: `y`/`yes` (once), `a`/`always`, `n`/`no` (reject once),
/// `N`/`never` (reject always). End of input or a read error is
/// [`ApprovalDecision::Cancelled`]; an empty or unknown answer asks again.
pub fn ask(
    request: &ApprovalRequest,
    input: &mut impl Answers,
    output: &mut impl Write,
) -> ApprovalDecision {
    let tool = printable(&request.tool);
    // Output errors are ignored: the answer still decides, and a closed
    // stderr must not turn into a silent "yes".
    match &request.subagent {
        Some(agent) => {
            let _ = writeln!(
                output,
                "? [subagent {}] {}",
                printable(&agent.description),
                printable(&request.summary)
            );
        }
        None => {
            let _ = writeln!(output, "? {}", printable(&request.summary));
        }
    }
    for line in details(request) {
        let _ = writeln!(output, "{line}");
    }
    loop {
        let _ = write!(
            output,
            "  allow? [y] once  [a] always ({tool})  [n] no  [N] never ({tool}) › "
        );
        let _ = output.flush();
        let Some(answer) = input.next_answer(output) else {
            let _ = writeln!(output);
            return ApprovalDecision::Cancelled;
        };
        match parse_answer(&answer) {
            Some(decision) => return decision,
            None => {
                let _ = writeln!(
                    output,
                    "  please answer y, a, n or N (Ctrl-D cancels the turn)"
                );
            }
        }
    }
}

/// One answer line; `n` and `N` differ, other letters ignore case.
pub fn parse_answer(line: &str) -> Option<ApprovalDecision> {
    let answer = line.trim();
    if answer == "N" {
        return Some(ApprovalDecision::RejectAlways);
    }
    match answer.to_ascii_lowercase().as_str() {
        "y" | "yes" => Some(ApprovalDecision::AllowOnce),
        "a" | "always" => Some(ApprovalDecision::AllowAlways),
        "n" | "no" => Some(ApprovalDecision::RejectOnce),
        "never" => Some(ApprovalDecision::RejectAlways),
        _ => None,
    }
}

/// The model wrote these arguments: control characters (newlines, escape
/// sequences that could repaint the terminal) and bidirectional overrides
/// are shown escaped.
fn printable(text: &str) -> String {
    safe::line(text).into_owned()
}

/// Lines of a change shown before the rest is counted.
const SHOWN_LINES: usize = 12;

/// What the call will do, below the question: empty when the summary
/// says it all (a one-line command) or the arguments do not parse (the
/// tool will refuse them anyway).
fn details(request: &ApprovalRequest) -> Vec<String> {
    let arguments = &request.arguments;
    match request.tool.as_str() {
        pod_tools::EDIT_FILE => match serde_json::from_str::<EditFileArgs>(arguments) {
            Ok(edit) => {
                let mut lines = block("  - ", &edit.old_string);
                lines.extend(block("  + ", &edit.new_string));
                if edit.replace_all {
                    lines.push("  (every occurrence)".into());
                }
                lines
            }
            Err(_) => Vec::new(),
        },
        pod_tools::WRITE_FILE => match serde_json::from_str::<WriteFileArgs>(arguments) {
            Ok(write) => {
                let count = write.content.lines().count();
                let mut lines = vec![format!(
                    "  ({}, {} bytes)",
                    crate::render::plural(count, "line"),
                    write.content.len()
                )];
                lines.extend(block("  │ ", &write.content));
                lines
            }
            Err(_) => Vec::new(),
        },
        pod_tools::BASH => match serde_json::from_str::<BashArgs>(arguments) {
            // A command longer than the summary's line is shown whole.
            Ok(bash) if bash.command.contains('\n') || bash.command.chars().count() > 150 => {
                block("  $ ", &bash.command)
            }
            _ => Vec::new(),
        },
        _ => Vec::new(),
    }
}

/// At most `max` characters of `text`, ending in `…` when cut. Unlike
/// `render::shorten`, escapes stay as they were made visible: the user sees
/// what the command holds.
fn cut(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        Some((at, _)) => format!("{}…", &text[..at]),
        None => text.to_string(),
    }
}

/// `text`'s first [`SHOWN_LINES`] lines after `lead`, and a count of the
/// rest.
fn block(lead: &str, text: &str) -> Vec<String> {
    let all: Vec<&str> = text.lines().collect();
    let mut lines: Vec<String> = all
        .iter()
        .take(SHOWN_LINES)
        .map(|line| format!("{lead}{}", cut(&printable(line), 200)))
        .collect();
    if all.len() > SHOWN_LINES {
        lines.push(format!(
            "{lead}… and {}",
            crate::render::plural(all.len() - SHOWN_LINES, "more line")
        ));
    }
    lines
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(tool: &str, arguments: &str) -> ApprovalRequest {
        ApprovalRequest::new("call_1", tool, arguments)
    }

    /// The decision and everything written, for scripted `answers`.
    fn run(answers: &str) -> (ApprovalDecision, String) {
        let mut output = Vec::new();
        let decision = ask(
            &request("bash", r#"{"command":"cargo test"}"#),
            &mut Lines(answers.as_bytes()),
            &mut output,
        );
        (decision, String::from_utf8(output).unwrap())
    }

    /// The same with single keys, as on a terminal.
    fn keys(keys: &[u8]) -> (ApprovalDecision, String) {
        let mut output = Vec::new();
        let decision = ask(
            &request("bash", r#"{"command":"cargo test"}"#),
            &mut Keys(keys),
            &mut output,
        );
        (decision, String::from_utf8(output).unwrap())
    }

    #[test]
    fn each_answer_maps_to_its_decision() {
        for (answer, decision) in [
            ("y\n", ApprovalDecision::AllowOnce),
            ("yes\n", ApprovalDecision::AllowOnce),
            ("Y\n", ApprovalDecision::AllowOnce),
            ("a\n", ApprovalDecision::AllowAlways),
            ("always\n", ApprovalDecision::AllowAlways),
            ("n\n", ApprovalDecision::RejectOnce),
            ("no\n", ApprovalDecision::RejectOnce),
            ("N\n", ApprovalDecision::RejectAlways),
            ("never\n", ApprovalDecision::RejectAlways),
            ("  y  \n", ApprovalDecision::AllowOnce),
        ] {
            assert_eq!(run(answer).0, decision, "answer {answer:?}");
        }
    }

    #[test]
    fn one_key_answers_on_a_terminal() {
        assert_eq!(keys(b"y").0, ApprovalDecision::AllowOnce);
        assert_eq!(keys(b"a").0, ApprovalDecision::AllowAlways);
        assert_eq!(keys(b"n").0, ApprovalDecision::RejectOnce);
        assert_eq!(keys(b"N").0, ApprovalDecision::RejectAlways);
        // Enter or another key asks again; the key pressed is echoed.
        let (decision, shown) = keys(b"\rxy");
        assert_eq!(decision, ApprovalDecision::AllowOnce);
        assert_eq!(shown.matches("please answer").count(), 2, "{shown}");
        assert!(shown.ends_with("› y\n"), "{shown:?}");
        // Ctrl-D or the end of input cancels.
        assert_eq!(keys(&[CTRL_D]).0, ApprovalDecision::Cancelled);
        assert_eq!(keys(b"").0, ApprovalDecision::Cancelled);
    }

    #[test]
    fn the_prompt_names_the_tool_and_its_command_once() {
        let (_, shown) = run("y\n");
        assert!(shown.starts_with("? bash: cargo test\n"), "{shown}");
        assert!(shown.contains("[a] always (bash)"), "{shown}");
    }

    #[test]
    fn unknown_or_empty_answers_ask_again() {
        let (decision, shown) = run("\nmaybe\nn\n");
        assert_eq!(decision, ApprovalDecision::RejectOnce);
        assert_eq!(shown.matches("please answer y, a, n or N").count(), 2);
        assert_eq!(shown.matches("allow?").count(), 3);
    }

    #[test]
    fn end_of_input_cancels() {
        assert_eq!(run("").0, ApprovalDecision::Cancelled);
        assert_eq!(run("what\n").0, ApprovalDecision::Cancelled);
        // A last line without a newline still counts.
        assert_eq!(run("a").0, ApprovalDecision::AllowAlways);
    }

    #[test]
    fn control_characters_in_arguments_are_escaped() {
        let mut output = Vec::new();
        let arguments = r#"{"command":"echo hi\u001b[2J\nrm -rf build"}"#;
        ask(
            &request("bash", arguments),
            &mut Lines("n\n".as_bytes()),
            &mut output,
        );
        let shown = String::from_utf8(output).unwrap();
        assert!(!shown.contains('\u{1b}'), "{shown:?}");
        assert!(
            shown.contains(r"echo hi\u{1b}[2J ⏎ rm -rf build"),
            "{shown}"
        );
    }

    #[test]
    fn the_question_shows_what_the_call_will_do() {
        let ask_about = |tool: &str, arguments: serde_json::Value| {
            let mut output = Vec::new();
            ask(
                &request(tool, &arguments.to_string()),
                &mut Lines("n\n".as_bytes()),
                &mut output,
            );
            String::from_utf8(output).unwrap()
        };
        let edit = ask_about(
            "edit_file",
            serde_json::json!({"path": "e.txt", "old_string": "old one\nold two", "new_string": "new"}),
        );
        assert!(
            edit.starts_with("? edit_file: e.txt\n  - old one\n  - old two\n  + new\n"),
            "{edit}"
        );
        let content: String = (1..=20).map(|n| format!("line {n}\n")).collect();
        let write = ask_about(
            "write_file",
            serde_json::json!({"path": "a.txt", "content": content}),
        );
        assert!(write.contains("(20 lines, 151 bytes)"), "{write}");
        assert!(
            write.contains("  │ line 12\n  │ … and 8 more lines\n"),
            "{write}"
        );
        assert!(!write.contains("line 13"), "{write}");
        let bash = ask_about(
            "bash",
            serde_json::json!({"command": "cd build &&\nrm -rf \u{1b}[2J out"}),
        );
        assert!(
            bash.contains("  $ cd build &&\n  $ rm -rf \\u{1b}[2J out\n"),
            "{bash}"
        );
        assert!(!bash.contains('\u{1b}'), "{bash}");
    }

    #[test]
    fn a_path_is_shown_for_file_tools() {
        let mut output = Vec::new();
        let arguments = r#"{"path":"src/main.rs","old_string":"a","new_string":"b"}"#;
        ask(
            &request("edit_file", arguments),
            &mut Lines("y\n".as_bytes()),
            &mut output,
        );
        let shown = String::from_utf8(output).unwrap();
        assert!(shown.starts_with("? edit_file: src/main.rs\n"), "{shown}");
    }
}
