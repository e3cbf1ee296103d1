//! The network thread: every client socket, off the Python loop.
//!
//! One thread waits on epoll (mio) for all connections. It reads, splits frames, answers what the
//! core owns (ApiVersions, the Produce v0-2 refusal) and writes responses, without the GIL. It
//! also decodes the short paths' requests (short_paths/mod.rs) and answers those it can from their
//! views (steady-state Heartbeats and ConsumerGroupHeartbeats, from the `HeartbeatView` and the
//! `ConsumerHeartbeatView`). Every other request is queued for
//! Python: `drain()` (called by trio when `notify_fd` is readable) makes them `Request`s (a dict
//! decoded, or the short path's named type), handlers answer with `respond(connection, frame)`,
//! and the thread writes the frame.
//!
//! Like Kafka, a connection has at most one request with Python at a time: the next frame of
//! that connection is looked at only once the previous one is answered, so responses leave in
//! request order. Frames the core answers in between keep that order too, since they are only
//! handled when nothing is with Python. Reading stops while a connection already has a whole
//! frame and READ_AHEAD bytes waiting, or OUT_LIMIT bytes of answers its client does not read:
//! a client cannot make the broker buffer without bound.
//!
//! Limits (passed by server.py, see Reactor::new): connections over max.connections or
//! max.connections.per.ip are accepted and closed at once; out of descriptors, accept() gives up a
//! spare one (/dev/null) to do the same; both are counted and reported to Python at most every
//! REPORT_INTERVAL. A sweep at most every second (the poll timeout) closes idle connections and
//! those stuck in the middle of a request. The queued-bytes pool (../limits.rs) stops reading, with
//! the bytes left in the kernel, while the requests received and not yet answered hold too much.
//! The clock is read once per loop turn.
//!
//! Metrics: every request is counted and timed here (../request_stats.rs), from the turn its frame
//! is taken to when its answer is queued; open connections and the pool's bytes are published
//! once per turn. Python reads them when /metrics is scraped.
//!
//! Wake-ups cost a syscall each, so both directions only signal an idle side: the thread writes
//! the eventfd when it queues for a Python that has drained everything, and Python wakes the
//! thread only when its answer queue was empty.

//!
//! The files: python_api.rs is the `Reactor` pyclass Python calls; queues.rs the two queues
//! between the threads; accept.rs the listeners and the connection limits; socket_io.rs reading,
//! serving and writing a connection; sweeps.rs the timed closes (idle, stalled, delayed);
//! reports.rs the rate-limited reports. This file is the loop that drives them.

use std::collections::{HashMap, VecDeque};
use std::io;
use std::net::IpAddr;
use std::os::fd::OwnedFd;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use mio::{Events, Poll, Token};
use pyo3::prelude::*;

use crate::codec::requests::ApiTable;
use crate::network::client_socket::{ClientSocket, Listener};
use crate::network::limits::{Pool, Reports};
use crate::short_paths::Views;

mod accept;
mod python_api;
mod queues;
mod reports;
mod socket_io;
mod sweeps;

pub(crate) use python_api::Reactor;

use accept::PerIp;
use queues::{Inbound, Shared};
use reports::Report;
use sweeps::DelayedCloses;

const WAKER: Token = Token(0);
/// Listener tokens are 1..=listeners; connection ids start above.
const FIRST_CONNECTION: u64 = 1 << 16;
/// accept() out of file descriptors or memory: retry after this instead of spinning.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(100);

struct Limits {
    max_connections: usize,
    idle: Option<Duration>,
    partial: Option<Duration>,
    sweep_every: Duration,
}

/// Why a connection ends: its peer closed it (silently) or it is refused (logged by Python).
enum End {
    Closed,
    Refused(Refusal, String),
}

/// What a refused connection did wrong: Python's log summarises refusals per kind and address,
/// since a client can repeat any of them without bound.
#[derive(Clone, Copy)]
enum Refusal {
    /// A frame or request that does not parse, an unknown API or version.
    Malformed,
    /// A request before SASL authentication, or after the SASL session expired.
    Unauthenticated,
    /// A request that did not arrive whole within corral.socket.partial.request.timeout.ms.
    Slow,
}

