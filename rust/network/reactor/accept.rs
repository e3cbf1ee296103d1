//! Accepting connections: the listeners, max.connections and max.connections.per.ip (a
//! connection over either is accepted and closed at once), and running out of descriptors
//! (accept() gives up a spare one, /dev/null, to do the same), and refusing every new connection
//! for a while (a fault injected on purpose, corral/faults/: `Refusals`).

use std::collections::{HashMap, HashSet, VecDeque};
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::os::fd::OwnedFd;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;
use std::time::{Duration, Instant};

use mio::net::TcpStream;
use mio::{Interest, Token};

use super::reports::{self, Report};
use super::Network;
use crate::codec::frames::FrameSplitter;
use crate::codec::requests;
use crate::network::client_socket::{ClientSocket, RawSasl};
use crate::network::limits::Budget;
use crate::network::tls::Tls;

enum Spare {
    /// A waiting connection was accepted on the spare descriptor and closed.
    Refused,
    NoneWaiting,
    /// No spare descriptor to give up, or accept failed even so (with this errno).
    Failed(Option<i32>),
}

/// Connections per peer address, against max.connections.per.ip (counted only when it is set).
pub(super) struct PerIp {
    max: Option<usize>,
    counts: HashMap<IpAddr, usize>,
}

impl PerIp {
    pub(super) fn new(max: Option<usize>) -> Self {
        PerIp {
            max,
            counts: HashMap::new(),
        }
    }

    pub(super) fn max(&self) -> Option<usize> {
        self.max
    }

    /// Counts a new connection from `ip`; false when it is over the limit (not counted).
    pub(super) fn admit(&mut self, ip: IpAddr) -> bool {
        let Some(max) = self.max else {
            return true;
        };
        let count = self.counts.entry(ip).or_insert(0);
        if *count >= max {
            if *count == 0 {
                self.counts.remove(&ip);
            }
            return false;
        }
        *count += 1;
        true
    }

    /// A connection `admit` counted has ended (or was never set up).
    pub(super) fn release(&mut self, ip: IpAddr) {
        if let Some(count) = self.counts.get_mut(&ip) {
            *count -= 1;
            if *count == 0 {
                self.counts.remove(&ip);
            }
        }
    }
}

/// Listening sockets refused on purpose until a deadline (`Reactor.refuse_connections`): while
/// refused, a new connection is accepted and closed at once, as a broker that is down would
/// (its client sees the connection fail and retries). Set by Python, read by the network
/// thread at each accept: one atomic per listening socket, holding the deadline in ms since
/// `base`, plus one (0: not refused).
pub(super) struct Refusals {
    base: Instant,
    /// The listener name of each listening socket, in the network thread's order.
    names: Vec<Arc<str>>,
    until: Vec<AtomicU64>,
    /// Connections refused so far (for the faults' counters).
    refused: AtomicU64,
}

impl Refusals {
    pub(super) fn new(names: Vec<Arc<str>>, base: Instant) -> Self {
        let until = names.iter().map(|_| AtomicU64::new(0)).collect();
        Refusals {
            base,
            names,
            until,
            refused: AtomicU64::new(0),
        }
    }

    fn stamp(&self, at: Instant) -> u64 {
        let ms = at.saturating_duration_since(self.base).as_millis();
        u64::try_from(ms).unwrap_or(u64::MAX - 1).saturating_add(1)
    }

    /// Refuses new connections on the sockets of listener `name` (every listener when None)
    /// for `duration` from `now` (None: until told otherwise; zero: no longer). Returns how many
    /// listening sockets that names (0: no listener of that name).
    pub(super) fn refuse(
        &self,
        name: Option<&str>,
        duration: Option<Duration>,
        now: Instant,
    ) -> usize {
        let until = match duration {
            None => u64::MAX,
            Some(d) if d.is_zero() => 0,
            Some(d) => self.stamp(now.checked_add(d).unwrap_or(now)).max(1),
        };
        let mut n = 0;
        for (socket, listener) in self.names.iter().enumerate() {
            if name.is_none_or(|name| &**listener == name) {
                self.until[socket].store(until, Relaxed);
                n += 1;
            }
        }
        n
    }

    /// Whether a new connection on listening socket `socket` is refused at `now` (counted).
    pub(super) fn refused(&self, socket: usize, now: Instant) -> bool {
        let until = self.until[socket].load(Relaxed);
        if until == 0 || self.stamp(now) >= until {
            return false;
        }
        self.refused.fetch_add(1, Relaxed);
        true
    }

