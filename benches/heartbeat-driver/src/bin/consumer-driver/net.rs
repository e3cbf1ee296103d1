//! Connections: one non-blocking socket per member on one epoll, at most --connects-in-flight
//! connects and ApiVersions handshakes at once, requests framed and answers split by hand.

use crate::protocol as p;
use crate::{Conn, Driver, CLIENT_ID};
use std::io;
use std::process::exit;
use std::time::Instant;

const MAX_FRAME: usize = 64 << 20;

impl Driver {
    /// Sends the frame now if the member's connection is ready, else opens it and sends once the
    /// handshake is done (the caller keeps the request in `pending` and rebuilds it then).
    pub fn connection_ready(&mut self, i: usize) -> bool {
        if self.members[i].conn == Conn::Ready {
            return true;
        }
        self.want_connection(i);
        false
    }

    pub fn want_connection(&mut self, i: usize) {
        if self.members[i].conn != Conn::Down {
            return;
        }
        if self.slots_used < self.cfg.connects_in_flight {
            self.open(i);
        } else {
            self.members[i].conn = Conn::WaitingSlot;
            self.slot_queue.push_back(i);
        }
    }

    fn open(&mut self, i: usize) {
        let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_STREAM | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC, 0) };
        if fd < 0 {
            eprintln!("consumer-driver: socket(): {}", io::Error::last_os_error());
            return self.fail(i, "CONNECTION");
        }
        let _ = set_int_option(fd, libc::IPPROTO_TCP, libc::TCP_NODELAY, 1);
        let _ = set_int_option(fd, libc::SOL_SOCKET, libc::SO_TIMESTAMPNS, 1);
        // Source 127.0.0.k, its port chosen at connect() by the whole 4-tuple.
        let _ = set_int_option(fd, libc::IPPROTO_IP, libc::IP_BIND_ADDRESS_NO_PORT, 1);
        let source = ((self.cfg.first_source + self.next_source % self.cfg.sources) % 254) as u8 + 1;
        self.next_source += 1;
        let local = sockaddr([127, 0, 0, source], 0);
        let size = std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t;
        if unsafe { libc::bind(fd, (&local as *const libc::sockaddr_in).cast(), size) } < 0 {
            eprintln!("consumer-driver: bind 127.0.0.{source}: {}", io::Error::last_os_error());
        }
        let m = &mut self.members[i];
        m.fd = fd;
        m.serial = m.serial.wrapping_add(1);
        m.conn = Conn::Connecting;
        m.holds_slot = true;
        self.slots_used += 1;
        let addr = sockaddr([127, 0, 0, 1], self.cfg.port);
        let ret = unsafe { libc::connect(fd, (&addr as *const libc::sockaddr_in).cast(), size) };
        if ret < 0 && io::Error::last_os_error().raw_os_error() != Some(libc::EINPROGRESS) {
            return self.fail(i, "CONNECTION");
        }
        let mut ev = libc::epoll_event { events: libc::EPOLLOUT as u32, u64: self.event_data(i) };
        if unsafe { libc::epoll_ctl(self.epoll, libc::EPOLL_CTL_ADD, fd, &mut ev) } < 0 {
            self.fail(i, "CONNECTION");
        }
    }

    fn on_connected(&mut self, i: usize) {
        let fd = self.members[i].fd;
        if get_int_option(fd, libc::SOL_SOCKET, libc::SO_ERROR).unwrap_or(-1) != 0 {
            return self.fail(i, "CONNECTION");
        }
        self.interest(i, libc::EPOLLIN);
        let m = &mut self.members[i];
        m.conn = Conn::Handshake;
        m.correlation += 1;
        // ApiVersions first, as the Java client does on every new connection.
        let frame = p::api_versions(m.correlation, CLIENT_ID);
        self.transmit(i, frame);
    }

    fn on_handshake(&mut self, i: usize, frame: &[u8]) {
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
            _ => return self.fail(i, "CONNECTION"),
        }
        self.members[i].conn = Conn::Ready;
        self.ready_conns += 1;
        self.release_slot(i);
        if let Some(req) = self.members[i].pending.take() {
            self.send(i, req);
        }
    }

    fn release_slot(&mut self, i: usize) {
        if !std::mem::take(&mut self.members[i].holds_slot) {
            return;
        }
        self.slots_used -= 1;
        while self.slots_used < self.cfg.connects_in_flight {
            let Some(j) = self.slot_queue.pop_front() else { break };
            self.members[j].conn = Conn::Down;
            self.open(j);
        }
    }

    /// Closes the member's connection (a restart, leaving, or a failure).
    pub fn disconnect(&mut self, i: usize) {
        let m = &mut self.members[i];
        if m.conn == Conn::WaitingSlot {
            self.slot_queue.retain(|&j| j != i);
        }
        if m.conn == Conn::Ready {
            self.ready_conns -= 1;
        }
        if m.fd >= 0 {
            unsafe {
                libc::epoll_ctl(self.epoll, libc::EPOLL_CTL_DEL, m.fd, std::ptr::null_mut());
                libc::close(m.fd);
            }
        }
        m.fd = -1;
        m.conn = Conn::Down;
        m.out = Vec::new();
        m.inbuf = Vec::new();
        m.polling_out = false;
        self.release_slot(i);
    }

    pub fn transmit(&mut self, i: usize, frame: Vec<u8>) {
        let m = &mut self.members[i];
        m.expected = i32::from_be_bytes(frame[8..12].try_into().unwrap());
        m.out = frame;
        m.out_pos = 0;
        self.flush(i);
    }

    fn flush(&mut self, i: usize) {
        let m = &mut self.members[i];
        while m.out_pos < m.out.len() {
            let rest = &m.out[m.out_pos..];
            let n = unsafe { libc::send(m.fd, rest.as_ptr().cast(), rest.len(), libc::MSG_NOSIGNAL) };
            if n >= 0 {
                m.out_pos += n as usize;
                continue;
            }
            match io::Error::last_os_error().raw_os_error() {
                Some(libc::EINTR) => {}
                Some(libc::EAGAIN) => {
                    if !m.polling_out {
                        m.polling_out = true;
                        self.interest(i, libc::EPOLLIN | libc::EPOLLOUT);
                    }
                    return;
                }
                _ => return self.fail(i, "CONNECTION"),
            }
        }
        m.out.clear();
        if m.polling_out {
            m.polling_out = false;
            self.interest(i, libc::EPOLLIN);
        }
    }

    pub fn on_event(&mut self, i: usize, serial: u32, flags: u32) {
        let m = &self.members[i];
        if m.serial != serial || m.fd < 0 {
            return; // an event of a connection closed earlier in this batch
        }
        if m.conn == Conn::Connecting {
            return self.on_connected(i);
        }
        if flags & (libc::EPOLLIN | libc::EPOLLERR | libc::EPOLLHUP) as u32 != 0 {
            self.read(i);
        }
        let m = &self.members[i];
        if flags & libc::EPOLLOUT as u32 != 0 && m.serial == serial && m.fd >= 0 && m.polling_out {
            self.flush(i);
        }
    }

    fn read(&mut self, i: usize) {
        let serial = self.members[i].serial;
        let mut stamped = false;
        loop {
            let m = &mut self.members[i];
            let mut iov = libc::iovec { iov_base: self.read_buf.as_mut_ptr().cast(), iov_len: self.read_buf.len() };
            let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
            msg.msg_iov = &mut iov;
            msg.msg_iovlen = 1;
            msg.msg_control = self.control.as_mut_ptr().cast();
            msg.msg_controllen = std::mem::size_of_val(&self.control);
            let n = unsafe { libc::recvmsg(m.fd, &mut msg, 0) };
            if n > 0 {
                if !stamped {
                    stamped = true;
                    self.received_ns = receive_timestamp(&msg).unwrap_or_else(|| realtime_ns() as i64);
                }
                m.inbuf.extend_from_slice(&self.read_buf[..n as usize]);
                if (n as usize) < self.read_buf.len() {
                    break;
                }
                continue;
            }
            if n == 0 {
                return self.fail(i, "CONNECTION");
            }
            match io::Error::last_os_error().raw_os_error() {
                Some(libc::EINTR) => continue,
                Some(libc::EAGAIN) => break,
                _ => return self.fail(i, "CONNECTION"),
            }
        }
        let now = Instant::now();
        let mut pos = 0;
        loop {
            let m = &self.members[i];
            if m.serial != serial || m.fd < 0 {
                return;
            }
            if m.inbuf.len() - pos < 4 {
                break;
            }
            let size = i32::from_be_bytes(m.inbuf[pos..pos + 4].try_into().unwrap());
            if size < 4 || size as usize > MAX_FRAME {
                return self.fail(i, "CONNECTION");
            }
            if m.inbuf.len() - pos < 4 + size as usize {
                break;
            }
            // Borrow the frame out of the member's buffer while the driver handles it.
            let inbuf = std::mem::take(&mut self.members[i].inbuf);
            self.on_frame(i, &inbuf[pos + 4..pos + 4 + size as usize], now);
            pos += 4 + size as usize;
            let m = &mut self.members[i];
            if m.serial != serial || m.fd < 0 {
                return;
            }
            m.inbuf = inbuf;
        }
        self.members[i].inbuf.drain(..pos);
    }

    fn on_frame(&mut self, i: usize, frame: &[u8], now: Instant) {
        let m = &self.members[i];
        if p::correlation_id(frame) != Ok(m.expected) {
            return self.fail(i, "CONNECTION");
        }
        if m.conn == Conn::Handshake {
            return self.on_handshake(i, frame);
        }
        match p::heartbeat_answer(frame) {
            Ok(answer) => self.on_answer(i, answer, now),
            Err(e) => {
                eprintln!("consumer-driver: undecodable ConsumerGroupHeartbeat answer: {e}");
                self.fail(i, "CONNECTION")
            }
        }
    }

    pub fn event_data(&self, i: usize) -> u64 {
        i as u64 | (self.members[i].serial as u64) << 32
    }

    fn interest(&mut self, i: usize, events: i32) {
        let mut ev = libc::epoll_event { events: events as u32, u64: self.event_data(i) };
        unsafe { libc::epoll_ctl(self.epoll, libc::EPOLL_CTL_MOD, self.members[i].fd, &mut ev) };
    }

    /// Commands from stdin, one per line; end of input quits once the phases queued are done.
    pub fn read_stdin(&mut self) {
        let mut buf = [0u8; 4096];
        loop {
            let n = unsafe { libc::read(0, buf.as_mut_ptr().cast(), buf.len()) };
            if n > 0 {
                self.stdin_buf.push_str(&String::from_utf8_lossy(&buf[..n as usize]));
                continue;
            }
            if n == 0 {
                self.stdin_open = false;
                unsafe { libc::epoll_ctl(self.epoll, libc::EPOLL_CTL_DEL, 0, std::ptr::null_mut()) };
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

fn sockaddr(ip: [u8; 4], port: u16) -> libc::sockaddr_in {
    libc::sockaddr_in {
        sin_family: libc::AF_INET as libc::sa_family_t,
        sin_port: port.to_be(),
        sin_addr: libc::in_addr { s_addr: u32::from_be_bytes(ip).to_be() },
        sin_zero: [0; 8],
    }
}

/// The kernel's receive time (SCM_TIMESTAMPNS, CLOCK_REALTIME ns) of the data a recvmsg returned.
fn receive_timestamp(msg: &libc::msghdr) -> Option<i64> {
    let mut cmsg = unsafe { libc::CMSG_FIRSTHDR(msg) };
    while !cmsg.is_null() {
        let header = unsafe { &*cmsg };
        if header.cmsg_level == libc::SOL_SOCKET && header.cmsg_type == libc::SCM_TIMESTAMPNS {
            let ts: libc::timespec = unsafe { std::ptr::read_unaligned(libc::CMSG_DATA(cmsg).cast()) };
            return Some(ts.tv_sec as i64 * 1_000_000_000 + ts.tv_nsec as i64);
        }
        cmsg = unsafe { libc::CMSG_NXTHDR(msg, cmsg) };
    }
    None
}

pub fn set_nonblocking(fd: i32) -> io::Result<()> {
    let flags = check(unsafe { libc::fcntl(fd, libc::F_GETFL) })?;
    check(unsafe { libc::fcntl(fd, libc::F_SETFL, flags | libc::O_NONBLOCK) }).map(|_| ())
}

/// This process's CPU seconds: (user, system).
pub fn cpu_seconds() -> (f64, f64) {
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut usage) };
    let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    (secs(usage.ru_utime), secs(usage.ru_stime))
}

pub fn realtime_ns() -> u64 {
    let mut ts: libc::timespec = unsafe { std::mem::zeroed() };
    unsafe { libc::clock_gettime(libc::CLOCK_REALTIME, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

fn get_int_option(fd: i32, level: i32, name: i32) -> io::Result<i32> {
    let mut value: i32 = 0;
    let mut len = std::mem::size_of::<i32>() as libc::socklen_t;
    check(unsafe { libc::getsockopt(fd, level, name, (&mut value as *mut i32).cast(), &mut len) })?;
    Ok(value)
}

fn set_int_option(fd: i32, level: i32, name: i32, value: i32) -> io::Result<()> {
    let size = std::mem::size_of::<i32>() as libc::socklen_t;
    check(unsafe { libc::setsockopt(fd, level, name, (&value as *const i32).cast(), size) }).map(|_| ())
}

pub fn check(ret: i32) -> io::Result<i32> {
    if ret < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(ret)
    }
}
