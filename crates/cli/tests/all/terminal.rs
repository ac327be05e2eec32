//! The approval prompt on a real terminal (a pseudo-terminal): one key
//! answers, and Ctrl-D leaves the question unanswered, which cancels the
//! turn and exits 130 with the way back on screen.

use crate::support::*;
use serde_json::json;
use std::fs::File;
use std::io::{Read, Write};
use std::os::fd::FromRawFd;
use std::process::{Child, Stdio};
use std::sync::mpsc;
use std::time::Duration;

/// A child process whose stdin, stdout and stderr are a pseudo-terminal.
struct OnTerminal {
    child: Child,
    master: File,
    screen: mpsc::Receiver<Vec<u8>>,
    seen: String,
}

impl OnTerminal {
    fn spawn(mut command: std::process::Command) -> Self {
        let (mut master, mut slave) = (0, 0);
        // SAFETY: openpty fills two fds this function then owns.
        let opened = unsafe {
            libc::openpty(
                &mut master,
                &mut slave,
                std::ptr::null_mut(),
                std::ptr::null(),
                std::ptr::null(),
            )
        };
        assert_eq!(opened, 0, "openpty failed");
        // SAFETY: both fds are open and owned here.
        let (master, slave) = unsafe { (File::from_raw_fd(master), File::from_raw_fd(slave)) };
        let child = command
            .stdin(Stdio::from(slave.try_clone().unwrap()))
            .stdout(Stdio::from(slave.try_clone().unwrap()))
            .stderr(Stdio::from(slave))
            .spawn()
            .unwrap();
        let (tx, screen) = mpsc::channel();
        let mut reader = master.try_clone().unwrap();
        std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            // Ends with EIO once the child has closed the terminal.
            while let Ok(n @ 1..) = reader.read(&mut buf) {
                if tx.send(buf[..n].to_vec()).is_err() {
                    break;
                }
            }
        });
        Self {
            child,
            master,
            screen,
            seen: String::new(),
        }
    }

    /// Reads the screen until `text` shows (a minute at most).
    fn wait_for(&mut self, text: &str) {
        while !self.seen.contains(text) {
            match self.screen.recv_timeout(Duration::from_secs(60)) {
                Ok(bytes) => self.seen.push_str(&String::from_utf8_lossy(&bytes)),
                Err(_) => panic!("{text:?} never showed; the screen:\n{}", self.seen),
            }
        }
    }

    fn press(&mut self, keys: &[u8]) {
        self.master.write_all(keys).unwrap();
        self.master.flush().unwrap();
    }

    /// Waits for the exit; returns its code and everything shown.
    fn finish(mut self) -> (Option<i32>, String) {
        let status = self.child.wait().unwrap();
        // The rest of the output, until the reader sees the terminal close.
        drop(self.master);
        while let Ok(bytes) = self.screen.recv_timeout(Duration::from_secs(10)) {
            self.seen.push_str(&String::from_utf8_lossy(&bytes));
        }
        (status.code(), self.seen)
    }
}

fn write_hello(env: &TestEnv) -> std::path::PathBuf {
    env.script(
        "s.json",
        &script(vec![
            call(
                "write_file",
                json!({"path": "hello.txt", "content": "hi\n"}),
            ),
            say("Written."),
        ]),
    )
}

#[test]
fn one_key_answers_the_approval_prompt() {
    let env = TestEnv::new();
    let script = write_hello(&env);
    let mut command = env.pod_process();
    command.args(["run", "--script"]).arg(&script).arg("Say hi");
    let mut term = OnTerminal::spawn(command);
    term.wait_for("? write_file: hello.txt");
    term.wait_for("allow?");
    // No Enter: the key alone answers.
    term.press(b"y");
    let (code, screen) = term.finish();
    assert_eq!(code, Some(0), "{screen}");
    assert!(screen.contains("Written."), "{screen}");
    assert_eq!(
        std::fs::read_to_string(env.workspace().join("hello.txt")).unwrap(),
        "hi\n"
    );
}

#[test]
fn ctrl_d_at_the_prompt_cancels_and_exits_130_with_the_resume_line() {
    let env = TestEnv::new();
    let script = write_hello(&env);
    let mut command = env.pod_process();
    command.args(["run", "--script"]).arg(&script).arg("Say hi");
    let mut term = OnTerminal::spawn(command);
    term.wait_for("allow?");
    term.press(&[0x04]);
    let (code, screen) = term.finish();
    assert_eq!(code, Some(130), "{screen}");
    assert!(!env.workspace().join("hello.txt").exists());
    let sessions = env.sessions_json();
    let id = sessions[0]["id"].as_str().unwrap();
    assert!(
        screen.contains(&format!("continue with: pod resume {id}")),
        "{screen}"
    );
    assert_eq!(sessions[0]["status"], "interrupted");
}

/// Regression: a key typed before the question showed answered it (`a`
/// typed early granted "always"; the `y` of a shell command approved a
/// write).
#[test]
fn keys_typed_before_the_question_answer_nothing() {
    let env = TestEnv::new();
    let script = write_hello(&env);
    let mut command = env.pod_process();
    command.args(["run", "--script"]).arg(&script).arg("Say hi");
    let mut term = OnTerminal::spawn(command);
    // Typed at once, long before pod asks anything.
    term.press(b"ay");
    term.wait_for("? write_file: hello.txt");
    term.wait_for("  │ hi");
    term.wait_for("allow?");
    // The question still waits: a deliberate `n` answers it.
    term.press(b"n");
    let (code, screen) = term.finish();
    assert_eq!(code, Some(0), "{screen}");
    assert!(!env.workspace().join("hello.txt").exists(), "{screen}");
    assert!(screen.contains("› n"), "{screen}");
    let id = env.sessions_json()[0]["id"].as_str().unwrap().to_string();
    let history = env.show_json(&id)["history"].clone();
    let result = history
        .as_array()
        .unwrap()
        .iter()
        .find(|item| item["type"] == "tool_result")
        .unwrap()
        .clone();
    assert_eq!(result["is_error"], true, "{result}");
}

