//! The two queues between the network thread and Python, and what each side does with them.
//!
//! Wake-ups cost a syscall each, so both directions only signal an idle side (`Handoff`): the
//! network thread writes the eventfd when it queues for a Python that has drained everything,
//! and Python wakes the thread only when its answer queue was empty.

use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::atomic::{AtomicBool, AtomicU64};
use std::sync::{Arc, Mutex, MutexGuard};

use bytes::Bytes;
use mio::Waker;

use super::accept::Refusals;
use super::{End, Network, Refusal};
use crate::codec::requests::Received;
use crate::network::client_socket::RawSasl;
use crate::network::request_stats::RequestStats;

/// Queued for Python.
// Request, the big variant (a short path's decoded body), is nearly every item: boxing it would
// allocate once per request.
#[allow(clippy::large_enum_variant)]
pub(super) enum Inbound {
    Request {
        connection: u64,
        received: Received,
        peer: Arc<str>,
        client_host: Arc<str>,
        listener: Arc<str>,
        principal: Arc<str>,
    },
    /// A connection Python watches (`watch_close`) has closed.
    Closed(u64),
    /// A connection closed for bad input; Python logs the reason, summarised per kind.
    Refused {
        kind: Refusal,
        peer: Arc<str>,
        client_host: Arc<str>,
        reason: String,
    },
    /// A rate-limited report (refused connections, accept failures); Python logs it as is.
    Notice(String),
}

/// Queued for the network thread.
pub(super) enum Outbound {
    /// The answer to the connection's request (None: the request has no response, acks=0).
    Respond(u64, Option<Bytes>),
    /// The answer the commit path gave a commit it took (short_paths/commit_path.rs), with its error code.
    CoreAnswer(u64, Bytes, i16),
    Close(u64),
    /// Close once the answers queued (and the next one) are written: a failed authentication.
    CloseAfterAnswer(u64),
    /// The connection is now this principal; its session lasts this many ms (0: for ever).
    Authenticated(u64, String, u64),
    /// After a SaslHandshake v0: bare SASL tokens follow (see `ClientSocket::raw_sasl`).
    RawSaslTokens(u64),
    WatchClose(u64),
    /// The connection may heartbeat this group on the short paths (authorizer on).
    AuthorizeGroup(u64, String),
    /// The connection's principal may READ these topics (authorizer on; OffsetCommits).
    AuthorizeTopics(u64, Vec<String>),
    ForgetAuthorizations,
    /// Stop as if poll had failed (`inject_failure`).
    Fail(String),
}

/// Items one side queues for the other, and whether the other side was woken since it last
/// took them: only the first item after a take wakes it.
pub(super) struct Handoff<T> {
    items: Vec<T>,
    woken: bool,
}

impl<T> Handoff<T> {
    pub(super) fn new() -> Self {
        Handoff {
            items: Vec::new(),
            woken: false,
        }
    }

    /// Queues one item; true: wake the other side.
    pub(super) fn push(&mut self, item: T) -> bool {
        self.items.push(item);
        !std::mem::replace(&mut self.woken, true)
    }

    /// Queues all of `items` (left empty); true: wake the other side.
    pub(super) fn append(&mut self, items: &mut Vec<T>) -> bool {
        self.items.append(items);
        !std::mem::replace(&mut self.woken, true)
    }

    /// Everything queued; the next item queued wakes this side again.
    pub(super) fn take(&mut self) -> Vec<T> {
        self.woken = false;
        std::mem::take(&mut self.items)
    }
}

pub(super) struct Shared {
    pub(super) to_python: Mutex<Handoff<Inbound>>,
    pub(super) to_network: Mutex<Handoff<Outbound>>,
    pub(super) eventfd: OwnedFd,
    pub(super) waker: Waker,
    pub(super) stop: AtomicBool,
    /// Why the network thread stopped on its own (poll failed, or it panicked): the broker is
    /// deaf, so `drain()` raises it and the process exits.
    pub(super) failure: Mutex<Option<String>>,
    /// Written by the network thread only, read by `request_stats()` and `network_stats()`.
    pub(super) stats: RequestStats,
    pub(super) open_connections: AtomicU64,
    pub(super) queued_request_bytes: AtomicU64,
    /// Whether the short paths may answer (or take) requests at all: false while a fault is
    /// injected (corral/faults/), so that every request reaches Python. Read once per request.
    pub(super) short_paths: AtomicBool,
    /// Listening sockets refusing new connections for a while (a fault, corral/faults/).
    pub(super) refusals: Refusals,
}

