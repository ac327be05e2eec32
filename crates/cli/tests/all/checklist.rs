//! The checklist people read, snapshot as `pod run` prints it off a
//! terminal (plain text, printed again on every change).

use crate::support::*;

#[test]
fn run_prints_the_checklist_on_every_change() {
    let env = TestEnv::new();
    let script = env.script(
        "s.json",
        &script(vec![
            {
                let mut step = write_todos(&plan(0));
                step["text"] = "Planning first.".into();
                step
            },
            write_todos(&plan(1)),
            write_todos(&plan(3)),
            say("All three done."),
        ]),
    );
    let out = env
        .pod()
        .args(["run", "--script"])
        .arg(&script)
        .arg("Do a, b and c")
        .output()
        .unwrap();
    assert_success(&out);
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert!(!stdout.contains('\x1b'), "no escape codes off a terminal");
    let id = stdout
        .split_whitespace()
        .nth(1)
        .expect("the session id comes first")
        .to_string();
    let stable = stdout
        .replace(&id, "<ID>")
        .replace(env.pod_home().to_str().unwrap(), "<POD_HOME>");
    // The token count depends on the prompt (paths, tool specs): its figure
    // is masked, the field stays.
    let stable = mask_tokens(&stable);
    insta::assert_snapshot!(stable);
}

#[test]
fn reasoning_gets_its_own_line_apart_from_the_answer() {
    let env = TestEnv::new();
    let mut step = say("The answer.");
    step["reasoning"] = "Think first.".into();
    let script = env.script("s.json", &script(vec![step]));
    let out = env
        .pod()
        .args(["run", "--script"])
        .arg(&script)
        .arg("Answer")
        .output()
        .unwrap();
    assert_success(&out);
    let stdout = String::from_utf8(out.stdout).unwrap();
    let lines: Vec<&str> = stdout.lines().collect();
    assert!(lines.contains(&"thinking: Think first."), "{stdout}");
    assert!(lines.contains(&"The answer."), "{stdout}");
}

/// `7.3k tokens` as `<N> tokens`.
fn mask_tokens(text: &str) -> String {
    let mut out = String::new();
    for (n, line) in text.split('\n').enumerate() {
        if n > 0 {
            out.push('\n');
        }
        match line.find(" tokens") {
            Some(end) => {
                let start = line[..end].rfind(' ').map_or(0, |at| at + 1);
                out.push_str(&line[..start]);
                out.push_str("<N>");
                out.push_str(&line[end..]);
            }
            None => out.push_str(line),
        }
    }
    out
}
