//! Connections: non-blocking sockets on one epoll (one per member, or one per K members with
//! --members-per-connection K), at most --connects-in-flight connects and ApiVersions handshakes
//! at once, requests framed and answers split by hand and matched to members by correlation id.

use crate::protocol as p;
use crate::{Conn, Driver, State, Timer, CLIENT_ID};
use heartbeat_driver::socket::{self, Outbox};
use heartbeat_driver::sys::{realtime_ns, set_int_option};
use std::io;
use std::process::exit;
use std::time::Instant;

const MAX_FRAME: usize = 64 << 20;

/// The requests in flight on one connection: (correlation id, member). At most one per member, so
/// at most K: a short list beats a map.
#[derive(Default)]
pub struct InFlight(Vec<(i32, u32)>);

impl InFlight {
    pub fn add(&mut self, correlation: i32, member: u32) {
        self.0.push((correlation, member));
    }

    /// The member whose request had this correlation id (answers are matched by id, not by
    /// position: a broker answering out of order is caught as an unknown id, never misattributed).
    pub fn take(&mut self, correlation: i32) -> Option<u32> {
        let k = self.0.iter().position(|&(c, _)| c == correlation)?;
        Some(self.0.remove(k).1)
    }

    pub fn forget(&mut self, member: u32) {
        self.0.retain(|&(_, m)| m != member);
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn drain(&mut self) -> impl Iterator<Item = u32> + '_ {
        self.0.drain(..).map(|(_, m)| m)
    }
}

pub struct Connection {
    pub fd: i32,
    /// Told apart from earlier sockets of this connection in epoll events.
    pub serial: u32,
    pub state: Conn,
    pub holds_slot: bool,
    pub out: Outbox,
    pub inbuf: Vec<u8>,
    pub correlation: i32,
    /// The ApiVersions request's correlation id.
    pub handshake: i32,
    pub in_flight: InFlight,
}

impl Default for Connection {
    fn default() -> Connection {
        Connection {
            fd: -1,
            serial: 0,
            state: Conn::Down,
            holds_slot: false,
            out: Outbox::default(),
            inbuf: Vec::new(),
            correlation: 0,
            handshake: 0,
            in_flight: InFlight::default(),
        }
    }
}

impl Connection {
    pub fn next_correlation(&mut self) -> i32 {
        self.correlation = self.correlation.wrapping_add(1);
        self.correlation
    }
}

impl Driver {
    pub fn conn_of(&self, i: usize) -> usize {
        i / self.cfg.members_per_connection
    }

    pub fn members_of(&self, c: usize) -> std::ops::Range<usize> {
        let k = self.cfg.members_per_connection;
        c * k..((c + 1) * k).min(self.cfg.members)
    }

    /// Whether member i's connection is ready for a request; if not it is opened, and the caller
    /// keeps the request in `pending` (sent, rebuilt, once the handshake is done).
    pub fn connection_ready(&mut self, i: usize) -> bool {
        let c = self.conn_of(i);
        if self.conns[c].state == Conn::Ready {
            return true;
        }
        self.want_connection(c);
        false
    }

    pub fn want_connection(&mut self, c: usize) {
        if self.conns[c].state != Conn::Down {
            return;
        }
        if self.slots.available() {
            self.open(c);
        } else {
            self.conns[c].state = Conn::WaitingSlot;
            self.slots.wait(c);
        }
    }

    fn open(&mut self, c: usize) {
        let fd = match socket::tcp_socket() {
            Ok(fd) => fd,
            Err(e) => {
                eprintln!("consumer-driver: socket(): {e}");
                return self.fail_connection(c, "CONNECTION");
            }
        };
        let _ = set_int_option(fd, libc::SOL_SOCKET, libc::SO_TIMESTAMPNS, 1);
        // Source 127.0.0.k, its port chosen at connect() by the whole 4-tuple.
        let _ = set_int_option(fd, libc::IPPROTO_IP, libc::IP_BIND_ADDRESS_NO_PORT, 1);
        let source =
            ((self.cfg.first_source + self.next_source % self.cfg.sources) % 254) as u8 + 1;
        self.next_source += 1;
        let local = socket::sockaddr([127, 0, 0, source], 0);
        if unsafe {
            libc::bind(
                fd,
                (&local as *const libc::sockaddr_in).cast(),
                socket::SOCKADDR_SIZE,
            )
        } < 0
        {
            eprintln!(
                "consumer-driver: bind 127.0.0.{source}: {}",
                io::Error::last_os_error()
            );
        }
        let conn = &mut self.conns[c];
        conn.fd = fd;
        conn.serial = conn.serial.wrapping_add(1);
        conn.state = Conn::Connecting;
        conn.holds_slot = true;
        self.slots.take();
        if socket::start_connect(fd, self.cfg.port).is_err() {
            return self.fail_connection(c, "CONNECTION");
        }
        if socket::epoll_set(
            self.epoll,
            libc::EPOLL_CTL_ADD,
            fd,
            libc::EPOLLOUT,
            self.event_data(c),
        ) < 0
        {
            self.fail_connection(c, "CONNECTION");
        }
    }

