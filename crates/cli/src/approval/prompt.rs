//! The approval question and its answers, on any reader and writer so it
//! can be tested with scripted answers. [`super::terminal`] runs it on the
//! real stdin and stderr.

use pod::{ApprovalDecision, ApprovalRequest};
use std::io::{BufRead, Write};

/// Asks about `request` on `output` and reads answers from `input` until
/// one is valid: `y`/`yes` (once), `a`/`always`, `n`/`no` (reject once),
/// `N`/`never` (reject always). End of input or a read error is
/// [`ApprovalDecision::Cancelled`]; an empty or unknown answer asks again.
pub fn ask(
    request: &ApprovalRequest,
    input: &mut impl BufRead,
    output: &mut impl Write,
) -> ApprovalDecision {
    let tool = printable(&request.tool);
    // Output errors are ignored: the answer still decides, and a closed
    // stderr must not turn into a silent "yes".
    let _ = writeln!(
        output,
        "? {} wants to run: {}",
        tool,
        printable(&request.summary)
    );
    loop {
        let _ = write!(
            output,
            "  allow? [y] once  [a] always ({tool})  [n] no  [N] never ({tool}) › "
        );
        let _ = output.flush();
        let mut line = String::new();
        match input.read_line(&mut line) {
            Ok(0) | Err(_) => {
                let _ = writeln!(output);
                return ApprovalDecision::Cancelled;
            }
            Ok(_) => {}
        }
        match parse_answer(&line) {
            Some(decision) => return decision,
            None => {
                let _ = writeln!(output, "  please answer y, a, n or N");
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
/// sequences that could repaint the terminal) are shown escaped.
fn printable(text: &str) -> String {
    text.chars()
        .map(|c| match c {
            '\n' => " ⏎ ".to_string(),
            c if c.is_control() => c.escape_default().to_string(),
            c => c.to_string(),
        })
        .collect()
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
            &mut answers.as_bytes(),
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
    fn the_prompt_names_the_tool_and_its_command() {
        let (_, shown) = run("y\n");
        assert!(
            shown.starts_with("? bash wants to run: bash: cargo test\n"),
            "{shown}"
        );
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
            &mut "n\n".as_bytes(),
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
    fn a_path_is_shown_for_file_tools() {
        let mut output = Vec::new();
        let arguments = r#"{"path":"src/main.rs","old_string":"a","new_string":"b"}"#;
        ask(
            &request("edit_file", arguments),
            &mut "y\n".as_bytes(),
            &mut output,
        );
        let shown = String::from_utf8(output).unwrap();
        assert!(
            shown.starts_with("? edit_file wants to run: edit_file: src/main.rs\n"),
            "{shown}"
        );
    }
}