    /// Connections refused so far.
    pub(super) fn count(&self) -> u64 {
        self.refused.load(Relaxed)
    }
}

impl Network {
    pub(super) fn accept_all(&mut self) {
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
        // Refused on purpose (a fault), or over a limit: dropping the stream closes it at once.
        if self.shared.refusals.refused(listener, self.now) {
            return;
        }
        if self.connections.len() >= self.limits.max_connections {
            self.reports.note(Report::OverMaxConnections);
            return;
        }
        let ip = addr.ip().to_canonical();
        if !self.per_ip.admit(ip) {
            let report = reports::named_or_elsewhere(
                &self.reports,
                Report::OverPerIp(ip),
                Report::OverPerIpElsewhere,
            );
            self.reports.note(report);
            return;
        }
        let tls = match &self.listeners[listener].tls {
            None => None,
            Some(config) => match Tls::new(&config.config) {
                Ok(tls) => Some(Box::new(tls)),
                Err(_) => {
                    self.per_ip.release(ip);
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
            self.per_ip.release(ip);
            return;
        }
        let mut frames = FrameSplitter::new(self.max_request_bytes);
        if self.listeners[listener].sasl {
            frames.limit(
                self.sasl_max_receive_bytes,
                "sasl.server.max.receive.size, before authentication",
            );
        }
        let conn = ClientSocket {
            stream,
            tls,
            listener,
            principal: requests::ANONYMOUS.into(),
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
}

/// An open /dev/null, to give up when accept() runs out of descriptors.
pub(super) fn open_spare() -> Option<OwnedFd> {
    std::fs::File::open("/dev/null").ok().map(OwnedFd::from)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(last: u8) -> IpAddr {
        IpAddr::from([10, 0, 0, last])
    }

    #[test]
    fn per_ip_counts_each_address_up_to_its_limit() {
        let mut per_ip = PerIp::new(Some(2));
        assert!(per_ip.admit(ip(1)));
        assert!(per_ip.admit(ip(1)));
        assert!(!per_ip.admit(ip(1)));
        assert!(per_ip.admit(ip(2)));
        per_ip.release(ip(1));
        assert!(per_ip.admit(ip(1)));
        assert!(!per_ip.admit(ip(1)));
    }

    #[test]
    fn per_ip_forgets_addresses_without_connections() {
        let mut per_ip = PerIp::new(Some(1));
        assert!(per_ip.admit(ip(1)));
        per_ip.release(ip(1));
        assert!(per_ip.counts.is_empty());
        // A limit of 0 refuses all and keeps no entry.
        let mut none = PerIp::new(Some(0));
        assert!(!none.admit(ip(1)));
        assert!(none.counts.is_empty());
    }

    fn names() -> Vec<Arc<str>> {
        vec!["PLAINTEXT".into(), "PLAINTEXT".into(), "SSL".into()]
    }

    #[test]
    fn refusals_hold_until_their_deadline() {
        let base = Instant::now();
        let refusals = Refusals::new(names(), base);
        assert!(!refusals.refused(0, base));
        assert_eq!(
            refusals.refuse(None, Some(Duration::from_millis(50)), base),
            3
        );
        for socket in 0..3 {
            assert!(refusals.refused(socket, base + Duration::from_millis(49)));
            assert!(!refusals.refused(socket, base + Duration::from_millis(50)));
        }
        assert_eq!(refusals.count(), 3);
    }

    #[test]
    fn refusals_by_listener_name_and_until_cleared() {
        let base = Instant::now();
        let refusals = Refusals::new(names(), base);
        assert_eq!(refusals.refuse(Some("PLAINTEXT"), None, base), 2);
        assert_eq!(refusals.refuse(Some("NONE"), None, base), 0);
        let later = base + Duration::from_secs(86_400);
        assert!(refusals.refused(0, later) && refusals.refused(1, later));
        assert!(!refusals.refused(2, later));
        assert_eq!(refusals.refuse(None, Some(Duration::ZERO), later), 3);
        assert!(!refusals.refused(0, later) && !refusals.refused(1, later));
        assert_eq!(refusals.count(), 2);
    }

    #[test]
    fn without_a_limit_nothing_is_counted() {
        let mut per_ip = PerIp::new(None);
        for _ in 0..1000 {
            assert!(per_ip.admit(ip(1)));
        }
        assert!(per_ip.counts.is_empty());
        per_ip.release(ip(1));
        assert_eq!(per_ip.max(), None);
    }
}