/// A plan of two items, worked with pauses, on a terminal with colours on
/// (the live status line's condition).
fn live_command(env: &TestEnv, script: &serde_json::Value) -> std::process::Command {
    let path = env.script("live.json", script);
    let mut command = env.pod_process();
    command
        .env_remove("NO_COLOR")
        .args(["run", "--script"])
        .arg(path)
        .arg("Work through the plan");
    command
}

fn two_items(first: &str, second: &str) -> serde_json::Value {
    json!({"todos": [
        {"id": "a", "content": "Read the code", "status": first},
        {"id": "b", "content": "Write the notes", "status": second},
    ]})
}

#[test]
fn the_status_line_says_what_the_agent_does_while_the_model_thinks() {
    let env = TestEnv::new();
    let script = json!({"steps": [
        {"tool_calls": [{"name": "todo_write", "arguments": two_items("in_progress", "pending")}]},
        // A slow answer: the status line keeps time while it thinks.
        {"delay_ms": 2600, "tool_calls": [{"name": "todo_write", "arguments": two_items("completed", "in_progress")}]},
        {"tool_calls": [{"name": "todo_write", "arguments": two_items("completed", "completed")}]},
        {"text": "Both done."}
    ]});
    let mut term = OnTerminal::spawn(live_command(&env, &script));
    term.wait_for("thinking 1s");
    term.wait_for("thinking 2s");
    let (code, screen) = term.finish();
    assert_eq!(code, Some(0), "{screen}");
    assert!(screen.contains("plan 0/2"), "{screen}");
    assert!(screen.contains("Ctrl-C to stop"), "{screen}");
    // The checklist lives at the bottom while the run works, and is
    // printed once, as it ended.
    assert_eq!(
        screen.matches("Todo list (").count(),
        1,
        "one printed checklist:\n{screen}"
    );
    assert!(screen.contains("Todo list (2 of 2 completed)"), "{screen}");
    // The end line has the tokens.
    let end = screen
        .lines()
        .find(|l| l.contains("model requests"))
        .unwrap();
    assert!(end.contains(" tokens"), "{end}");
}

#[test]
fn ctrl_c_while_a_call_streams_keeps_the_answer_cut_and_makes_no_call() {
    let env = TestEnv::new();
    let script = json!({"steps": [{
        "text": "Let me write the notes now.\n",
        "tool_calls": [{"name": "write_file", "arguments": {"path": "notes.md", "content": "n\n"}}],
        // Each event of the answer comes slowly: the call is still being
        // written when Ctrl-C arrives.
        "event_delay_ms": 1500
    }]});
    let mut term = OnTerminal::spawn(live_command(&env, &script));
    term.wait_for("writing a write_file call");
    let interrupted = std::process::Command::new("kill")
        .args(["-INT", &term.child.id().to_string()])
        .status()
        .unwrap();
    assert!(interrupted.success());
    let (code, screen) = term.finish();
    assert_eq!(code, Some(130), "{screen}");
    assert!(!env.workspace().join("notes.md").exists());
    let sessions = env.sessions_json();
    let session = &sessions[0];
    assert_eq!(session["status"], "interrupted", "{session}");
    let reason = session["reason"].as_str().unwrap();
    assert!(reason.contains("answer was cut short"), "{reason}");
    assert!(reason.contains("calls not made: write_file"), "{reason}");
    // The answer is kept as far as it came, and no call was made.
    let shown = env.show_json(session["id"].as_str().unwrap());
    let answers: Vec<&serde_json::Value> = shown["history"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|i| i["type"] == "assistant")
        .collect();
    assert_eq!(answers.len(), 1, "{shown}");
    assert_eq!(answers[0]["text"], "Let me write the notes now.\n");
    assert!(answers[0]["tool_calls"]
        .as_array()
        .is_none_or(|c| c.is_empty()));
    let human = env
        .pod()
        .args(["show", session["id"].as_str().unwrap()])
        .output()
        .unwrap();
    let human = String::from_utf8_lossy(&human.stdout);
    assert!(human.contains("run interrupted"), "{human}");
    assert!(human.contains("not made: write_file"), "{human}");
}

#[test]
fn a_task_read_from_a_terminal_says_how_to_end_it() {
    let env = TestEnv::new();
    let script = env.script("s.json", &script(vec![say("Hello.")]));
    let mut command = env.pod_process();
    command.args(["run", "--script"]).arg(&script).arg("-");
    let mut term = OnTerminal::spawn(command);
    term.wait_for("reading the task from stdin (end with Ctrl-D)");
    // Ctrl-D at the start of a line ends the input.
    term.press(b"Say hi\n\x04");
    let (code, screen) = term.finish();
    assert_eq!(code, Some(0), "{screen}");
    assert!(screen.contains("Hello."), "{screen}");
    let id = env.sessions_json()[0]["id"].as_str().unwrap().to_string();
    assert_eq!(env.show_json(&id)["history"][0]["text"], "Say hi\n");
}
