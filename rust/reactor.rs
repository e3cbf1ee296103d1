//! The network thread: every client socket, off the Python loop.
//!
//! One thread waits on epoll (mio) for all connections. It reads, splits frames, answers what the
//! core owns (ApiVersions, the Produce v0-2 refusal) and writes responses, without the GIL. It
//! also decodes the short paths' requests (fast_paths.rs) and answers those it can from their
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
//! those stuck in the middle of a request. The queued-bytes pool (limits.rs) stops reading, with
//! the bytes left in the kernel, while the requests received and not yet answered hold too much.
//! The clock is read once per loop turn.
//!
//! Metrics: every request is counted and timed here (request_stats.rs), from the turn its frame
//! is taken to when its answer is queued; open connections and the pool's bytes are published
//! once per turn. Python reads them when /metrics is scraped.
//!
//! Wake-ups cost a syscall each, so both directions only signal an idle side: the thread writes
//! the eventfd when it queues for a Python that has drained everything, and Python wakes the
//! thread only when its answer queue was empty.

use std::collections::{HashMap, HashSet, VecDeque};
use std::io::{self, IoSlice, Read, Write};
use std::net::{IpAddr, SocketAddr};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use bytes::{Buf, Bytes};
use mio::net::{TcpListener, TcpStream};
use mio::{Events, Interest, Poll, Token, Waker};
use pyo3::exceptions::PyOSError;
use pyo3::prelude::*;
use pyo3::pybacked::PyBackedBytes;

use crate::commit_path::{CommitPath, Took};
use crate::conn::{Conn, Listener, RawSasl, OUT_LIMIT};
use crate::connection::{self, ApiTable, Received, Request, Routed};
use crate::consumer_heartbeat_view::ConsumerHeartbeatView;
use crate::fast_paths::Views;
use crate::frames::FrameSplitter;
use crate::heartbeat_view::HeartbeatView;
use crate::limits::{Allow, Budget, Lane, Pool, Reports};
use crate::request_stats::{RequestStats, Snapshot, BUCKETS_US};
use crate::tls::{Tls, TlsServerConfig};

const WAKER: Token = Token(0);
/// Listener tokens are 1..=listeners; connection ids start above.
const FIRST_CONNECTION: u64 = 1 << 16;
const READ_CHUNK: usize = 64 * 1024;
/// Responses below this are copied out of Python; larger ones (Fetch) are kept by reference.
const COPY_BELOW: usize = 16 * 1024;
/// accept() out of file descriptors or memory: retry after this instead of spinning.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(100);
/// Refused connections and accept failures are logged at most this often, with counts.
const REPORT_INTERVAL: Duration = Duration::from_secs(10);
/// Addresses named in one round of reports; further ones are counted together.
const MAX_REPORTED_ADDRESSES: usize = 32;
/// The sweep for idle connections and stalled partial requests runs at most this far apart.
const MAX_SWEEP: Duration = Duration::from_secs(1);
const API_VERSIONS: i16 = 18;

