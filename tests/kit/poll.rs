//! Waiting on another process: poll for a condition, with a guard that
//! fails the test after a while, saying what it saw last.

use std::time::{Duration, Instant};

/// Between two looks: often enough that a test does not wait long after
/// the condition holds, rarely enough not to load the machine.
const EVERY: Duration = Duration::from_millis(100);

/// Calls `look` until it returns `Ok`, and returns that; `Err` carries what
/// it saw, shown if `patience` runs out first (a hang guard, not a timing
/// assertion).
pub fn until<T>(what: &str, patience: Duration, mut look: impl FnMut() -> Result<T, String>) -> T {
    let deadline = Instant::now() + patience;
    loop {
        match look() {
            Ok(found) => return found,
            Err(seen) if Instant::now() >= deadline => {
                panic!("waited {patience:?} for {what}; last saw: {seen}")
            }
            Err(_) => std::thread::sleep(EVERY),
        }
    }
}