    fn on_connected(&mut self, c: usize) {
        let fd = self.conns[c].fd;
        if !socket::connected(fd) {
            return self.fail_connection(c, "CONNECTION");
        }
        self.interest(c, libc::EPOLLIN);
        let conn = &mut self.conns[c];
        conn.state = Conn::Handshake;
        conn.handshake = conn.next_correlation();
        // ApiVersions first, as the Java client does on every new connection.
        let frame = p::api_versions(conn.handshake, CLIENT_ID);
        self.transmit(c, frame);
    }

    fn on_handshake(&mut self, c: usize, frame: &[u8]) {
        match p::api_versions_answer(frame, p::CONSUMER_GROUP_HEARTBEAT) {
            Ok((0, Some(max))) => {
                if self.version.is_none() {
                    self.version = Some(max.min(self.cfg.max_version));
                }
            }
            Ok((0, None)) => {
                eprintln!("consumer-driver: the broker does not offer ConsumerGroupHeartbeat");
                exit(1);
            }
            _ => return self.fail_connection(c, "CONNECTION"),
        }
        self.conns[c].state = Conn::Ready;
        self.ready_conns += 1;
        self.release_slot(c);
        for i in self.members_of(c) {
            if let Some(req) = self.members[i].pending.take() {
                self.send(i, req);
            }
        }
    }

    fn release_slot(&mut self, c: usize) {
        if !std::mem::take(&mut self.conns[c].holds_slot) {
            return;
        }
        self.slots.give_back();
        while let Some(d) = self.slots.next_in_line() {
            self.conns[d].state = Conn::Down;
            self.open(d);
        }
    }

    /// Closes connection c; the requests in flight on it are forgotten (callers that care about
    /// them took them first).
    pub fn close(&mut self, c: usize) {
        let conn = &mut self.conns[c];
        if conn.state == Conn::WaitingSlot {
            self.slots.leave_line(c);
        }
        if conn.state == Conn::Ready {
            self.ready_conns -= 1;
        }
        if conn.fd >= 0 {
            socket::close(self.epoll, conn.fd);
        }
        conn.fd = -1;
        conn.state = Conn::Down;
        conn.out = Outbox::default();
        conn.inbuf = Vec::new();
        conn.in_flight = InFlight::default();
        self.release_slot(c);
    }

    /// Member i has no more use for its connection (left for good, or out at the leave phase):
    /// its own is closed; a shared one once none of its members needs it.
    pub fn release_connection(&mut self, i: usize) {
        let c = self.conn_of(i);
        let idle = |m: &crate::Member| {
            m.state == State::Out
                && m.in_flight.is_none()
                && m.pending.is_none()
                && m.timer != Timer::Rejoin
        };
        if self.cfg.members_per_connection == 1
            || self.members_of(c).all(|j| idle(&self.members[j]))
        {
            self.close(c);
        }
    }

    /// The connection failed (or was closed by the broker): closed, and each member with a
    /// request on it or waiting for it goes on as after a lost request (members.rs `lost`).
    pub fn fail_connection(&mut self, c: usize, what: &str) {
        let mut hit: Vec<usize> = self.conns[c]
            .in_flight
            .drain()
            .map(|i| i as usize)
            .collect();
        hit.extend(
            self.members_of(c)
                .filter(|&i| self.members[i].pending.is_some()),
        );
        self.close(c);
        for i in hit {
            self.lost(i, what);
        }
    }

    /// Member i's request took longer than --request-timeout-ms: as the Java client, the
    /// connection is closed, and with it the other requests on it.
    pub fn timed_out(&mut self, i: usize) {
        let c = self.conn_of(i);
        self.conns[c].in_flight.forget(i as u32);
        self.fail_connection(c, "CONNECTION");
        self.lost(i, "TIMEOUT");
    }

    /// Queues the frame behind what the connection has not sent yet.
    pub fn transmit(&mut self, c: usize, frame: Vec<u8>) {
        let conn = &mut self.conns[c];
        conn.out.push(frame);
        if !conn.out.polling_out {
            self.flush(c);
        }
    }

    fn flush(&mut self, c: usize) {
        let conn = &mut self.conns[c];
        match conn.out.flush(conn.fd) {
            Ok(Some(events)) => self.interest(c, events),
            Ok(None) => {}
            Err(_) => self.fail_connection(c, "CONNECTION"),
        }
    }

    pub fn on_event(&mut self, c: usize, serial: u32, flags: u32) {
        let conn = &self.conns[c];
        if conn.serial != serial || conn.fd < 0 {
            return; // an event of a connection closed earlier in this batch
        }
        if conn.state == Conn::Connecting {
            return self.on_connected(c);
        }
        if flags & (libc::EPOLLIN | libc::EPOLLERR | libc::EPOLLHUP) as u32 != 0 {
            self.read(c);
        }
        let conn = &self.conns[c];
        if flags & libc::EPOLLOUT as u32 != 0
            && conn.serial == serial
            && conn.fd >= 0
            && conn.out.polling_out
        {
            self.flush(c);
        }
    }