/// Queued for Python.
// Request, the big variant (a short path's decoded body), is nearly every item: boxing it would
// allocate once per request.
#[allow(clippy::large_enum_variant)]
enum Inbound {
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
enum Outbound {
    /// The answer to the connection's request (None: the request has no response, acks=0).
    Respond(u64, Option<Bytes>),
    /// The answer the commit path gave a commit it took (commit_path.rs), with its error code.
    CoreAnswer(u64, Bytes, i16),
    Close(u64),
    /// Close once the answers queued (and the next one) are written: a failed authentication.
    CloseAfterAnswer(u64),
    /// The connection is now this principal; its session lasts this many ms (0: for ever).
    Authenticated(u64, String, u64),
    /// After a SaslHandshake v0: bare SASL tokens follow (see `Conn::raw_sasl`).
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

struct ToPython {
    items: Vec<Inbound>,
    /// The eventfd has been written since Python last drained.
    signalled: bool,
}

struct ToNetwork {
    items: Vec<Outbound>,
    woken: bool,
}

struct Shared {
    to_python: Mutex<ToPython>,
    to_network: Mutex<ToNetwork>,
    eventfd: OwnedFd,
    waker: Waker,
    stop: AtomicBool,
    /// Why the network thread stopped on its own (poll failed, or it panicked): the broker is
    /// deaf, so `drain()` raises it and the process exits.
    failure: Mutex<Option<String>>,
    /// Written by the network thread only, read by `request_stats()` and `network_stats()`.
    stats: RequestStats,
    open_connections: AtomicU64,
    queued_request_bytes: AtomicU64,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl Shared {
    fn signal_python(&self) {
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

    fn send_to_network(&self, item: Outbound) {
        let wake = {
            let mut queue = lock(&self.to_network);
            queue.items.push(item);
            !std::mem::replace(&mut queue.woken, true)
        };
        if wake {
            let _ = self.waker.wake();
        }
    }
}

#[pyclass(frozen, module = "corral._core")]
pub struct Reactor {
    shared: Arc<Shared>,
    thread: Mutex<Option<JoinHandle<()>>>,
}

/// What `drain` hands Python: requests, problems to log, watched connections that closed.
type Drained = (Vec<Py<Request>>, Vec<Problem>, Vec<u64>);

#[pymethods]
impl Reactor {
    /// Starts the network thread on the listening sockets of `listeners`, each (descriptor, name,
    /// SASL or not, TLS configuration or None); the descriptors' ownership passes to the thread.
    /// On a SASL listener a connection may send only ApiVersions, SaslHandshake and
    /// SaslAuthenticate until `authenticated`. `heartbeat_view`: answer steady-state Heartbeats
    /// from it; `consumer_heartbeat_view`: steady-state ConsumerGroupHeartbeats;
    /// `authorize_short_paths`: answer those only for groups `authorize_group` allowed on the
    /// connection (an authorizer is on). Before authentication a SASL connection's requests may
    /// be `sasl_max_receive_bytes` at most (sasl.server.max.receive.size); a connection whose
    /// authentication failed closes `failed_authentication_delay_ms` after its answer is written
    /// (connection.failed.authentication.delay.ms).
    ///
    /// Limits (None: none): `max_connections` and `max_connections_per_ip` (over them a new
    /// connection is closed at once), `idle_timeout_ms` (a connection without a request with
    /// Python and no bytes in or out for this long is closed), `partial_request_timeout_ms` (a
    /// request not wholly received this long after its first bytes closes its connection) and
    /// `queued_max_request_bytes` (bytes of requests received and not yet answered; see limits.rs).
    #[new]
    #[pyo3(signature = (table, listeners, max_request_bytes, heartbeat_view = None, *,
                        consumer_heartbeat_view = None, commit_path = None, authorize_short_paths = false,
                        sasl_max_receive_bytes = 524288, failed_authentication_delay_ms = 100, max_connections = None, max_connections_per_ip = None, idle_timeout_ms = None,
                        partial_request_timeout_ms = None, queued_max_request_bytes = None))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        table: Py<ApiTable>,
        listeners: Vec<(RawFd, String, bool, Option<Py<TlsServerConfig>>)>,
        max_request_bytes: usize,
        heartbeat_view: Option<Py<HeartbeatView>>,
        consumer_heartbeat_view: Option<Py<ConsumerHeartbeatView>>,
        commit_path: Option<Py<CommitPath>>,
        authorize_short_paths: bool,
        sasl_max_receive_bytes: usize,
        failed_authentication_delay_ms: u64,
        max_connections: Option<usize>,
        max_connections_per_ip: Option<usize>,
        idle_timeout_ms: Option<u64>,
        partial_request_timeout_ms: Option<u64>,
        queued_max_request_bytes: Option<usize>,
    ) -> PyResult<Self> {
        let poll = Poll::new()?;
        let waker = Waker::new(poll.registry(), WAKER)?;
        let mut sockets = Vec::new();
        for (i, (fd, name, sasl, tls)) in listeners.into_iter().enumerate() {
            // SAFETY: the caller hands over an open listening socket it no longer uses.
            let std_listener = unsafe { std::net::TcpListener::from_raw_fd(fd) };
            std_listener.set_nonblocking(true)?;
            let mut socket = TcpListener::from_std(std_listener);
            poll.registry()
                .register(&mut socket, Token(i + 1), Interest::READABLE)?;
            let tls = tls.map(|config| config.get().clone());
            sockets.push(Listener {
                socket,
                name: name.into(),
                sasl,
                tls,
            });
        }
        // SAFETY: eventfd returns a new descriptor or -1.
        let raw = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) };
        if raw < 0 {
            return Err(PyOSError::new_err(io::Error::last_os_error().to_string()));
        }
        let shared = Arc::new(Shared {
            to_python: Mutex::new(ToPython {
                items: Vec::new(),
                signalled: false,
            }),
            to_network: Mutex::new(ToNetwork {
                items: Vec::new(),
                woken: false,
            }),
            // SAFETY: `raw` is a fresh descriptor owned by nobody else.
            eventfd: unsafe { OwnedFd::from_raw_fd(raw) },
            waker,
            stop: AtomicBool::new(false),
            failure: Mutex::new(None),
            stats: RequestStats::default(),
            open_connections: AtomicU64::new(0),
            queued_request_bytes: AtomicU64::new(0),
        });
        if let Some(path) = &commit_path {
            let answers = shared.clone();
            path.get().attach(Arc::new(move |connection, frame, code| {
                answers.send_to_network(Outbound::CoreAnswer(connection, frame, code))
            }));
        }
        let idle = idle_timeout_ms.map(Duration::from_millis);
        let partial = partial_request_timeout_ms.map(Duration::from_millis);
        let sweep_every = [idle, partial]
            .into_iter()
            .flatten()
            .map(|t| t / 4)
            .fold(MAX_SWEEP, Duration::min);
        let now = Instant::now();
        let network = Network {
            poll,
            listeners: sockets,
            accept_paused: false,
            spare: open_spare(),
            limits: Limits {
                max_connections: max_connections.unwrap_or(usize::MAX),
                max_per_ip: max_connections_per_ip,
                idle,
                partial,
                sweep_every: sweep_every.max(Duration::from_millis(10)),
            },
            per_ip: HashMap::new(),
            pool: Pool::new(queued_max_request_bytes),
            waiting: [VecDeque::new(), VecDeque::new()],
            pool_freed: false,
            reports: Reports::new(REPORT_INTERVAL),
            tls_failures: HashMap::new(),
            now,
            next_sweep: now,
            connections: HashMap::new(),
            next_id: FIRST_CONNECTION,
            table,
            views: Views {
                heartbeat: heartbeat_view,
                consumer_heartbeat: consumer_heartbeat_view,
                commit_path,
            },
            authorize_short_paths,
            sasl_max_receive_bytes: sasl_max_receive_bytes.min(max_request_bytes),
            failed_authentication_delay: Duration::from_millis(failed_authentication_delay_ms),
            delayed_closes: VecDeque::new(),
            max_request_bytes,
            shared: shared.clone(),
            for_python: Vec::new(),
            read_buffer: vec![0; READ_CHUNK].into_boxed_slice(),
        };
        let for_thread = shared.clone();
        let thread = std::thread::Builder::new()
            .name("corral-network".into())
            .spawn(move || {
                let ended =
                    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| network.run()));
                let failure = match ended {
                    Ok(None) => return,
                    Ok(Some(failure)) => failure,
                    Err(_) => "the network thread panicked".to_string(),
                };
                *lock(&for_thread.failure) = Some(failure);
                for_thread.signal_python();
            })?;
        Ok(Reactor {
            shared,
            thread: Mutex::new(Some(thread)),
        })
    }

    /// Readable when requests wait for `drain()`.
    #[getter]
    fn notify_fd(&self) -> RawFd {
        self.shared.eventfd.as_raw_fd()
    }

    /// The requests queued for Python, as `Request`s, the problems to log, and the watched
    /// connections that closed, since the last call. A problem is (kind, client host, message):
    /// a connection closed for bad input, of that kind (`Refusal::kind`), from that client; or
    /// (None, None, message), a report the network thread already rate-limited. A request that
    /// does not decode closes its connection.
    fn drain(&self, py: Python<'_>) -> PyResult<Drained> {
        if let Some(failure) = lock(&self.shared.failure).clone() {
            return Err(PyOSError::new_err(format!(
                "network thread stopped: {failure}"
            )));
        }
        let mut counter = [0u8; 8];
        // SAFETY: reads at most 8 bytes into a local buffer; EAGAIN (nothing signalled) is fine.
        unsafe {
            libc::read(
                self.shared.eventfd.as_raw_fd(),
                counter.as_mut_ptr() as *mut libc::c_void,
                8,
            )
        };
        let items = {
            let mut queue = lock(&self.shared.to_python);
            queue.signalled = false;
            std::mem::take(&mut queue.items)
        };
        let mut requests = Vec::with_capacity(items.len());
        let mut problems = Vec::new();
        let mut closed = Vec::new();
        for item in items {
            match item {
                Inbound::Request {
                    connection,
                    received,
                    peer,
                    client_host,
                    listener,
                    principal,
                } => {
                    let who = connection::Identity {
                        connection,
                        client_host: client_host.to_string(),
                        listener,
                        principal,
                    };
                    let built = connection::build_request(py, received, who)
                        .and_then(|request| Py::new(py, request));
                    match built {
                        Ok(request) => requests.push(request),
                        Err(e) => {
                            let kind = Some(Refusal::Malformed.kind());
                            problems.push((
                                kind,
                                Some(client_host.to_string()),
                                format!("closing connection from {peer}: {e}"),
                            ));
                            self.shared.send_to_network(Outbound::Close(connection));
                        }
                    }
                }
                Inbound::Refused {
                    kind,
                    peer,
                    client_host,
                    reason,
                } => problems.push((
                    Some(kind.kind()),
                    Some(client_host.to_string()),
                    format!("closing connection from {peer}: {reason}"),
                )),
                Inbound::Notice(message) => problems.push((None, None, message)),
                Inbound::Closed(connection) => closed.push(connection),
            }
        }
        Ok((requests, problems, closed))
    }

    /// Per (API key, version): key, version, requests taken, the latency histogram's buckets
    /// (counts, not cumulative; bounds in `latency_bounds()`), its sum in seconds, and the error
    /// codes of the answers the core gave itself (code, count). See request_stats.rs.
    fn request_stats(&self) -> Vec<Snapshot> {
        self.shared.stats.snapshot()
    }

    /// The latency histogram's upper bounds in seconds (a last bucket is over them).
    #[staticmethod]
    fn latency_bounds() -> Vec<f64> {
        BUCKETS_US.iter().map(|&us| us as f64 / 1e6).collect()
    }

    /// (open connections, bytes of requests held against queued.max.request.bytes), as of the
    /// network thread's last loop turn.
    fn network_stats(&self) -> (u64, u64) {
        (
            self.shared.open_connections.load(Ordering::Relaxed),
            self.shared.queued_request_bytes.load(Ordering::Relaxed),
        )
    }

    /// Fault injection for tests: the network thread stops as if its poll had failed.
    fn inject_failure(&self, reason: String) {
        self.shared.send_to_network(Outbound::Fail(reason));
    }

    /// Sends `response` (a whole frame) as the answer to the connection's request; None when the
    /// request has no answer. A connection that has gone away is skipped.
    #[pyo3(signature = (connection, response))]
    fn respond(&self, connection: u64, response: Option<Bound<'_, PyAny>>) -> PyResult<()> {
        let frame = match response {
            None => None,
            Some(obj) => {
                let data: PyBackedBytes = obj.extract()?;
                Some(if data.len() < COPY_BELOW {
                    Bytes::copy_from_slice(&data)
                } else {
                    Bytes::from_owner(data)
                })
            }
        };
        self.shared
            .send_to_network(Outbound::Respond(connection, frame));
        Ok(())
    }

    /// Closes the connection (after a handler failed on its request).
    fn close(&self, connection: u64) {
        self.shared.send_to_network(Outbound::Close(connection));
    }

    /// Closes the connection once the answer to its request is written (failed authentication).
    fn close_after_answer(&self, connection: u64) {
        self.shared
            .send_to_network(Outbound::CloseAfterAnswer(connection));
    }

    /// The connection is `principal` from its next request on; after `session_lifetime_ms` (0:
    /// never) only a re-authentication may follow, anything else closes it. Sent before the
    /// answer to the SaslAuthenticate that succeeded.
    fn authenticated(&self, connection: u64, principal: String, session_lifetime_ms: u64) {
        self.shared.send_to_network(Outbound::Authenticated(
            connection,
            principal,
            session_lifetime_ms,
        ));
    }

    /// After the answer to its SaslHandshake v0 the connection sends bare SASL tokens: each goes
    /// to Python as a SaslAuthenticate v0 request, and the answer's token goes back
    /// bare, until the answer after `authenticated`; a refusal closes the connection unanswered.
    fn raw_sasl_tokens(&self, connection: u64) {
        self.shared
            .send_to_network(Outbound::RawSaslTokens(connection));
    }

    /// When the connection closes, `drain()` reports it (Python keeps state for it).
    fn watch_close(&self, connection: u64) {
        self.shared
            .send_to_network(Outbound::WatchClose(connection));
    }

    /// The short paths may answer the connection's heartbeats for this group (authorizer on).
    fn authorize_group(&self, connection: u64, group_id: String) {
        self.shared
            .send_to_network(Outbound::AuthorizeGroup(connection, group_id));
    }

    /// The commit path may take the connection's OffsetCommits to these topics (their group
    /// authorized too; authorizer on).
    fn authorize_topics(&self, connection: u64, topics: Vec<String>) {
        self.shared
            .send_to_network(Outbound::AuthorizeTopics(connection, topics));
    }

    /// Drops every group and topic authorization given by `authorize_group` and
    /// `authorize_topics` (the ACLs changed).
    fn forget_authorizations(&self) {
        self.shared.send_to_network(Outbound::ForgetAuthorizations);
    }

    /// Stops the thread and closes every socket.
    fn stop(&self, py: Python<'_>) {
        self.shared.stop.store(true, Ordering::SeqCst);
        let _ = self.shared.waker.wake();
        let thread = lock(&self.thread).take();
        if let Some(thread) = thread {
            py.detach(|| {
                let _ = thread.join();
            });
        }
    }
}

