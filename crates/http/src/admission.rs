//! Which connections the server takes: a connection nobody has shown the
//! token on yet may hold only a small share of the slots, so strangers
//! cannot use up the operator's.
//!
//! HTTP says who a client is only with its first request, so every new
//! connection starts *anonymous*, in a pool of [`anonymous_share`] of the
//! slots. A request with the right token moves its connection into the
//! pool of the rest ([`Ticket::promote`]). When the anonymous pool is
//! full, a new connection closes the oldest anonymous one and takes its
//! place: idle connections opened by someone without the token (and
//! reopened as fast as they are closed) can then delay the token holder's
//! new connection by one close, never refuse it, since it sends its
//! request as soon as it is open while theirs wait to be pushed out.

use pod::CancellationToken;
use std::collections::VecDeque;
use std::sync::{Arc, Weak};
use std::time::Duration;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// How long a new connection waits for the anonymous connection it closed
/// to give its slot back before it is refused.
const EVICTION_WAIT: Duration = Duration::from_secs(2);

/// The slots of a server.
pub(crate) struct Admission {
    anonymous: Arc<Semaphore>,
    known: Arc<Semaphore>,
    // Anonymous connections, oldest first: the next to close when the
    // pool is full. Held for a push or a pop, never across an await.
    queue: parking_lot::Mutex<VecDeque<Weak<Ticket>>>,
}

/// How many of `max` slots connections without the token may hold: a
/// quarter, at least one, and always one fewer than all.
pub(crate) fn anonymous_share(max: usize) -> usize {
    (max / 4).max(1).min(max.saturating_sub(1)).max(1)
}

impl Admission {
    /// `max` slots in all.
    pub(crate) fn new(max: usize) -> Arc<Self> {
        let anonymous = anonymous_share(max);
        Arc::new(Self {
            anonymous: Arc::new(Semaphore::new(anonymous)),
            known: Arc::new(Semaphore::new(max.saturating_sub(anonymous).max(1))),
            queue: parking_lot::Mutex::new(VecDeque::new()),
        })
    }

    /// A slot for a new connection, as an anonymous one: at once when one
    /// is free, else after closing the oldest anonymous connection; `None`
    /// when no slot came back in time (every anonymous connection is busy
    /// with a request).
    pub(crate) async fn admit(self: &Arc<Self>) -> Option<Arc<Ticket>> {
        let permit = match Arc::clone(&self.anonymous).try_acquire_owned() {
            Ok(permit) => permit,
            Err(_) => {
                self.evict_oldest();
                tokio::time::timeout(EVICTION_WAIT, Arc::clone(&self.anonymous).acquire_owned())
                    .await
                    .ok()?
                    .ok()?
            }
        };
        let ticket = Arc::new(Ticket {
            admission: Arc::downgrade(self),
            close: CancellationToken::new(),
            slot: parking_lot::Mutex::new(Slot::Anonymous(permit)),
        });
        let mut queue = self.queue.lock();
        queue.retain(|t| t.strong_count() > 0);
        queue.push_back(Arc::downgrade(&ticket));
        Some(ticket)
    }

    /// Asks the oldest anonymous connection still open to close.
    fn evict_oldest(&self) {
        let mut queue = self.queue.lock();
        while let Some(oldest) = queue.pop_front() {
            if let Some(ticket) = oldest.upgrade() {
                if ticket.is_anonymous() {
                    tracing::debug!("closing the oldest connection without the token");
                    ticket.close.cancel();
                    return;
                }
            }
        }
    }
}

/// Which pool a connection's slot is in.
enum Slot {
    Anonymous(#[allow(dead_code)] OwnedSemaphorePermit),
    Known(#[allow(dead_code)] OwnedSemaphorePermit),
}

/// A connection's place in the server: dropped with the connection, which
/// gives its slot back.
pub(crate) struct Ticket {
    admission: Weak<Admission>,
    close: CancellationToken,
    // Held for a swap of permits, never across an await.
    slot: parking_lot::Mutex<Slot>,
}

impl Ticket {
    /// Fires when the connection should close (pushed out by a newer one).
    pub(crate) fn closing(&self) -> &CancellationToken {
        &self.close
    }

    fn is_anonymous(&self) -> bool {
        matches!(*self.slot.lock(), Slot::Anonymous(_))
    }

    /// The connection showed the token: its slot moves to the known pool
    /// when that has one free (else it stays anonymous, and is served).
    pub(crate) fn promote(&self) {
        let Some(admission) = self.admission.upgrade() else {
            return;
        };
        let mut slot = self.slot.lock();
        if matches!(*slot, Slot::Known(_)) {
            return;
        }
        if let Ok(permit) = Arc::clone(&admission.known).try_acquire_owned() {
            // The anonymous permit is dropped here, freeing its slot.
            *slot = Slot::Known(permit);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strangers_get_a_quarter_and_never_every_slot() {
        assert_eq!(anonymous_share(128), 32);
        assert_eq!(anonymous_share(4), 1);
        assert_eq!(anonymous_share(2), 1);
        assert_eq!(anonymous_share(1), 1);
    }

    #[tokio::test(start_paused = true)]
    async fn a_full_anonymous_pool_closes_its_oldest_for_a_newcomer() {
        let admission = Admission::new(8);
        let first = admission.admit().await.unwrap();
        let second = admission.admit().await.unwrap();
        assert!(!first.closing().is_cancelled());
        // The pool (2 of 8) is full: the next closes the oldest, which
        // gives its slot back as its connection drops it.
        let newcomer = {
            let admission = Arc::clone(&admission);
            tokio::spawn(async move { admission.admit().await })
        };
        tokio::task::yield_now().await;
        assert!(first.closing().is_cancelled());
        assert!(!second.closing().is_cancelled());
        drop(first);
        let newcomer = newcomer.await.unwrap().unwrap();
        // Shown the token, a connection leaves the anonymous pool and is
        // never closed for a stranger.
        newcomer.promote();
        let third = admission.admit().await.unwrap();
        assert!(!newcomer.closing().is_cancelled());
        drop(third);
        // A pool whose anonymous connections never give their slot back
        // refuses after the wait.
        let _held = admission.admit().await.unwrap();
        assert!(admission.admit().await.is_none());
    }
}