pub(super) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl Shared {
    pub(super) fn signal_python(&self) {
        let one: u64 = 1;
        // SAFETY: writes 8 bytes from a valid u64 to our eventfd. A full counter (EAGAIN) still
        // leaves the fd readable, which is all the signal needs.
        unsafe {
            libc::write(
                self.eventfd.as_raw_fd(),
                &one as *const u64 as *const libc::c_void,
                8,
            )
        };
    }

    pub(super) fn send_to_network(&self, item: Outbound) {
        let wake = lock(&self.to_network).push(item);
        if wake {
            let _ = self.waker.wake();
        }
    }
}

impl Network {
    /// Applies Python's answers: each frees its connection for its next request. Returns a
    /// failure to stop with (fault injection).
    pub(super) fn take_answers(&mut self) -> Option<String> {
        let items = lock(&self.shared.to_network).take();
        for item in items {
            match item {
                Outbound::Respond(id, response) => self.answered(id, response, None),
                Outbound::CoreAnswer(id, frame, code) => self.answered(id, Some(frame), Some(code)),
                Outbound::Close(id) => self.end(id, End::Closed),
                Outbound::CloseAfterAnswer(id) => {
                    if let Some(conn) = self.connections.get_mut(&id) {
                        conn.closing = true;
                    }
                }
                Outbound::Authenticated(id, principal, lifetime_ms) => {
                    if let Some(conn) = self.connections.get_mut(&id) {
                        conn.authenticated(
                            principal,
                            lifetime_ms,
                            self.now,
                            self.max_request_bytes,
                        );
                    }
                }
                Outbound::RawSaslTokens(id) => {
                    if let Some(conn) = self.connections.get_mut(&id) {
                        conn.raw_sasl = RawSasl::AfterAnswer;
                    }
                }
                Outbound::WatchClose(id) => match self.connections.get_mut(&id) {
                    Some(conn) => conn.watched = true,
                    // It closed before Python asked: report the close now (ids are not reused).
                    None => self.for_python.push(Inbound::Closed(id)),
                },
                Outbound::AuthorizeGroup(id, group) => {
                    if let Some(conn) = self.connections.get_mut(&id) {
                        conn.authorize_group(group);
                    }
                }
                Outbound::AuthorizeTopics(id, topics) => {
                    if let Some(conn) = self.connections.get_mut(&id) {
                        conn.authorize_topics(topics);
                    }
                }
                Outbound::ForgetAuthorizations => {
                    for conn in self.connections.values_mut() {
                        conn.authorized_groups.clear();
                        conn.authorized_topics.clear();
                    }
                }
                Outbound::Fail(reason) => return Some(reason),
            }
        }
        None
    }

    /// Hands the requests gathered in this turn to Python in one batch.
    pub(super) fn hand_over(&mut self) {
        if self.for_python.is_empty() {
            return;
        }
        let signal = lock(&self.shared.to_python).append(&mut self.for_python);
        if signal {
            self.shared.signal_python();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_first_item_after_a_take_wakes() {
        let mut queue = Handoff::new();
        assert!(queue.push(1));
        assert!(!queue.push(2));
        assert!(!queue.append(&mut vec![3, 4]));
        assert_eq!(queue.take(), vec![1, 2, 3, 4]);
        assert!(queue.take().is_empty());
        assert!(queue.push(5));
        assert_eq!(queue.take(), vec![5]);
    }

    #[test]
    fn append_wakes_an_idle_side_and_empties_the_batch() {
        let mut queue = Handoff::new();
        let mut batch = vec!["a", "b"];
        assert!(queue.append(&mut batch));
        assert!(batch.is_empty());
        assert!(!queue.push("c"));
        assert_eq!(queue.take(), vec!["a", "b", "c"]);
        let mut batch = vec!["d"];
        assert!(queue.append(&mut batch));
    }
}
