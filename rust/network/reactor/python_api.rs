//! `Reactor`, the network thread as Python sees it: started on the listening sockets, drained
//! of requests when its eventfd is readable, and told the answers and what changed about a
//! connection (authenticated, authorized, closing), each through the queues of queues.rs.

use std::collections::{HashMap, VecDeque};
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use bytes::Bytes;
use mio::net::TcpListener;
use mio::{Interest, Poll, Token, Waker};
use pyo3::exceptions::PyOSError;
use pyo3::prelude::*;
use pyo3::pybacked::PyBackedBytes;

use super::accept::{open_spare, PerIp, Refusals};
use super::queues::{lock, Handoff, Inbound, Outbound, Shared};
use super::sweeps::{self, DelayedCloses};
use super::{Limits, Network, Refusal, FIRST_CONNECTION, WAKER};
use crate::codec::requests::{self, ApiTable, Request};
use crate::groups::consumer_heartbeat_view::ConsumerHeartbeatView;
use crate::groups::heartbeat_view::HeartbeatView;
use crate::network::client_socket::Listener;
use crate::network::limits::{Pool, Reports};
use crate::network::request_stats::{RequestStats, Snapshot, BUCKETS_US};
use crate::network::tls::TlsServerConfig;
use crate::short_paths::commit_path::CommitPath;
use crate::short_paths::Views;

/// Responses below this are copied out of Python; larger ones (Fetch) are kept by reference.
const COPY_BELOW: usize = 16 * 1024;
/// Refused connections and accept failures are logged at most this often, with counts.
const REPORT_INTERVAL: Duration = Duration::from_secs(10);
/// What the network thread reads a socket into.
const READ_CHUNK: usize = 64 * 1024;

/// What `drain()` reports to log: (kind, client host, message).
type Problem = (Option<&'static str>, Option<String>, String);

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
        let mut sockets: Vec<Listener> = Vec::new();
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
            to_python: Mutex::new(Handoff::new()),
            to_network: Mutex::new(Handoff::new()),
            // SAFETY: `raw` is a fresh descriptor owned by nobody else.
            eventfd: unsafe { OwnedFd::from_raw_fd(raw) },
            waker,
            stop: AtomicBool::new(false),
            failure: Mutex::new(None),
            stats: RequestStats::default(),
            open_connections: AtomicU64::new(0),
            queued_request_bytes: AtomicU64::new(0),
            short_paths: AtomicBool::new(true),
            refusals: Refusals::new(
                sockets.iter().map(|l| l.name.clone()).collect(),
                Instant::now(),
            ),
        });
        if let Some(path) = &commit_path {
            let answers = shared.clone();
            path.get().attach(Arc::new(move |connection, frame, code| {
                answers.send_to_network(Outbound::CoreAnswer(connection, frame, code))
            }));
        }
        let idle = idle_timeout_ms.map(Duration::from_millis);
        let partial = partial_request_timeout_ms.map(Duration::from_millis);
        let now = Instant::now();
        let network = Network {
            poll,
            listeners: sockets,
            accept_paused: false,
            spare: open_spare(),
            limits: Limits {
                max_connections: max_connections.unwrap_or(usize::MAX),
                idle,
                partial,
                sweep_every: sweeps::sweep_every(idle, partial),
            },
            per_ip: PerIp::new(max_connections_per_ip),
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
            delayed_closes: DelayedCloses::new(Duration::from_millis(
                failed_authentication_delay_ms,
            )),
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
        let items = lock(&self.shared.to_python).take();
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
                    let who = requests::Identity {
                        connection,
                        client_host: client_host.to_string(),
                        listener,
                        principal,
                    };
                    let built = requests::build_request(py, received, who)
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

    /// Whether the short paths (steady-state Heartbeats, ConsumerGroupHeartbeats, OffsetCommits)
    /// may be answered by the network thread; false sends every request to Python (while a fault
    /// is injected, corral/faults/). On by default; requests already taken are not affected.
    fn set_short_paths(&self, enabled: bool) {
        self.shared.short_paths.store(enabled, Ordering::Relaxed);
    }

    /// Whether the short paths may answer (`set_short_paths`).
    #[getter]
    fn short_paths(&self) -> bool {
        self.shared.short_paths.load(Ordering::Relaxed)
    }

    /// Fault injection: new connections on the listener named `listener` (every listener when
    /// None) are accepted and closed at once for `duration_ms` from now (None: until called
    /// again; 0: no longer), as by a broker that is down. Returns how many listening sockets
    /// that names (0: no listener of that name). Connections already open are not touched.
    #[pyo3(signature = (duration_ms, listener = None))]
    fn refuse_connections(&self, duration_ms: Option<u64>, listener: Option<&str>) -> usize {
        self.shared.refusals.refuse(
            listener,
            duration_ms.map(Duration::from_millis),
            Instant::now(),
        )
    }

    /// Connections refused by `refuse_connections` since the reactor started.
    #[getter]
    fn refused_connections(&self) -> u64 {
        self.shared.refusals.count()
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