struct Limits {
    max_connections: usize,
    max_per_ip: Option<usize>,
    idle: Option<Duration>,
    partial: Option<Duration>,
    sweep_every: Duration,
}

enum Spare {
    /// A waiting connection was accepted on the spare descriptor and closed.
    Refused,
    NoneWaiting,
    /// No spare descriptor to give up, or accept failed even so (with this errno).
    Failed(Option<i32>),
}

/// What the rate-limited reports count.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Report {
    OverMaxConnections,
    OverPerIp(IpAddr),
    /// Over max.connections.per.ip, from addresses beyond MAX_REPORTED_ADDRESSES.
    OverPerIpElsewhere,
    /// accept() failed with this errno.
    AcceptFailed(i32),
    /// Out of descriptors: accepted on the spare descriptor and closed.
    RefusedNoFd,
    /// A TLS handshake (or record) failed: expired or untrusted certificate, not TLS at all...
    TlsFailed(IpAddr),
    /// The same, from addresses beyond MAX_REPORTED_ADDRESSES.
    TlsFailedElsewhere,
}

/// What `drain()` reports to log: (kind, client host, message).
type Problem = (Option<&'static str>, Option<String>, String);

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
    /// Connections per peer address, when max.connections.per.ip is set.
    per_ip: HashMap<IpAddr, usize>,
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
    connections: HashMap<u64, Conn>,
    next_id: u64,
    table: Py<ApiTable>,
    /// What the short paths are answered from.
    views: Views,
    /// Short paths answer only groups authorized on the connection (`Conn::authorized_groups`).
    authorize_short_paths: bool,
    /// Bound on a SASL connection's requests until it is authenticated.
    sasl_max_receive_bytes: usize,
    /// A failed authentication's connection closes this long after its answer is written.
    failed_authentication_delay: Duration,
    /// (when, connection) of those closes, in time order (the delay is one for all).
    delayed_closes: VecDeque<(Instant, u64)>,
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
            if let Some(&(at, _)) = self.delayed_closes.front() {
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
            while self
                .delayed_closes
                .front()
                .is_some_and(|&(at, _)| at <= self.now)
            {
                let (_, id) = self.delayed_closes.pop_front().expect("looked at");
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

    fn accept_all(&mut self) {
        if self.spare.is_none() {
            self.spare = open_spare();
        }
        for i in 0..self.listeners.len() {
            loop {
                match self.listeners[i].socket.accept() {
                    Ok((stream, addr)) => self.add_connection(stream, addr, i),
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                    // Linux takes the descriptor before it looks at the backlog: this comes even when
                    // no connection is waiting.
                    Err(e) if matches!(e.raw_os_error(), Some(libc::EMFILE | libc::ENFILE)) => {
                        match self.refuse_on_spare(i) {
                            Spare::Refused => continue,
                            Spare::NoneWaiting => break,
                            Spare::Failed(errno) => {
                                self.reports.note(Report::AcceptFailed(errno.unwrap_or(0)));
                                self.accept_paused = true;
                                break;
                            }
                        }
                    }
                    Err(e) if matches!(e.raw_os_error(), Some(libc::ENOMEM | libc::ENOBUFS)) => {
                        self.reports
                            .note(Report::AcceptFailed(e.raw_os_error().unwrap_or(0)));
                        self.accept_paused = true;
                        break;
                    }
                    Err(_) => continue, // ECONNABORTED and the like: that client is gone
                }
            }
        }
    }

    /// Out of descriptors: gives up the spare one to accept the next connection and close it at
    /// once, so that its client sees a close instead of waiting in the backlog.
    fn refuse_on_spare(&mut self, listener: usize) -> Spare {
        let Some(spare) = self.spare.take() else {
            return Spare::Failed(Some(libc::EMFILE));
        };
        drop(spare);
        let accepted = self.listeners[listener].socket.accept();
        // Closes the accepted connection first: its descriptor is the one the spare takes back.
        let result = match accepted {
            Ok((stream, _)) => {
                drop(stream);
                self.reports.note(Report::RefusedNoFd);
                Spare::Refused
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => Spare::NoneWaiting,
            Err(e)
                if matches!(
                    e.raw_os_error(),
                    Some(libc::EMFILE | libc::ENFILE | libc::ENOMEM | libc::ENOBUFS)
                ) =>
            {
                Spare::Failed(e.raw_os_error())
            }
            Err(_) => Spare::Refused, // that client is gone already
        };
        self.spare = open_spare();
        match result {
            Spare::Refused if self.spare.is_none() => Spare::Failed(Some(libc::EMFILE)),
            result => result,
        }
    }

    fn add_connection(&mut self, mut stream: TcpStream, addr: SocketAddr, listener: usize) {
        // Over a limit: dropping the stream closes it at once.
        if self.connections.len() >= self.limits.max_connections {
            self.reports.note(Report::OverMaxConnections);
            return;
        }
        let ip = addr.ip().to_canonical();
        if let Some(max) = self.limits.max_per_ip {
            let count = self.per_ip.entry(ip).or_insert(0);
            if *count >= max {
                if *count == 0 {
                    self.per_ip.remove(&ip);
                }
                // One line per address, up to a bound: many addresses share one.
                let report = Report::OverPerIp(ip);
                if self.reports.counts(&report) || self.reports.kinds() < MAX_REPORTED_ADDRESSES {
                    self.reports.note(report);
                } else {
                    self.reports.note(Report::OverPerIpElsewhere);
                }
                return;
            }
            *count += 1;
        }
        let tls = match &self.listeners[listener].tls {
            None => None,
            Some(config) => match Tls::new(&config.config) {
                Ok(tls) => Some(Box::new(tls)),
                Err(_) => {
                    self.forget_ip(ip);
                    return;
                }
            },
        };
        let id = self.next_id;
        self.next_id += 1;
        let _ = stream.set_nodelay(true);
        if self
            .poll
            .registry()
            .register(
                &mut stream,
                Token(id as usize),
                Interest::READABLE | Interest::WRITABLE,
            )
            .is_err()
        {
            self.forget_ip(ip);
            return;
        }
        let mut frames = FrameSplitter::new(self.max_request_bytes);
        if self.listeners[listener].sasl {
            frames.limit(
                self.sasl_max_receive_bytes,
                "sasl.server.max.receive.size, before authentication",
            );
        }
        let conn = Conn {
            stream,
            tls,
            listener,
            principal: connection::ANONYMOUS.into(),
            authenticated: !self.listeners[listener].sasl,
            raw_sasl: RawSasl::Off,
            session_ends: None,
            authorized_groups: HashSet::new(),
            authorized_topics: HashSet::new(),
            watched: false,
            closing: false,
            close_scheduled: false,
            ip,
            peer: addr.to_string().into(),
            client_host: format!("/{}", addr.ip()).into(),
            frames,
            out: VecDeque::new(),
            out_bytes: 0,
            busy: false,
            with_python: (0, 0, self.now),
            unread: false,
            budget: Budget::default(),
            pool_waiting: false,
            last_active: self.now,
            partial_since: None,
        };
        self.connections.insert(id, conn);
    }

    fn forget_ip(&mut self, ip: IpAddr) {
        if self.limits.max_per_ip.is_none() {
            return;
        }
        if let Some(count) = self.per_ip.get_mut(&ip) {
            *count -= 1;
            if *count == 0 {
                self.per_ip.remove(&ip);
            }
        }
    }

    fn end(&mut self, id: u64, end: End) {
        if let Some(mut conn) = self.connections.remove(&id) {
            let _ = self.poll.registry().deregister(&mut conn.stream);
            if self.pool.limited() && conn.budget.release(&mut self.pool) {
                self.pool_freed = true;
            }
            self.forget_ip(conn.ip);
            if conn.watched {
                self.for_python.push(Inbound::Closed(id));
            }
            if let End::Refused(kind, reason) = end {
                self.for_python.push(Inbound::Refused {
                    kind,
                    peer: conn.peer.clone(),
                    client_host: conn.client_host.clone(),
                    reason,
                });
            }
        }
    }

    /// Reads what the socket has, up to the read-ahead bound and while the pool allows.
    fn read(&mut self, id: u64) {
        let chunk = &mut self.read_buffer;
        let Some(conn) = self.connections.get_mut(&id) else {
            return;
        };
        conn.unread = false;
        loop {
            if !conn.may_read() {
                conn.unread = true;
                return;
            }
            let limit = match conn
                .budget
                .allowance(&self.pool, conn.frames.head(), chunk.len())
            {
                Allow::Read(n) => n,
                Allow::Wait(lane) => {
                    // The bytes stay in the socket; resume_waiting reads them.
                    conn.unread = true;
                    if !conn.pool_waiting {
                        conn.pool_waiting = true;
                        self.waiting[lane as usize].push_back(id);
                    }
                    return;
                }
            };
            let got = match conn.tls.as_mut() {
                None => conn.stream.read(&mut chunk[..limit]),
                Some(tls) => {
                    let got = tls.read(&mut conn.stream, &mut chunk[..limit]);
                    let listener = &self.listeners[conn.listener];
                    // On SASL_SSL the principal is SASL's, as in Kafka.
                    if let (Some(Some(dn)), false, Some(config)) =
                        (tls.peer_subject(), listener.sasl, &listener.tls)
                    {
                        match config.principal_mapper.name(&dn) {
                            Ok(name) => conn.principal = format!("User:{name}").into(),
                            Err(e) => {
                                // Kafka closes such a connection at its first request.
                                let ip = conn.ip;
                                self.note_tls_failure(ip, e);
                                return self.end(id, End::Closed);
                            }
                        }
                    }
                    got
                }
            };
            match got {
                Ok(0) => return self.end(id, End::Closed),
                Ok(n) => {
                    conn.frames.push(&chunk[..n]);
                    conn.last_active = self.now;
                    if conn.partial_since.is_none() {
                        conn.partial_since = Some(self.now);
                    }
                    self.pool_freed |= conn.recharge(&mut self.pool);
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) if e.kind() == io::ErrorKind::InvalidData => {
                    // A failed TLS handshake or record: send rustls's alert, then close. Counted,
                    // not logged one by one: a client retrying a bad certificate would flood.
                    if let Some(tls) = conn.tls.as_mut() {
                        let _ = tls.flush(&mut conn.stream, &mut VecDeque::new());
                    }
                    let ip = conn.ip;
                    self.note_tls_failure(ip, e.to_string());
                    return self.end(id, End::Closed);
                }
                Err(_) => return self.end(id, End::Closed),
            }
        }
    }

    /// Handles the connection's frames while it may, then writes what it has to say.
    fn serve(&mut self, id: u64) {
        loop {
            let Some(conn) = self.connections.get_mut(&id) else {
                return;
            };
            if !conn.may_process() {
                break;
            }
            let frame = match conn.next_frame() {
                Ok(Some(frame)) => frame,
                Ok(None) => {
                    if conn.unread && conn.may_read() && !conn.pool_waiting {
                        self.read(id);
                        continue;
                    }
                    break;
                }
                Err(e) => return self.end(id, End::Refused(Refusal::Malformed, e.to_string())),
            };
            conn.partial_since = if conn.frames.buffered() > 0 {
                Some(self.now)
            } else {
                None
            };
            // What it waited for may have changed: the next read attempt decides again.
            conn.pool_waiting = false;
            match connection::route(self.table.get(), frame) {
                Err(reason) => return self.end(id, End::Refused(Refusal::Malformed, reason)),
                Ok(Routed::Answered(prefix, response, code)) => {
                    if prefix.api_key != API_VERSIONS {
                        if let Some(reason) = conn.refusal(prefix.api_key, self.now) {
                            return self.end(id, End::Refused(Refusal::Unauthenticated, reason));
                        }
                    }
                    let stats = &self.shared.stats;
                    stats.received(prefix.api_key, prefix.api_version);
                    stats.answered(
                        prefix.api_key,
                        prefix.api_version,
                        self.now.elapsed(),
                        Some(code),
                    );
                    conn.budget.frame_taken(None);
                    conn.queue(response);
                }
                Ok(Routed::ToPython(prefix, frame)) => {
                    let size = frame.len();
                    let (key, version) = (prefix.api_key, prefix.api_version);
                    if let Some(reason) = conn.refusal(key, self.now) {
                        return self.end(id, End::Refused(Refusal::Unauthenticated, reason));
                    }
                    let stats = &self.shared.stats;
                    stats.received(key, version);
                    let received = connection::receive(prefix, frame);
                    let short_path_allowed = !self.authorize_short_paths
                        || received
                            .group_id()
                            .is_some_and(|group| conn.authorized_groups.contains(group));
                    let answer = if short_path_allowed {
                        received.answer(&self.views, &conn.client_host)
                    } else {
                        None
                    };
                    // With an authorizer, a commit's topics must be authorized on the connection too.
                    let topics_allowed = || {
                        !self.authorize_short_paths
                            || received
                                .commit_topics()
                                .all(|topic| conn.authorized_topics.contains(topic))
                    };
                    let took = if short_path_allowed && answer.is_none() && topics_allowed() {
                        received.take(&self.views, &conn.client_host, id)
                    } else {
                        None
                    };
                    if let Some((response, code)) = answer.or(match took {
                        Some(Took::Answered(ref response)) => Some((response.clone(), 0)),
                        _ => None,
                    }) {
                        stats.answered(key, version, self.now.elapsed(), Some(code));
                        conn.budget.frame_taken(None);
                        conn.queue(response);
                    } else if let Some(Took::Waiting) = took {
                        // Answered by the fsync pass that covers it (`Outbound::CoreAnswer`).
                        conn.budget.frame_taken(Some(size));
                        conn.busy = true;
                        conn.with_python = (key, version, self.now);
                    } else {
                        conn.budget.frame_taken(Some(size));
                        conn.busy = true;
                        conn.with_python = (key, version, self.now);
                        let (peer, client_host) = (conn.peer.clone(), conn.client_host.clone());
                        let (listener, principal) = (
                            self.listeners[conn.listener].name.clone(),
                            conn.principal.clone(),
                        );
                        self.for_python.push(Inbound::Request {
                            connection: id,
                            received,
                            peer,
                            client_host,
                            listener,
                            principal,
                        });
                    }
                }
            }
            self.pool_freed |= conn.recharge(&mut self.pool);
        }
        self.flush(id);
    }

    /// Writes queued responses until the socket is full (a writable event resumes it).
    fn flush(&mut self, id: u64) {
        let Some(conn) = self.connections.get_mut(&id) else {
            return;
        };
        let was_full = conn.out_bytes >= OUT_LIMIT;
        if let Some(tls) = conn.tls.as_mut() {
            // Everything goes through the TLS session: what it cannot take yet stays in `out`.
            match tls.flush(&mut conn.stream, &mut conn.out) {
                Ok(taken) => {
                    if taken > 0 {
                        conn.last_active = self.now;
                    }
                    conn.out_bytes -= taken;
                }
                Err(_) => return self.end(id, End::Closed),
            }
        }
        while conn.tls.is_none() && !conn.out.is_empty() {
            let written = if conn.out.len() == 1 {
                conn.stream.write(&conn.out[0])
            } else {
                let slices: Vec<IoSlice<'_>> =
                    conn.out.iter().take(64).map(|b| IoSlice::new(b)).collect();
                conn.stream.write_vectored(&slices)
            };
            match written {
                Ok(0) => return self.end(id, End::Closed),
                Ok(mut n) => {
                    conn.last_active = self.now;
                    conn.out_bytes -= n;
                    while n > 0 {
                        let front = conn.out.front_mut().expect("written bytes were queued");
                        if n >= front.len() {
                            n -= front.len();
                            conn.out.pop_front();
                        } else {
                            front.advance(n);
                            n = 0;
                        }
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(_) => return self.end(id, End::Closed),
            }
        }
        if conn.closing
            && conn.out.is_empty()
            && !conn.busy
            && !conn.tls.as_ref().is_some_and(|tls| tls.pending())
        {
            // Kafka delays the close: the client reads its answer first, and guessing is slower.
            if self.failed_authentication_delay.is_zero() {
                return self.end(id, End::Closed);
            }
            if !conn.close_scheduled {
                conn.close_scheduled = true;
                self.delayed_closes
                    .push_back((self.now + self.failed_authentication_delay, id));
            }
            return;
        }
        // Frames held back by a full output can go on now.
        if was_full && conn.out_bytes < OUT_LIMIT {
            self.serve(id);
        }
    }

    /// The answer to a connection's request that was with Python (`core_code` None) or waited
    /// for the commit path's fsync (its error code): the connection may go on.
    fn answered(&mut self, id: u64, response: Option<Bytes>, core_code: Option<i16>) {
        let Some(conn) = self.connections.get_mut(&id) else {
            return;
        };
        conn.busy = false;
        let (key, version, since) = conn.with_python;
        self.shared.stats.answered(
            key,
            version,
            self.now.saturating_duration_since(since),
            core_code,
        );
        conn.budget.answered();
        self.pool_freed |= conn.recharge(&mut self.pool);
        if let Some(frame) = conn.outgoing(response) {
            conn.queue(frame);
        }
        self.serve(id);
    }

    /// Applies Python's answers: each frees its connection for its next request. Returns a
    /// failure to stop with (fault injection).
    fn take_answers(&mut self) -> Option<String> {
        let items = {
            let mut queue = lock(&self.shared.to_network);
            queue.woken = false;
            std::mem::take(&mut queue.items)
        };
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

    /// Lets connections waiting for the pool read again, in the order they stopped, while their
    /// lane has room.
    fn resume_waiting(&mut self) {
        if !std::mem::take(&mut self.pool_freed) {
            return;
        }
        for lane in [Lane::Small, Lane::Large] {
            while self.pool.has_room(lane) {
                let Some(id) = self.waiting[lane as usize].pop_front() else {
                    break;
                };
                let Some(conn) = self.connections.get_mut(&id) else {
                    continue;
                };
                if !conn.pool_waiting {
                    continue; // it stopped waiting meanwhile (see serve)
                }
                conn.pool_waiting = false;
                // Time spent waiting for the pool is not the client's.
                conn.last_active = self.now;
                if conn.partial_since.is_some() {
                    conn.partial_since = Some(self.now);
                }
                self.read(id);
                self.serve(id);
            }
        }
    }

    /// Closes idle connections and those stuck in the middle of a request.
    fn sweep(&mut self) {
        let (idle, partial) = (self.limits.idle, self.limits.partial);
        if idle.is_none() && partial.is_none() {
            return;
        }
        let now = self.now;
        let mut ending = Vec::new();
        for (&id, conn) in &self.connections {
            if conn.pool_waiting {
                continue; // waiting for us, not for the client
            }
            if let (Some(limit), Some(since)) = (partial, conn.partial_since) {
                if now.duration_since(since) >= limit
                    && !conn.frames.has_frame()
                    && conn.frames.buffered() > 0
                {
                    let expected = match conn.frames.head() {
                        crate::limits::Head::Partial { frame } => format!(" of {frame}"),
                        _ => String::new(),
                    };
                    let reason = format!(
                        "request not received within {} ms (corral.socket.partial.request.timeout.ms): {}{expected} bytes arrived",
                        limit.as_millis(),
                        conn.frames.buffered(),
                    );
                    ending.push((id, End::Refused(Refusal::Slow, reason)));
                    continue;
                }
            }
            if let Some(limit) = idle {
                if !conn.busy && now.duration_since(conn.last_active) >= limit {
                    ending.push((id, End::Closed));
                }
            }
        }
        for (id, end) in ending {
            self.end(id, end);
        }
    }

    fn note_tls_failure(&mut self, ip: IpAddr, reason: String) {
        let report = Report::TlsFailed(ip);
        if self.reports.counts(&report) || self.reports.kinds() < MAX_REPORTED_ADDRESSES {
            self.reports.note(report);
            self.tls_failures.insert(ip, reason);
        } else {
            self.reports.note(Report::TlsFailedElsewhere);
        }
    }

    /// Queues the rate-limited reports for Python when they are due.
    fn report(&mut self) {
        if !self.reports.pending() {
            return;
        }
        let Some(counts) = self.reports.take_due(self.now) else {
            return;
        };
        for (report, n) in counts {
            let s = if n == 1 { "" } else { "s" };
            let message = match report {
                Report::OverMaxConnections => {
                    format!("refused {n} connection{s} over max.connections={}", self.limits.max_connections)
                }
                Report::OverPerIp(ip) => format!(
                    "refused {n} connection{s} over max.connections.per.ip={} from /{ip}",
                    self.limits.max_per_ip.unwrap_or(usize::MAX)
                ),
                Report::OverPerIpElsewhere => format!(
                    "refused {n} connection{s} over max.connections.per.ip={} from other addresses",
                    self.limits.max_per_ip.unwrap_or(usize::MAX)
                ),
                Report::AcceptFailed(errno) => format!(
                    "accepting connections failed {n} time{s}: {}",
                    io::Error::from_raw_os_error(errno)
                ),
                Report::TlsFailed(ip) => format!(
                    "closed {n} connection{s} from /{ip} for failed TLS (last: {})",
                    self.tls_failures.remove(&ip).unwrap_or_default()
                ),
                Report::TlsFailedElsewhere => format!("closed {n} connection{s} from other addresses for failed TLS"),
                Report::RefusedNoFd => format!(
                    "refused {n} connection{s} for want of file descriptors (closed at once on a spare \
                     descriptor); raise RLIMIT_NOFILE or lower max.connections"
                ),
            };
            self.for_python.push(Inbound::Notice(message));
        }
        // Every address counted was named above.
        self.tls_failures.clear();
    }

    /// Hands the requests gathered in this turn to Python in one batch.
    fn hand_over(&mut self) {
        if self.for_python.is_empty() {
            return;
        }
        let signal = {
            let mut queue = lock(&self.shared.to_python);
            queue.items.append(&mut self.for_python);
            !std::mem::replace(&mut queue.signalled, true)
        };
        if signal {
            self.shared.signal_python();
        }
    }
}

/// An open /dev/null, to give up when accept() runs out of descriptors.
fn open_spare() -> Option<OwnedFd> {
    std::fs::File::open("/dev/null").ok().map(OwnedFd::from)
}
