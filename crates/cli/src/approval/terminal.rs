//! The interactive approver: the Pod's question travels to the drive loop,
//! which owns the screen, and is asked on stderr from a thread reading stdin.
//!
//! Going through the drive loop keeps the output in order (the events sent
//! before the question are printed first, the live checklist is not redrawn
//! over the prompt) and lets Ctrl-C answer [`ApprovalDecision::Cancelled`].

use super::prompt;
use pod::{ApprovalDecision, ApprovalRequest, Approver};
use tokio::sync::{mpsc, oneshot};

/// One question from the Pod and where its answer goes.
pub struct Ask {
    /// The call to decide about.
    pub request: ApprovalRequest,
    /// The answer; dropping it answers `Cancelled`.
    pub reply: oneshot::Sender<ApprovalDecision>,
}

/// The drive loop's side: the questions to ask, or `None` when nobody can
/// answer (not a terminal, `--json`).
pub type Asks = Option<mpsc::Receiver<Ask>>;

/// The Pod's side: sends each question to the drive loop.
pub struct TerminalApprover {
    asks: mpsc::Sender<Ask>,
}

/// A connected approver and the drive loop's receiver of its questions.
pub fn channel() -> (TerminalApprover, mpsc::Receiver<Ask>) {
    // The Pod waits for each answer before it asks again: one slot is enough.
    let (asks, receiver) = mpsc::channel(1);
    (TerminalApprover { asks }, receiver)
}

#[async_trait::async_trait]
impl Approver for TerminalApprover {
    // The drive loop answers `Cancelled` itself when the run is cancelled
    // (Ctrl-C), so the run's token is not needed here.
    async fn decide(
        &self,
        request: ApprovalRequest,
        _cancel: pod::CancellationToken,
    ) -> ApprovalDecision {
        let (reply, answer) = oneshot::channel();
        if self.asks.send(Ask { request, reply }).await.is_err() {
            // Nobody is driving any more: nobody can say yes.
            return ApprovalDecision::Cancelled;
        }
        answer.await.unwrap_or(ApprovalDecision::Cancelled)
    }

    fn answerer(&self) -> pod::questions::Answerer {
        pod::questions::Answerer {
            via: "terminal".into(),
            by: std::env::var("USER").ok().filter(|u| !u.is_empty()),
            from: None,
        }
    }
}

/// Asks `request` on the real stderr, reading stdin, on a thread of its own.
///
/// A plain thread, not `spawn_blocking`: after Ctrl-C the read stays
/// blocked, and a detached thread does not keep the process (or the tokio
/// runtime's shutdown) waiting for it.
pub fn prompt_on_terminal(request: ApprovalRequest) -> oneshot::Receiver<ApprovalDecision> {
    let (reply, answer) = oneshot::channel();
    let spawned = std::thread::Builder::new()
        .name("pod-approval-prompt".into())
        .spawn(move || {
            let mut stderr = std::io::stderr().lock();
            let decision = match RawMode::enter() {
                // One key answers; the guard restores the terminal after.
                Some(_raw) => {
                    prompt::ask(&request, &mut prompt::Keys(std::io::stdin()), &mut stderr)
                }
                None => prompt::ask(
                    &request,
                    &mut prompt::Lines(std::io::stdin().lock()),
                    &mut stderr,
                ),
            };
            let _ = reply.send(decision);
        });
    // Without a thread the reply is dropped, which reads as `Cancelled`.
    if let Err(err) = spawned {
        tracing::warn!(%err, "cannot start the approval prompt");
    }
    answer
}

/// Stdin in non-canonical mode without echo while it lives, so a key is
/// read as soon as it is pressed; the previous settings come back on drop.
/// Entering it discards whatever was typed and not yet read (`TCSAFLUSH`),
/// before the question is shown: a key pressed earlier (a `y` meant for a
/// shell, keys pressed while the agent worked) answers nothing, and a key
/// pressed once the question shows is kept.
/// Ctrl-C still raises SIGINT (`ISIG` stays on), which the drive loop
/// handles; the prompt thread may then stay blocked in its read, so the
/// drive loop calls [`restore_terminal`] before pod exits.
pub struct RawMode(());

// The settings to restore: one terminal, one prompt at a time, shared by
// the prompt thread and the drive loop that may end first.
static SAVED: std::sync::Mutex<Option<libc::termios>> = std::sync::Mutex::new(None);

impl RawMode {
    /// Enters the mode; `None` when stdin is not a terminal.
    pub fn enter() -> Option<Self> {
        // SAFETY: tcgetattr/tcsetattr on fd 0 with a termios this function
        // owns; a failure leaves the terminal as it was.
        unsafe {
            let mut saved: libc::termios = std::mem::zeroed();
            if libc::tcgetattr(libc::STDIN_FILENO, &mut saved) != 0 {
                return None;
            }
            let mut raw = saved;
            raw.c_lflag &= !(libc::ICANON | libc::ECHO);
            raw.c_cc[libc::VMIN] = 1;
            raw.c_cc[libc::VTIME] = 0;
            *SAVED.lock().unwrap_or_else(|e| e.into_inner()) = Some(saved);
            if libc::tcsetattr(libc::STDIN_FILENO, libc::TCSAFLUSH, &raw) != 0 {
                restore_terminal();
                return None;
            }
            Some(Self(()))
        }
    }
}

impl Drop for RawMode {
    fn drop(&mut self) {
        restore_terminal();
    }
}

/// Puts the terminal back as it was before a prompt, if one changed it.
pub fn restore_terminal() {
    let saved = SAVED.lock().unwrap_or_else(|e| e.into_inner()).take();
    if let Some(saved) = saved {
        // SAFETY: restores the settings read in `RawMode::enter`.
        unsafe {
            libc::tcsetattr(libc::STDIN_FILENO, libc::TCSANOW, &saved);
        }
    }
}
