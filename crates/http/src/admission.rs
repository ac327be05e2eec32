//! Which connections the server takes: a connection nobody has shown the
//! token on yet may hold only a small share of the slots, so strangers
//! cannot use up the operator's.
//!
//! HTTP says who a client is only with its first request, so every new
//! connection starts *anonymous*, in a pool of [`anonymous_share`] of the
//! slots. A request with the right token moves its connection into the
//! pool of the rest ([`Ticket::promote`]). When the anonymous pool is
//! full, a new connection takes the slot of the oldest anonymous one,
//! which is closed: no connection ever waits behind another for a slot,
//! so idle connections opened by someone without the token (and reopened
//! as fast as they are closed) can never keep the token holder's new
//! connection out, since it sends its request as soon as it is open while
//! theirs wait to be pushed out.

use pod::CancellationToken;
use std::collections::VecDeque;
use std::sync::{Arc, Weak};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// The slots of a server.
pub(crate) struct Admission {
    anonymous: Arc<Semaphore>,
    known: Arc<Semaphore>,
    // Anonymous connections, oldest first: the next to close when the
    // pool is full. Locked before a ticket's slot, never the other way.
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

    /// A slot for a new connection, as an anonymous one: a free one, else
    /// the slot of the oldest anonymous connection, which is told to
    /// close; `None` only when every slot of the pool is held by a
    /// connection that has shown the token.
    pub(crate) fn admit(self: &Arc<Self>) -> Option<Arc<Ticket>> {
        let permit = match Arc::clone(&self.anonymous).try_acquire_owned() {
            Ok(permit) => permit,
            Err(_) => self.take_oldest()?,
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

    /// Closes the oldest anonymous connection still open and hands its
    /// slot over.
    fn take_oldest(&self) -> Option<OwnedSemaphorePermit> {
        let mut queue = self.queue.lock();
        while let Some(oldest) = queue.pop_front() {
            let Some(ticket) = oldest.upgrade() else {
                continue;
            };
            let mut slot = ticket.slot.lock();
            match std::mem::replace(&mut *slot, Slot::Closed) {
                Slot::Anonymous(permit) => {
                    tracing::debug!("closing the oldest connection without the token");
                    ticket.close.cancel();
                    return Some(permit);
                }
                other => *slot = other,
            }
        }
        None
    }
}

/// Which pool a connection's slot is in.
enum Slot {
    /// No token shown yet: closed for a newcomer when the pool is full.
    Anonymous(#[allow(dead_code)] OwnedSemaphorePermit),
    /// The token was shown while the known pool was full: it keeps its
    /// anonymous slot, and is never closed for a stranger.
    Shown(#[allow(dead_code)] OwnedSemaphorePermit),
    Known(#[allow(dead_code)] OwnedSemaphorePermit),
    /// Pushed out: its slot went to a newer connection.
    Closed,
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

    /// The connection showed the token: its slot moves to the known pool
    /// when that has one free, else it stays where it is and can no
    /// longer be pushed out.
    pub(crate) fn promote(&self) {
        let Some(admission) = self.admission.upgrade() else {
            return;
        };
        let mut slot = self.slot.lock();
        let held = match std::mem::replace(&mut *slot, Slot::Closed) {
            Slot::Anonymous(permit) | Slot::Shown(permit) => permit,
            other => {
                *slot = other;
                return;
            }
        };
        *slot = match Arc::clone(&admission.known).try_acquire_owned() {
            // The anonymous permit is dropped here, freeing its slot.
            Ok(permit) => Slot::Known(permit),
            Err(_) => Slot::Shown(held),
        };
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

    #[test]
    fn a_full_anonymous_pool_hands_its_oldest_slot_to_a_newcomer() {
        let admission = Admission::new(8);
        let first = admission.admit().unwrap();
        let second = admission.admit().unwrap();
        assert!(!first.closing().is_cancelled());
        // The pool (2 of 8) is full: the next takes the oldest's slot at
        // once, and the oldest is told to close.
        let third = admission.admit().unwrap();
        assert!(first.closing().is_cancelled());
        assert!(!second.closing().is_cancelled());
        // Many more at once never wait: each pushes out the oldest.
        let burst: Vec<_> = (0..20).map(|_| admission.admit().unwrap()).collect();
        assert!(second.closing().is_cancelled() && third.closing().is_cancelled());
        assert_eq!(
            burst.iter().filter(|t| !t.closing().is_cancelled()).count(),
            2
        );
        // Shown the token, a connection leaves the anonymous pool and is
        // never closed for a stranger.
        let holder = admission.admit().unwrap();
        holder.promote();
        let _more: Vec<_> = (0..5).map(|_| admission.admit().unwrap()).collect();
        assert!(!holder.closing().is_cancelled());
        assert!(matches!(*holder.slot.lock(), Slot::Known(_)));
    }

    #[test]
    fn a_token_holder_in_an_anonymous_slot_is_never_pushed_out() {
        // One known slot, one anonymous one.
        let admission = Admission::new(2);
        let known = admission.admit().unwrap();
        known.promote();
        let shown = admission.admit().unwrap();
        shown.promote();
        assert!(matches!(*shown.slot.lock(), Slot::Shown(_)));
        // Every slot is held by the token: a stranger is refused.
        assert!(admission.admit().is_none());
        assert!(!shown.closing().is_cancelled());
        drop(known);
        // A known slot came free: shown again, it moves there, and the
        // anonymous pool is open to strangers once more.
        shown.promote();
        assert!(matches!(*shown.slot.lock(), Slot::Known(_)));
        assert!(admission.admit().is_some());
    }
}