    fn read(&mut self, c: usize) {
        let serial = self.conns[c].serial;
        // (end of the data in inbuf, kernel receive time) per recvmsg: a frame is timed by the
        // read that completed it (the stamp of the newest segment that read returned).
        self.stamps.clear();
        let conn = &mut self.conns[c];
        let (inbuf, stamps) = (&mut conn.inbuf, &mut self.stamps);
        let read = socket::read_available(
            conn.fd,
            &mut self.read_buf,
            &mut self.control,
            |data, at| {
                inbuf.extend_from_slice(data);
                stamps.push((inbuf.len(), at.unwrap_or_else(realtime_ns)));
            },
        );
        if read.is_err() {
            return self.fail_connection(c, "CONNECTION");
        }
        let now = Instant::now();
        let (mut pos, mut stamp) = (0, 0);
        loop {
            let conn = &self.conns[c];
            if conn.serial != serial || conn.fd < 0 {
                return;
            }
            let end = match socket::frame_end(&conn.inbuf, pos, MAX_FRAME) {
                Ok(Some(end)) => end,
                Ok(None) => break,
                Err(_) => return self.fail_connection(c, "CONNECTION"),
            };
            while stamp + 1 < self.stamps.len() && self.stamps[stamp].0 < end {
                stamp += 1;
            }
            self.received_ns = self.stamps.get(stamp).map_or_else(realtime_ns, |s| s.1);
            // Borrow the frame out of the connection's buffer while the driver handles it.
            let inbuf = std::mem::take(&mut self.conns[c].inbuf);
            self.on_frame(c, &inbuf[pos + 4..end], now);
            pos = end;
            let conn = &mut self.conns[c];
            if conn.serial != serial || conn.fd < 0 {
                return;
            }
            conn.inbuf = inbuf;
        }
        self.conns[c].inbuf.drain(..pos);
    }

    fn on_frame(&mut self, c: usize, frame: &[u8], now: Instant) {
        let Ok(correlation) = p::correlation_id(frame) else {
            return self.fail_connection(c, "CONNECTION");
        };
        if self.conns[c].state == Conn::Handshake {
            if correlation != self.conns[c].handshake {
                return self.fail_connection(c, "CONNECTION");
            }
            return self.on_handshake(c, frame);
        }
        let answer = match p::heartbeat_answer(frame) {
            Ok(answer) => answer,
            Err(e) => {
                eprintln!("consumer-driver: undecodable ConsumerGroupHeartbeat answer: {e}");
                return self.fail_connection(c, "CONNECTION");
            }
        };
        match self.conns[c].in_flight.take(correlation) {
            Some(i) => self.on_answer(i as usize, answer, now),
            None => self.fail_connection(c, "CONNECTION"), // no request of ours: a broken stream
        }
    }

    pub fn event_data(&self, c: usize) -> u64 {
        socket::event_data(c, self.conns[c].serial)
    }

    fn interest(&mut self, c: usize, events: i32) {
        socket::epoll_set(
            self.epoll,
            libc::EPOLL_CTL_MOD,
            self.conns[c].fd,
            events,
            self.event_data(c),
        );
    }

    /// Commands from stdin, one per line; end of input quits once the phases queued are done.
    pub fn read_stdin(&mut self) {
        let mut buf = [0u8; 4096];
        loop {
            let n = unsafe { libc::read(0, buf.as_mut_ptr().cast(), buf.len()) };
            if n > 0 {
                self.stdin_buf
                    .push_str(&String::from_utf8_lossy(&buf[..n as usize]));
                continue;
            }
            if n == 0 {
                self.stdin_open = false;
                unsafe {
                    libc::epoll_ctl(self.epoll, libc::EPOLL_CTL_DEL, 0, std::ptr::null_mut())
                };
            }
            break;
        }
        while let Some(end) = self.stdin_buf.find('\n') {
            let line: String = self.stdin_buf.drain(..=end).collect();
            if !line.trim().is_empty() {
                self.commands.push_back(line.trim().to_string());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::InFlight;

    #[test]
    fn answers_are_matched_to_members_by_correlation_id() {
        let mut f = InFlight::default();
        f.add(7, 70);
        f.add(8, 80);
        f.add(9, 90);
        // Out of order, and an id nobody sent or already answered is nobody's.
        assert_eq!(f.take(9), Some(90));
        assert_eq!(f.take(7), Some(70));
        assert_eq!(f.take(7), None);
        assert_eq!(f.take(42), None);
        assert_eq!(f.len(), 1);
        f.add(10, 70);
        f.forget(80);
        assert_eq!(f.take(8), None);
        assert_eq!(f.drain().collect::<Vec<_>>(), vec![70]);
        assert_eq!(f.len(), 0);
    }
}