impl Refusal {
    fn kind(self) -> &'static str {
        match self {
            Refusal::Malformed => "malformed request",
            Refusal::Unauthenticated => "unauthenticated request",
            Refusal::Slow => "slow request",
        }
    }
}

struct Network {
    poll: Poll,
    listeners: Vec<Listener>,
    accept_paused: bool,
    /// An open /dev/null, given up to accept (and close at once) a connection when out of fds.
    spare: Option<OwnedFd>,
    limits: Limits,
    /// Connections per peer address, against max.connections.per.ip.
    per_ip: PerIp,
    pool: Pool,
    /// Connections waiting for room in each lane of the pool, in order.
    waiting: [VecDeque<u64>; 2],
    /// Something went back to the pool this turn: waiting connections may read.
    pool_freed: bool,
    reports: Reports<Report>,
    /// The last TLS failure of each address counted in `reports` (named in the report).
    tls_failures: HashMap<IpAddr, String>,
    /// The clock, read once per loop turn.
    now: Instant,
    next_sweep: Instant,
    connections: HashMap<u64, ClientSocket>,
    next_id: u64,
    table: Py<ApiTable>,
    /// What the short paths are answered from.
    views: Views,
    /// Short paths answer only groups authorized on the connection
    /// (`ClientSocket::authorized_groups`).
    authorize_short_paths: bool,
    /// Bound on a SASL connection's requests until it is authenticated.
    sasl_max_receive_bytes: usize,
    /// Connections whose authentication failed, closed a while after their answer is written.
    delayed_closes: DelayedCloses,
    max_request_bytes: usize,
    shared: Arc<Shared>,
    /// Requests gathered during one loop turn, handed over together.
    for_python: Vec<Inbound>,
    read_buffer: Box<[u8]>,
}

impl Network {
    /// Serves until stopped (None) or until it cannot go on (the reason).
    fn run(mut self) -> Option<String> {
        let mut events = Events::with_capacity(1024);
        while !self.shared.stop.load(Ordering::SeqCst) {
            let mut timeout = self.next_sweep.saturating_duration_since(self.now);
            if self.accept_paused {
                timeout = timeout.min(ACCEPT_BACKOFF);
            }
            if let Some(at) = self.delayed_closes.next_due() {
                timeout = timeout.min(at.saturating_duration_since(self.now));
            }
            if let Err(e) = self.poll.poll(&mut events, Some(timeout)) {
                if e.kind() == io::ErrorKind::Interrupted {
                    continue;
                }
                return Some(format!("poll failed: {e}"));
            }
            self.now = Instant::now();
            if self.accept_paused {
                self.accept_paused = false;
                self.accept_all();
            }
            for event in events.iter() {
                match event.token() {
                    WAKER => {}
                    Token(t) if (t as u64) < FIRST_CONNECTION => self.accept_all(),
                    Token(t) => {
                        let id = t as u64;
                        if event.is_writable() {
                            self.flush(id);
                        }
                        if event.is_readable() || event.is_read_closed() || event.is_error() {
                            // A connection waiting for the pool is not read, so it would not see
                            // its peer go.
                            let gone = event.is_error() || event.is_read_closed();
                            if gone && self.connections.get(&id).is_some_and(|c| c.pool_waiting) {
                                self.end(id, End::Closed);
                                continue;
                            }
                            self.read(id);
                        }
                        self.serve(id);
                    }
                }
            }
            if let Some(failure) = self.take_answers() {
                return Some(failure);
            }
            self.resume_waiting();
            while let Some(id) = self.delayed_closes.pop_due(self.now) {
                self.end(id, End::Closed);
            }
            if self.now >= self.next_sweep {
                self.next_sweep = self.now + self.limits.sweep_every;
                self.sweep();
            }
            self.report();
            self.hand_over();
            self.shared
                .open_connections
                .store(self.connections.len() as u64, Ordering::Relaxed);
            self.shared
                .queued_request_bytes
                .store(self.pool.used() as u64, Ordering::Relaxed);
        }
        None
    }
}
